"""The package front: every exported name resolves, and the console script does not load Textual."""

from __future__ import annotations

import subprocess
import sys

import explorer


def test_every_name_in_all_resolves_and_all_is_sorted() -> None:
    assert explorer.__all__ == sorted(explorer.__all__)
    for name in explorer.__all__:
        assert getattr(explorer, name) is not None
    assert set(explorer.__all__) <= set(dir(explorer))


def test_the_console_script_imports_no_textual_until_a_screen_is_opened() -> None:
    """Nor the openai SDK (~0.8 s) until an OpenAI provider is made: `footprint --help` stays quick."""
    code = "import sys, explorer.cli; print('textual' in sys.modules, 'openai' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False False"

"""The guide's whole examples run as written: each block marked runnable is a program, run here.

A block is marked by the comment line :data:`MARK` right above its fence. Each one runs in a fresh
folder (it may write a store there), in a child interpreter without an OpenAI key or server, so an
example that reached for a real model or the network would fail here rather than for a reader.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MARK = "<!-- runnable: tests/test_docs_examples.py runs this block as a program -->"
_BLOCK = re.compile(re.escape(MARK) + r"\n```python\n(.*?)```", re.S)

#: the pages whose whole example a reader would copy first: each must keep one marked
PAGES_WITH_EXAMPLES = ("agent.md", "orchestration.md", "durable.md", "hosting.md", "sessions.md")


def marked_blocks() -> list[tuple[str, str]]:
    """(page:line, code) of every marked block in the README and the guide."""
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        for match in _BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 2
            found.append((f"{page.relative_to(ROOT)}:{line}", match.group(1)))
    return found


def test_the_first_pages_keep_a_whole_example() -> None:
    pages = {where.split(":")[0] for where, _ in marked_blocks()}
    assert {f"docs/{page}" for page in PAGES_WITH_EXAMPLES} <= pages


def test_every_mark_sits_on_a_python_block() -> None:
    """A mark moved off its block (or above a block of another language) would test nothing."""
    marks = sum(page.read_text(encoding="utf-8").count(MARK)
                for page in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
    assert marks == len(marked_blocks())


@pytest.mark.parametrize(("where", "code"), marked_blocks(), ids=[where for where, _ in marked_blocks()])
def test_the_example_runs(where: str, code: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    program = tmp_path / "example.py"
    program.write_text(code, encoding="utf-8")
    done = subprocess.run([sys.executable, str(program)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, f"{where} failed:\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, f"{where} wrote a traceback:\n{done.stderr}"
    assert done.stdout.strip(), f"{where} printed nothing"

"""The lazy fronts of ``agent`` and ``hosting``: each name of ``__all__`` is imported from its module on
first use (PEP 562), so importing the package (a command's ``--help``) loads none of it."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FRONTS = ["agent", "hosting"]


def _in_a_fresh_interpreter(package: str) -> dict[str, object]:
    code = f"""
import json, sys
import {package} as front
loaded = sorted(m for m in sys.modules if m.startswith(("agent.", "hosting.")) and m != "agent._lazy")
heavy = [m for m in ("fastapi", "uvicorn", "openai", "textual", "duckdb") if m in sys.modules]
kinds = {{name: type(getattr(front, name)).__name__ for name in front.__all__}}
print(json.dumps({{"loaded_on_import": loaded, "heavy": heavy, "kinds": kinds, "dir": dir(front)}}))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 0, result.stderr
    answer: dict[str, object] = json.loads(result.stdout)
    return answer


@pytest.mark.parametrize("package", FRONTS)
def test_importing_the_package_loads_none_of_it_and_every_name_resolves(package: str) -> None:
    seen = _in_a_fresh_interpreter(package)
    assert seen["loaded_on_import"] == [] and seen["heavy"] == [], seen
    front = importlib.import_module(package)
    assert set(seen["kinds"]) == set(front.__all__)  # type: ignore[arg-type]
    assert set(front.__all__) <= set(seen["dir"])  # type: ignore[arg-type]
    for name in front.__all__:
        value = getattr(front, name)
        module = importlib.import_module(front._EXPORTS[name], package)
        assert value is getattr(module, name), name


@pytest.mark.parametrize("package", FRONTS)
def test_the_type_checking_imports_the_lazy_table_and_all_name_the_same_things(package: str) -> None:
    front = importlib.import_module(package)
    tree = ast.parse(Path(front.__file__ or "").read_text())
    guarded = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    typed = {alias.name: "." * node.level + (node.module or "") for node in guarded.body
             if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert typed == front._EXPORTS, "mypy reads the TYPE_CHECKING block; the program reads _EXPORTS"
    assert sorted(front._EXPORTS) == sorted(front.__all__) and len(set(front.__all__)) == len(front.__all__)


@pytest.mark.parametrize("package", FRONTS)
def test_a_name_the_package_does_not_export_is_an_attribute_error_naming_it(package: str) -> None:
    front = importlib.import_module(package)
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'Nope'"):
        _ = front.Nope
    assert not hasattr(front, "Nope")

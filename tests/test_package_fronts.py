"""The lazy fronts (tracer._lazy): each name of ``__all__`` is imported from its module on first use (PEP 562),
so importing the package loads none of it; and a command's ``--help``, or a usage error, imports only the
command modules and the fronts, never the store, the agent loop or the web stack."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
FRONTS = ["tracer", "agent", "hosting", "explorer", "agent.evidence", "agent.orchestration", "hosting.sessions"]
#: packages a command imports only when it runs (each costs 10-100 ms to import; asyncio imports ssl)
HEAVY = ("duckdb", "psycopg", "jsonschema", "msgspec", "openai", "fastapi", "uvicorn", "textual", "asyncio")


def _in_a_fresh_interpreter(package: str) -> dict[str, Any]:
    code = f"""
import json, sys
import {package} as front
itself = {{"{package}".rpartition(".")[0], "{package}", "tracer._lazy"}}
loaded = sorted(m for m in sys.modules if m.startswith(("tracer.", "agent.", "hosting.", "explorer.")) and m not in itself)
heavy = [m for m in {HEAVY!r} if m in sys.modules]
kinds = {{name: type(getattr(front, name)).__name__ for name in front.__all__}}
print(json.dumps({{"loaded_on_import": loaded, "heavy": heavy, "kinds": kinds, "dir": dir(front)}}))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 0, result.stderr
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


@pytest.mark.parametrize("package", FRONTS)
def test_importing_the_package_loads_none_of_it_and_every_name_resolves(package: str) -> None:
    seen = _in_a_fresh_interpreter(package)
    assert seen["loaded_on_import"] == [] and seen["heavy"] == [], seen
    front = importlib.import_module(package)
    assert set(seen["kinds"]) == set(front.__all__)
    assert set(front.__all__) <= set(seen["dir"])
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


#: the modules a command's --help may import: the package fronts and these (click's definitions of the commands)
COMMAND_MODULES = {"cli", "_commands", "_export_cli", "errors", "_lazy", "_terminal"}


def _loaded_by(argv: list[str]) -> tuple[int, list[str], list[str]]:
    """``footprint ARGV`` in a fresh interpreter: its exit code, the footprint modules it imported that are
    neither a package front nor a command module, and the heavy packages it imported."""
    code = f"""
import sys
from explorer.cli import main
try:
    main(sys.argv[1:])
finally:
    ours = [m for m in sys.modules if m.split(".")[0] in ("tracer", "agent", "hosting", "explorer")]
    work = [m for m in ours if not hasattr(sys.modules[m], "__path__") and m.rpartition(".")[2] not in {COMMAND_MODULES!r}]
    print("loaded:", " ".join(sorted(work)), "|", " ".join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)
"""
    result = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=ROOT, timeout=60)
    line = next(line for line in result.stderr.splitlines() if line.startswith("loaded:"))
    work, _, heavy = line.removeprefix("loaded:").partition("|")
    return result.returncode, work.split(), heavy.split()


def _every_command() -> list[str]:
    from explorer.cli import COMMANDS

    return sorted(COMMANDS)


@pytest.mark.parametrize("command", _every_command())
@pytest.mark.parametrize("wrong", [False, True], ids=["help", "unknown-option"])
def test_a_commands_help_and_a_usage_error_import_neither_the_store_the_agent_nor_the_web_stack(
    command: str, wrong: bool
) -> None:
    """A command's module defines its options with click alone and imports what the command uses when it
    runs: so ``footprint COMMAND --help`` and a wrong argument are answered before DuckDB, the agent loop,
    the session stores or FastAPI are imported (each of these took 0.2-0.4 s)."""
    code, work, heavy = _loaded_by([command, "--no-such-option" if wrong else "--help"])
    assert code == (2 if wrong else 0)
    assert (work, heavy) == ([], []), f"footprint {command}: {work} {heavy}"


def test_the_command_modules_copies_of_the_defaults_agree_with_the_library() -> None:
    """The command modules keep their own copy of the defaults their --help shows, as importing the
    modules that define them imports DuckDB or the agent loop."""
    import agent.evidence._counterfactual as counterfactual
    import agent.evidence.cli as evidence_cli
    import hosting.cli as hosting_cli
    import tracer
    import tracer.cli as tracer_cli
    from hosting._protocol import DEFAULT_REQUEST_TIMEOUT
    from hosting.sessions import DEFAULT_CACHE_BYTES

    assert tracer_cli.DEFAULT_PATH == tracer.DEFAULT_PATH
    assert evidence_cli.NEW_CALL_POLICIES == counterfactual.NEW_CALL_POLICIES
    assert hosting_cli.DEFAULT_CACHE_MB * 1024 * 1024 == DEFAULT_CACHE_BYTES
    request_timeout = next(p for p in hosting_cli.serve_command.params if p.name == "request_timeout")
    assert request_timeout.default == DEFAULT_REQUEST_TIMEOUT

"""Opening the explorer from code and from the command line, with and without a terminal."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from explorer import explore_command, open_run
from explorer.cli import cli


def test_without_a_terminal_open_run_prints_the_command_and_succeeds(sample_path: Path) -> None:
    printed: list[str] = []
    assert open_run(sample_path, "r-000003", interactive=False, echo=printed.append) == 0
    assert printed == [f"Explore it: footprint explore --db {sample_path} --run r-000003"]
    assert explore_command("my store.duckdb") == "footprint explore --db 'my store.duckdb'"


def test_open_run_names_a_missing_store(tmp_path: Path) -> None:
    from explorer import SourceError

    with pytest.raises(SourceError, match="no footprint store at"):
        open_run(tmp_path / "nope.duckdb", interactive=True)


@pytest.mark.parametrize("command", [["explore"], ["sandbox"]])
def test_the_commands_need_a_terminal(command: list[str], sample_path: Path) -> None:
    result = CliRunner().invoke(cli, [*command, "--help"])
    assert result.exit_code == 0 and "Usage:" in result.output
    result = CliRunner().invoke(cli, [command[0], "--db", str(sample_path)] if command == ["explore"] else command)
    assert result.exit_code == 1
    assert "needs a terminal" in result.output


def test_explore_refuses_a_file_and_a_host_together(sample_path: Path) -> None:
    result = CliRunner().invoke(cli, ["explore", "--db", str(sample_path), "--host", "http://127.0.0.1:1"])
    assert result.exit_code == 2 and "not both" in result.output


def test_explore_names_a_missing_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("explorer._commands.has_terminal", lambda: True)
    result = CliRunner().invoke(cli, ["explore", "--db", str(tmp_path / "none.duckdb")])
    assert result.exit_code == 1 and "no footprint store at" in result.output

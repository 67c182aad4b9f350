"""The `footprint` console script itself: no command, usage errors, and errors before any work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest

from explorer.cli import COMMANDS, main

ROOT = Path(__file__).resolve().parents[2]


def _exit(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


@pytest.mark.parametrize("argv", [[], ["export"]])
def test_no_command_prints_the_help_on_stdout_and_succeeds_like_help(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _exit(argv, capsys)
    assert (code, err) == (0, "")
    assert out.startswith(f"Usage: footprint {' '.join(argv)}".rstrip() + " [OPTIONS] COMMAND") and "Commands:" in out
    assert _exit([*argv, "--help"], capsys) == (0, out, "")


@pytest.mark.parametrize(("argv", "message"), [
    (["nosuch"], "No such command 'nosuch'"), (["runs", "--bogus"], "No such option '--bogus'"),
    (["runs", "--limit", "x"], "'x' is not a valid integer range"), (["diff", "A"], "give the two runs"),
])
def test_a_usage_error_is_exit_2_with_the_usage_on_stderr(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _exit(argv, capsys)
    assert (code, out) == (2, "")
    assert err.startswith("Usage: footprint") and "Try 'footprint" in err and message in err, err


@pytest.mark.parametrize(("parent", "says"), [
    ("no/such/dir", "the directory {parent} does not exist"), ("a-file", "{parent} is a file, not a directory"),
])
def test_a_store_in_a_directory_that_is_not_there_names_the_directory(
    tmp_path: Path, parent: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a-file").write_text("x")
    db = tmp_path / parent / "fp.duckdb"
    code, _out, err = _exit(["demo", "--db", str(db)], capsys)
    assert code == 1 and "Traceback" not in err
    expected = says.format(parent=tmp_path / parent)
    assert err == f"footprint: error: cannot create the footprint store {db}: {expected} " \
                  f"(create the directory, or pass another --db)\n", err
    assert not db.exists()


@pytest.mark.parametrize("argv", [["replay", "last"], ["blame", "last"], ["counterfactual", "last", "--remove", "x"],
                                  ["blame-team", "last", "--agents", "x:y"]])
def test_a_re_run_of_a_store_that_is_not_there_says_so_and_makes_none(
    tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "none.duckdb"
    code, out, err = _exit([*argv, "--db", str(db)], capsys)
    assert (code, out) == (1, "")
    assert err == f"footprint: error: no footprint store at {db}: record a run first (footprint demo)\n"
    assert list(tmp_path.iterdir()) == []  # no empty store left behind


def test_a_limit_past_what_the_store_can_count_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _exit(["runs", "--limit", "999999999999999999999", "--db", str(tmp_path / "x.duckdb")], capsys)
    assert code == 2 and "Invalid value for '--limit'" in err and "internal error" not in err


def test_every_re_run_command_takes_repeat_by_the_same_name(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("counterfactual", "blame", "blame-team"):
        code, out, _ = _exit([command, "--help"], capsys)
        assert code == 0 and "--repeat, --repeats INTEGER RANGE" in out, (command, out)


def test_a_command_refusing_prints_the_one_error_line_every_command_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("explorer._commands.has_terminal", lambda: False)
    assert _exit(["explore", "--db", str(tmp_path / "x.duckdb")], capsys) == (
        1, "", "footprint: error: footprint explore is a full-screen app and needs a terminal\n")
    monkeypatch.setattr("explorer._commands.has_terminal", lambda: True)
    code, _, err = _exit(["explore", "--db", str(tmp_path / "x.duckdb")], capsys)
    assert code == 1 and err.startswith(f"footprint: error: no footprint store at {tmp_path / 'x.duckdb'}"), err


def test_explore_takes_the_provider_and_tools_blame_takes(
    sample_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The why screen's re-runs are answered by --provider (its advice names it), checked before the app opens."""
    from agent.providers._demo import OfflineDemoModel
    from explorer import ExplorerApp
    from tracer import Store

    opened: list[ExplorerApp] = []
    monkeypatch.setattr("explorer._commands.has_terminal", lambda: True)
    monkeypatch.setattr(ExplorerApp, "run", lambda self, *a, **k: opened.append(self))
    code, out, err = _exit(["explore", "--db", str(sample_path), "--provider", "no_such_module_xyz:model"], capsys)
    assert (code, out, opened) == (2, "", []) and "cannot load no_such_module_xyz:model" in err, err
    code, _, err = _exit(["explore", "--db", str(sample_path), "--tools", "no_such_module_xyz:tools"], capsys)
    assert (code, opened) == (2, []) and "cannot load no_such_module_xyz:tools" in err, err
    assert _exit(["explore", "--db", str(sample_path), "--provider", "offline-demo"], capsys)[0] == 0
    app = opened[-1]
    with Store.open(sample_path, read_only=True) as store:
        run = store.list_runs(limit=1)[0]
    assert app.evidence_provider is not None and isinstance(app.evidence_provider(run), OfflineDemoModel)
    assert app.evidence_tools is not None and app.evidence_tools(run) is not None


def test_the_command_table_names_every_command_the_packages_register_with_its_summary() -> None:
    """`footprint --help` lists COMMANDS without importing them: a command added, renamed or re-worded in its
    package and not in the table would be missing or listed wrong."""
    from agent import cli as agent_cli
    from explorer._commands import commands
    from explorer.cli import cli
    from hosting import cli as hosting_cli
    from tracer import cli as tracer_cli

    registered = click.Group()
    tracer_cli.register(registered)
    agent_cli.register(registered)
    hosting_cli.register(registered)
    for command in commands():
        registered.add_command(command)
    assert sorted(COMMANDS) == sorted(registered.commands)
    context = click.Context(cli)
    for name, command in registered.commands.items():
        loaded = cli.get_command(context, name)
        assert loaded is not None and loaded.name == command.name and loaded.help == command.help, name
        assert (loaded.short_help, loaded.hidden, loaded.deprecated) == (None, False, False), name
        assert COMMANDS[name].summary == " ".join((command.help or "").partition("\n\n")[0].split()), name


def _imports_after(argv: list[str]) -> set[str]:
    """The heavy packages ``footprint ARGV`` has imported when it exits, run in a fresh interpreter."""
    code = ("import sys\nfrom explorer.cli import main\ntry:\n    main(sys.argv[1:])\nfinally:\n"
            "    print(' '.join(m for m in ('fastapi', 'uvicorn', 'openai', 'textual', 'duckdb', 'agent', 'hosting')"
            " if m in sys.modules), file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 0, result.stderr
    return set(result.stderr.split())


@pytest.mark.parametrize("argv", [["--help"], ["show", "--help"], ["sql", "--help"]])
def test_the_help_imports_neither_the_host_the_agent_nor_the_openai_sdk(argv: list[str]) -> None:
    imported = _imports_after(argv)
    assert not imported & {"fastapi", "uvicorn", "openai", "textual", "agent", "hosting"}, imported
    if argv == ["--help"]:
        assert "duckdb" not in imported  # nor the store: the command table lists the commands


@pytest.mark.parametrize("command", ["serve", "up", "explore", "sandbox", "blame", "replay"])
def test_a_commands_help_imports_neither_the_web_stack_the_ui_nor_the_openai_sdk(command: str) -> None:
    """The host's and the explorer's commands build their app only when they run (the agent and hosting
    fronts import a name when it is first used): their help imports neither FastAPI nor Textual."""
    imported = _imports_after([command, "--help"])
    assert not imported & {"fastapi", "uvicorn", "openai", "textual"}, imported
    if command in ("blame", "replay"):
        assert "hosting" not in imported


@pytest.mark.parametrize("argv", [["runs"], ["show", "last"], ["sql", "select count(*) from runs"]])
def test_the_store_commands_import_neither_the_host_the_agent_nor_the_openai_sdk(
    argv: list[str], sample_path: Path
) -> None:
    imported = _imports_after([*argv, "--db", str(sample_path)])
    assert not imported & {"fastapi", "uvicorn", "openai", "textual", "agent", "hosting"}, imported


@pytest.mark.parametrize("command", ["explore", "sandbox", "up"])
def test_a_store_that_is_a_directory_is_the_one_error_line_every_command_prints(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """As `footprint runs --db DIR` says it (not click's usage error, exit 2), terminal or not."""
    folder = tmp_path / "dirstore"
    folder.mkdir()
    expected = (1, "", f"footprint: error: {folder} is a directory, not a footprint store\n")
    assert _exit(["runs", "--db", str(folder)], capsys) == expected
    assert _exit([command, "--db", str(folder)], capsys) == expected
    assert list(folder.iterdir()) == []


def test_the_explorer_ending_on_an_error_exits_non_zero_with_one_line(
    sample_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An error no handler caught ends the app; `footprint explore` then fails as any command does on an
    internal error (exit 70, one line on stderr), not with Textual's traceback and exit 0."""
    from explorer import ExplorerApp
    from explorer.screens.runs import RunsScreen

    def crash(self: RunsScreen) -> None:
        raise RuntimeError("the screen broke\non two lines")

    run = ExplorerApp.run
    monkeypatch.setattr("explorer._commands.has_terminal", lambda: True)
    monkeypatch.setattr(ExplorerApp, "run", lambda self, **_: run(self, headless=True, size=(80, 24)))
    monkeypatch.setattr(RunsScreen, "_show_filters", crash)
    monkeypatch.delenv("FOOTPRINT_DEBUG", raising=False)
    code, out, err = _exit(["explore", "--db", str(sample_path)], capsys)
    assert (code, out) == (70, "")
    assert err == ("footprint: internal error: RuntimeError: the screen broke on two lines "
                   "(set FOOTPRINT_DEBUG=1 for details)\n"), err

"""The `footprint` console script: one entry point for every command.

Each package defines its commands (``tracer.cli``, ``agent.cli``, ``hosting.cli``, ``explorer._commands``);
:data:`COMMANDS` names each one and where it is, and a command's module is imported only when that command
is run or its help is shown: ``footprint --help`` lists them from the table, and imports neither the host
(FastAPI, uvicorn), the agent nor the store. Errors are printed on stderr without a traceback and give a
non-zero exit code.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import NamedTuple

import click


class CommandEntry(NamedTuple):
    """A command of :data:`COMMANDS`: how to get it, and the first paragraph of its help."""

    load: Callable[[], click.Command]
    summary: str


def _defined_in(module: str, attribute: str) -> Callable[[], click.Command]:
    def load() -> click.Command:
        command: click.Command = getattr(importlib.import_module(module), attribute)
        return command

    return load


def _open_run(db: str, run_id: str) -> None:
    """Open the explorer at a run (``footprint demo`` ends with this in a terminal)."""
    from ._open import open_run

    open_run(db, run_id, interactive=True)


def _demo() -> click.Command:
    from agent.cli import demo_command

    return demo_command(open_run=_open_run)


#: Every command by name. The summary is what ``footprint --help`` lists without importing the command;
#: tests/explorer/test_cli.py checks it, and the names, against the packages' own ``register``.
COMMANDS: dict[str, CommandEntry] = {
    "blame": CommandEntry(
        _defined_in("agent.evidence.cli", "blame_command"),
        "Find the context items that made RUN answer as it did: each suspect `why` names, most likely "
        "first, is edited in a counterfactual (after a control re-run); the items whose edit flips the "
        "answer are reported, causes first, each with its chain, and the re-runs made and time taken."),
    "blame-team": CommandEntry(
        _defined_in("agent.orchestration.cli", "blame_team_command"),
        "Name the agent and the stage of a team's run that decided its answer, with counterfactual "
        "evidence."),
    "counterfactual": CommandEntry(
        _defined_in("agent.evidence.cli", "counterfactual_command"),
        "Re-run RUN with items edited, and say whether the answer flips."),
    "demo": CommandEntry(_demo, "Record the demo scenario and explain its wrong answer."),
    "diff": CommandEntry(
        _defined_in("tracer.cli", "diff_command"),
        "Compare two runs, or with --stages two snapshots (`compare` is another name for it)."),
    "dropped": CommandEntry(
        _defined_in("agent.evidence.cli", "dropped_command"),
        "For each inference of RUN, the context that was available but not sent, and what left it out."),
    "explore": CommandEntry(
        _defined_in("explorer._commands", "explore"),
        "Browse recorded runs, their flowcharts and snapshots, and ask why an answer was given."),
    "export": CommandEntry(
        _defined_in("tracer._export_cli", "export"),
        "Export recorded runs: OpenTelemetry spans over OTLP, or the store's views as Parquet files."),
    "replay": CommandEntry(
        _defined_in("agent.evidence.cli", "replay_command"),
        "Run RUN again from its recording: recorded model outputs and tool results, no network, no side "
        "effects."),
    "runs": CommandEntry(
        _defined_in("tracer.cli", "runs_command"),
        "List recorded runs, newest first (re-runs forked from a recorded run only with --forks)."),
    "sandbox": CommandEntry(
        _defined_in("explorer._commands", "sandbox"),
        "Create personas, chat with them (their conversation resumes), edit and delete them."),
    "serve": CommandEntry(
        _defined_in("hosting.cli", "serve_command"),
        "Start the standing-agent host: sessions, turns over HTTP, and the read API for recordings."),
    "show": CommandEntry(
        _defined_in("tracer.cli", "show_command"),
        "Show a run's flowchart: its stages in order, parallel tool calls as a fork/join block."),
    "sql": CommandEntry(
        _defined_in("tracer.cli", "sql_command"),
        "Run a read-only SQL query against the store's views and print the rows as a table."),
    "up": CommandEntry(
        _defined_in("explorer._commands", "up"),
        "Start the standing-agent host and the explorer in one process."),
    "why": CommandEntry(
        _defined_in("tracer.cli", "why_command"),
        "Explain an answer: the context it came from, each item with its origin, walked back across the "
        "session."),
}
COMMANDS["compare"] = COMMANDS["diff"]  # one command, two names: people look for either


class _LazyGroup(click.Group):
    """The commands of :data:`COMMANDS`, each imported the first time it is asked for (run, or its help)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.add_command(COMMANDS[cmd_name].load(), name=cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # click shortens each summary to the terminal's width as it would the command's own help
        listed = {name: click.Command(name, help=entry.summary) for name, entry in COMMANDS.items()}
        click.Group(commands=listed).format_commands(ctx, formatter)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="footprint", prog_name="footprint")
def cli() -> None:
    """footprint: record agent runs as flowcharts of context snapshots, and ask why an answer was given."""


#: click 8.2+ raises this for a group given no command (8.1 printed the help and exited 0 itself)
_NO_COMMAND: tuple[type[Exception], ...] = tuple(
    e for e in (getattr(click.exceptions, "NoArgsIsHelpError", None),) if isinstance(e, type))


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns (and exits with) its exit code.

    ``footprint`` alone (or ``footprint export`` alone) prints its help on stdout and exits 0, as
    ``--help`` does; a usage error (an unknown command or option, a missing argument) prints the
    usage and the error on stderr and exits 2.
    """
    try:
        cli.main(args=argv, prog_name="footprint", standalone_mode=False)
    except _NO_COMMAND as exc:
        context = getattr(exc, "ctx", None)
        click.echo(context.get_help() if context is not None else cli.get_help(click.Context(cli)))
        code = 0
    except click.exceptions.Abort:
        click.echo("footprint: aborted", err=True)
        code = 130
    except click.UsageError as exc:
        exc.show()  # the usage, a hint and the error
        code = exc.exit_code
    except click.ClickException as exc:  # a command refusing: the same one line as a footprint error
        click.echo(f"footprint: error: {exc.format_message()}", err=True)
        code = exc.exit_code
    except KeyboardInterrupt:
        click.echo("footprint: interrupted", err=True)
        code = 130
    except Exception as exc:
        from tracer import FootprintError  # here, not at the top: `footprint --help` does not load the store

        if isinstance(exc, FootprintError):  # one line, though it quotes a multi-line text (DuckDB's "LINE 1: ..." and caret)
            click.echo(f"footprint: error: {' '.join(str(exc).split())}", err=True)
            code = 1
        elif os.environ.get("FOOTPRINT_DEBUG"):
            raise
        else:
            from ._format import visible  # (what --help does not need is imported when it is needed)

            said = visible(" ".join(str(exc).split()))  # one line, as every other error, its terminal codes shown
            click.echo(f"footprint: internal error: {type(exc).__name__}: {said} (set FOOTPRINT_DEBUG=1 for details)",
                       err=True)
            code = 70
    else:
        code = 0
    sys.exit(code)

"""The `footprint` console script: one entry point for every command.

Each package contributes its commands (``tracer.cli``, ``agent.cli``, ``hosting.cli``, this
module); errors are printed on stderr without a traceback and give a non-zero exit code.
"""

from __future__ import annotations

import os
import sys

import click

from agent import cli as agent_cli
from hosting import cli as hosting_cli
from tracer import FootprintError
from tracer import cli as tracer_cli


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="footprint", prog_name="footprint")
def cli() -> None:
    """footprint: record agent runs as flowcharts of context snapshots, and ask why an answer was given."""


def _open_run(db: str, run_id: str) -> None:
    """Open the explorer at a run (``footprint demo`` ends with this in a terminal)."""
    from ._open import open_run

    open_run(db, run_id, interactive=True)


tracer_cli.register(cli)
agent_cli.register(cli, open_run=_open_run)
hosting_cli.register(cli)


def register(group: click.Group) -> None:
    """Add the explorer commands to ``group``."""
    from ._commands import commands

    for command in commands():
        group.add_command(command)


register(cli)


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
    except FootprintError as exc:  # one line, though it quotes a multi-line text (DuckDB's "LINE 1: ..." and caret)
        click.echo(f"footprint: error: {' '.join(str(exc).split())}", err=True)
        code = 1
    except KeyboardInterrupt:
        click.echo("footprint: interrupted", err=True)
        code = 130
    except Exception as exc:
        if os.environ.get("FOOTPRINT_DEBUG"):
            raise
        click.echo(f"footprint: internal error: {type(exc).__name__}: {exc} (set FOOTPRINT_DEBUG=1 for details)", err=True)
        code = 70
    else:
        code = 0
    sys.exit(code)

"""The agent commands of the `footprint` CLI: demo (and the evidence commands: replay, counterfactual, blame)."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable

import click

from tracer.cli import db_option

#: Called after the demo with (db path, wrong run id) when it runs in a terminal; the explorer sets it.
OpenRun = Callable[[str, str], None]


def register(group: click.Group, *, open_run: OpenRun | None = None) -> None:
    """Add the agent commands to ``group`` (``open_run`` opens the explorer at a run after the demo)."""
    from .evidence import cli as evidence_cli
    from .orchestration import cli as orchestration_cli

    evidence_cli.register(group)
    orchestration_cli.register(group)
    group.add_command(demo_command(open_run=open_run))


def demo_command(*, open_run: OpenRun | None = None) -> click.Command:
    """The ``demo`` command; ``open_run`` opens the explorer at the wrong answer afterwards, in a terminal."""

    @click.command()
    @db_option
    @click.option("--no-explore", is_flag=True, help="Do not open the explorer afterwards.")
    def demo(db: str, no_explore: bool) -> None:
        """Record the demo scenario and explain its wrong answer.

        Without OPENAI_API_KEY it uses the offline demo model (deterministic; every run is labelled
        offline-demo); with it, the real model.
        """
        import asyncio  # here, not at the top: it imports ssl (20 ms), which no --help needs

        from tracer import Store

        from .demo import run_demo

        with Store.open(db) as store:
            result = asyncio.run(run_demo(store, echo=click.echo))
        if result.wrong_run_id is None:
            return
        command = shlex.join(["footprint", "explore", "--db", db, "--run", result.wrong_run_id])
        if no_explore or open_run is None or not (sys.stdin.isatty() and sys.stdout.isatty()):
            click.echo(f"Open the explorer at the wrong answer:  {command}")
            return
        open_run(db, result.wrong_run_id)

    return demo

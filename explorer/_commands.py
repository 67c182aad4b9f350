"""The explorer's commands: `footprint explore`, `footprint sandbox` and `footprint up`.

Each imports the store, the agent and the app when it runs, so that its ``--help`` or a usage error is answered
at once.
"""

from __future__ import annotations

from pathlib import Path

import click

from agent.evidence.cli import provider_option, tools_option
from hosting.cli import host_token
from tracer.cli import DEFAULT_PATH, db_option

from ._terminal import has_terminal


def _need_terminal(command: str) -> None:
    if not has_terminal():
        raise click.ClickException(f"footprint {command} is a full-screen app and needs a terminal")


def _refuse_a_directory(db: str) -> None:
    """Refuse a --db that is a directory as every command does, terminal or not: through the store's
    own check (which raises before it opens anything)."""
    if Path(db).is_dir():
        from tracer import Store

        Store.open(db, read_only=True)  # NotAStoreError: "DB is a directory, not a footprint store"


# --db as every command takes it (tracer.cli.db_option): the path as given, checked by the store's own
# open, so a directory, a missing file or a file that is not a store fails with the one error line
# (`footprint: error: dirstore is a directory, not a footprint store`, exit 1) and not a usage error
@click.command("explore")
@db_option
@click.option("--host", "host_url", metavar="URL", help="Attach to a running host's read API instead of a file.")
@click.option("--token", envvar="FOOTPRINT_TOKEN", help="Bearer token for --host.")
@click.option("--run", "run_ref", metavar="RUN", help="Open this run (an id, a unique prefix, or 'last').")
@provider_option
@tools_option
def explore(db: str, host_url: str | None, token: str | None, run_ref: str | None, provider_name: str,
            tools_ref: str | None) -> None:
    """Browse recorded runs, their flowcharts and snapshots, and ask why an answer was given.

    Opens the store --db read-only, so the other footprint commands keep working on it while the
    explorer is open; a re-run (replay, counterfactual, blame) holds it for writing only while it
    runs, answered by --provider with --tools, as `footprint blame` takes them. With --host it attaches to a standing-agent host in another process instead. Press ?
    in any screen for its keys.
    """
    if host_url and click.get_current_context().get_parameter_source("db") is click.core.ParameterSource.COMMANDLINE:
        raise click.UsageError("give a store file (--db) or --host URL, not both")
    from tracer import Store, refuse_truncated

    if not host_url:  # the same refusals as every command, terminal or not
        _refuse_a_directory(db)
        if Path(db).exists():
            refuse_truncated(db)
    _need_terminal("explore")
    from ._open import build_app
    from ._verdicts import chosen_evidence

    provider_for, tools_for = chosen_evidence(provider_name, tools_ref)  # the re-runs' model, as blame's
    if host_url:
        from ._host import attach

        app = attach(host_url, token=token, run_ref=run_ref)
        app.evidence_provider, app.evidence_tools = provider_for, tools_for
        app.run()
        return
    if not Path(db).exists():
        raise click.ClickException(f"no footprint store at {db}: record a run first (footprint demo), or pass --db")
    store = Store.open(db, read_only=True)  # (a file that is not a store: refused here)
    try:
        run_id = store.resolve_run_id(run_ref) if run_ref else None
        app = build_app(store, run_id=run_id)
        app.evidence_provider, app.evidence_tools = provider_for, tools_for
        app.run()
    finally:
        store.close()


@click.command("sandbox")
@db_option
def sandbox(db: str) -> None:
    """Create personas, chat with them (their conversation resumes), edit and delete them.

    Personas and conversations are kept in the store; every chat turn is recorded as a run. Without
    OPENAI_API_KEY the chat uses the offline demo model.
    """
    _refuse_a_directory(db)
    _need_terminal("sandbox")
    from tracer import Store

    from ._open import build_app

    store = Store.open(db)
    try:
        build_app(store, start="sandbox").run()
    finally:
        store.close()


@click.command("up")
@click.option("--db", "db", envvar="FOOTPRINT_DB", default=DEFAULT_PATH, show_default=True,
              help="The store the host records into and owns.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535),
              help="The port the host's HTTP API listens on, on 127.0.0.1 (0: any free port).")
@click.option("--token", envvar="FOOTPRINT_TOKEN", callback=lambda c, p, v: host_token(v),
              help="Require this bearer token on the host's API.")
@click.option("--agent", "agent_spec", default="demo", show_default=True,
              help="The agent to host: demo (the personal assistant), echo (repeats the message), or "
                   "MODULE:CALLABLE taking recorder= (as footprint serve takes it).")
@click.option("--durability", type=click.Choice(["exit", "sync"]), default="exit", show_default=True,
              help="When sessions and recordings become durable (see footprint serve).")
def up(db: str, port: int, token: str | None, agent_spec: str, durability: str) -> None:
    """Start the standing-agent host and the explorer in one process.

    The explorer opens on the host's live sessions, with a chat to talk to one and its runs as they
    are recorded; escape shows every recording. Other processes can attach with
    `footprint explore --host http://127.0.0.1:PORT`. Closing the explorer stops the host
    (running turns get 10 s to finish, then are stored to finish later).
    """
    _refuse_a_directory(db)
    _need_terminal("up")
    from hosting.cli import agent_builder

    from ._host import up as run_up

    build, _ = agent_builder(agent_spec)  # the same --agent as footprint serve takes
    run_up(db, build, port=port, token=token, durability=durability)
    click.echo("footprint: host stopped; sessions and recordings flushed.", err=True)


def commands() -> list[click.Command]:
    """The explorer's commands, for :func:`explorer.cli.register`."""
    return [explore, sandbox, up]

"""Opening the explorer from code: on a store file, at a run (what `footprint demo` ends with)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from tracer import Store

from ._source import StoreSource
from ._terminal import explore_command, has_terminal
from .app import ExplorerApp
from .errors import SourceError
from .sandbox import PersonaStore, sandbox_registry


def build_app(store: Store, *, run_id: str | None = None, stage_id: str | None = None,
              start: str = "runs", poll_interval: float | None = 2.0) -> ExplorerApp:
    """An explorer app over an open store (with the sandbox when the store is writable)."""
    personas = None if store.read_only else PersonaStore(store, known_tools=sandbox_registry().names())
    return ExplorerApp(
        StoreSource(store), run_id=run_id, stage_id=stage_id, start=start,  # type: ignore[arg-type]
        personas=personas, poll_interval=poll_interval,
    )


def open_run(
    db_path: str | os.PathLike[str],
    run_id: str | None = None,
    *,
    interactive: bool | None = None,
    echo: Callable[[str], None] = print,
) -> int:
    """Open the explorer on the store at ``db_path``, showing ``run_id`` (an id, a prefix or ``last``).

    Without a terminal (CI, a pipe) it prints the command that would open it and returns 0, so a
    script can end with it either way. The store must not be open for writing in this process or
    another one: close it first. It is opened read-only (a re-run holds it for writing while it
    runs). Returns the exit code.
    """
    interactive = has_terminal() if interactive is None else interactive
    if not interactive:
        echo(f"Explore it: {explore_command(db_path, run_id)}")
        return 0
    if not Path(db_path).exists():
        raise SourceError(f"no footprint store at {db_path}: record a run first (footprint demo)")
    store = Store.open(db_path, read_only=True)
    try:
        resolved = store.resolve_run_id(run_id) if run_id else None
        build_app(store, run_id=resolved).run()
    finally:
        store.close()
    return 0

"""The recording commands of the `footprint` CLI: runs, show, why, diff.

Each package contributes its commands through a ``register(group)`` function; the console script
(:mod:`explorer.cli`) assembles them.
"""

from __future__ import annotations

from typing import Any

import click

from ._store import DEFAULT_PATH

db_option = click.option(
    "--db", "db", default=DEFAULT_PATH, envvar="FOOTPRINT_DB", show_default=True,
    help="The footprint store (a DuckDB file).",
)


def register(group: click.Group) -> None:
    """Add the recording commands to ``group``."""
    group.add_command(__import__("tracer._export_cli", fromlist=["export"]).export)  # footprint export otlp|parquet
    del group  # the commands are added in a later step


def _unused(*_: Any) -> None:
    return None

"""The agent commands of the `footprint` CLI."""

from __future__ import annotations

import click


def register(group: click.Group) -> None:
    """Add the agent commands to ``group``."""
    del group

"""Whether a full-screen app can run here, and the command that would open the explorer."""

from __future__ import annotations

import os
import shlex
import sys


def has_terminal() -> bool:
    """True when both stdin and stdout are a terminal (so a full-screen app can run)."""
    return sys.stdin.isatty() and sys.stdout.isatty() and os.environ.get("TERM", "") != "dumb"


def explore_command(db_path: str | os.PathLike[str], run_id: str | None = None) -> str:
    """The shell command that opens the explorer on ``db_path`` (at ``run_id``)."""
    parts = ["footprint", "explore", "--db", str(db_path)]
    if run_id:
        parts += ["--run", run_id]
    return shlex.join(parts)

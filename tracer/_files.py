"""Store files: readable by their owner only (they hold conversations), and refused when cut short."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import duckdb

from .errors import NotAStoreError

#: The files DuckDB keeps beside a database file while it is open.
SIDE_FILES = (".wal", ".journal")


def restrict_to_owner(path: str | os.PathLike[str]) -> None:
    """Make ``path`` (and the DuckDB files beside it that exist) readable and writable by its owner only.

    A file that is already stricter is left as it is; a file that cannot be changed (another
    owner's) is left too: opening it is still allowed, and its owner decides who reads it.
    """
    base = os.fspath(path)
    for name in (base, *(base + suffix for suffix in SIDE_FILES)):
        try:
            mode = stat.S_IMODE(os.stat(name).st_mode)
            if mode & 0o077:
                os.chmod(name, mode & 0o700)
        except FileNotFoundError:
            continue
        except PermissionError:
            continue


#: DuckDB's file header: one main header and two database headers of 4 KiB before the first block.
_HEADER_BYTES = 3 * 4096


def missing_directory(path: str | os.PathLike[str]) -> str | None:
    """Why a file at ``path`` cannot be created because of its directory, or None if it can be tried."""
    file = Path(path)
    parent = file.parent
    if file.exists() or parent.is_dir():
        return None
    return f"{parent} is a file, not a directory" if parent.exists() else f"the directory {parent} does not exist"


def truncation(con: Any, path: str | os.PathLike[str]) -> str | None:
    """Why the DuckDB file at ``path`` (open on ``con``) is cut short, or None when it is whole.

    DuckDB reads a block only when a query needs it, so a file cut in half opens and answers
    whatever lives in its first half; the blocks its header counts must all be there.
    """
    name = os.fspath(path)
    if name == ":memory:" or os.path.exists(name + ".wal"):
        return None  # (blocks still in the write-ahead log are counted, but not yet in the file)
    rows = con.execute("PRAGMA database_size").fetchall()
    if not rows:
        return None
    # every block in use must be in the file (free blocks at its end may have been cut off by
    # DuckDB itself), so the file holds at least the header and as many blocks as are in use
    block_size, used_blocks = int(rows[0][2]), int(rows[0][4])
    expected = _HEADER_BYTES + block_size * used_blocks if used_blocks else 0
    actual = os.path.getsize(name)
    if actual < expected:
        return f"it holds {actual:,} bytes where the blocks its header counts in use need {expected:,}"
    return None


def truncated_message(path: str, reason: str) -> str:
    """The one refusal of a cut-short or corrupt store file, for every command."""
    return (f"{path} is not a readable footprint store: the file is truncated or corrupt ({reason}); "
            f"it was left untouched — restore it from a backup or pass another --db path")


def refuse_truncated(path: str) -> None:
    """Raise :class:`NotAStoreError` for a DuckDB file cut short, before anyone opens it for writing
    (a writer would build on the hole). A file held by a writer or not DuckDB at all is left to
    the open that follows to report."""
    try:
        probe = duckdb.connect(path, read_only=True)
    except duckdb.Error:
        return  # held by a writer, or not DuckDB at all: the writable open says which
    try:
        reason = truncation(probe, path)
    except duckdb.Error:
        reason = None
    finally:
        probe.close()
    if reason is not None:
        raise NotAStoreError(truncated_message(path, reason))

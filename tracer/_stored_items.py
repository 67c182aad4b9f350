"""Which items a store file holds, so that its writer stores each item once.

``fp_item`` has no key (an index makes every checkpoint rewrite it: see ``tracer._schema``), so the
writer keeps what a key would have told it:

* the hashes it wrote or found lately, exactly (a bounded dictionary): most items a stage sends
  were sent by the stage before it (the system prompt, the conversation so far);
* a 64-bit digest of every hash in the file, read from the file when the first items are written
  and kept up to date after (about 70 bytes of memory per item: 69 MB for a million, measured
  with tracemalloc).

A hash whose digest is not in the file is new, and written without a look. One whose digest is
there but that is not among the recent ones (an item an earlier process wrote, or one written long
enough ago to be forgotten, or a digest shared by two items: one chance in 2**64 per item) is
looked up in the file, all of a batch's at once, and written only when it is not there.

One writer per file: two processes cannot open a file for writing at once, and a process opens a
file's writer once (``tracer.Store``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import duckdb

#: How many recent hashes are kept exactly; past it they are forgotten all at once.
RECENT = 16_384
#: How many hashes one look-up query asks about (its placeholders).
_ASK = 1_000
#: How many hashes are read from the file at a time when the digests are built.
_READ = 65_536


class StoredItems:
    """The item hashes a store file holds (see the module docstring). Used by the writer thread only."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con
        self._recent: dict[str, None] = {}
        self._digests: set[int] | None = None  # read from the file on first use

    def new(self, rows: Iterable[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """Of ``fp_item`` rows (hash first), the first row of each hash the file does not hold."""
        recent = self._recent
        rows_by_hash = {row[0]: row for row in rows if row[0] not in recent}
        if not rows_by_hash:
            return []
        digests = self._all_digests()
        maybe = [h for h in rows_by_hash if hash(h) in digests]
        if maybe:
            for h in self._in_file(maybe):
                del rows_by_hash[h]
                recent[h] = None
        return list(rows_by_hash.values())

    def written(self, hashes: Iterable[str]) -> None:
        """Note hashes whose rows were just committed."""
        recent = self._recent
        if len(recent) > RECENT:
            recent.clear()
        digests = self._all_digests()
        for h in hashes:
            recent[h] = None
            digests.add(hash(h))

    def _all_digests(self) -> set[int]:
        if self._digests is None:
            digests: set[int] = set()
            cur = self._con.cursor()
            try:
                cur.execute("SELECT hash FROM fp_item")
                while chunk := cur.fetchmany(_READ):
                    digests.update(hash(row[0]) for row in chunk)
            finally:
                cur.close()
            self._digests = digests
        return self._digests

    def _in_file(self, hashes: list[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(hashes), _ASK):
            chunk = hashes[start:start + _ASK]
            marks = ", ".join("?" * len(chunk))
            found.update(row[0] for row in self._con.execute(
                f"SELECT DISTINCT hash FROM fp_item WHERE hash IN ({marks})", chunk).fetchall())
        return found

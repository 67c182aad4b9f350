"""Checkpoints and cache trims of a writable store file, and the lock that keeps them apart.

DuckDB keeps every block it wrote cached up to its memory limit, so a process that records for
hours grows with what it wrote. Lowering the limit for a moment (``SET memory_limit``) makes it
evict the cached blocks at once, and setting it back keeps them out until they are read again: a
*trim*. But the limit is hard: a checkpoint or a commit that needs more than a lowered limit
fails fatally and invalidates the database. So nothing may commit or checkpoint during a trim.

Every connection of the file that writes (the store's writer, the host's DuckDB session store and
agents repository, through :meth:`tracer.Store.committing`) commits under the shared side of one
:class:`SharedLock`; a trim takes the exclusive side. DuckDB's own checkpoints are switched off
(they run inside whichever commit crosses the threshold, on any connection): after each commit the
committer looks at the write-ahead log and, once it holds :data:`CHECKPOINT_AT` bytes, checkpoints
(under the shared side, so other commits go on meanwhile) and then trims (under the exclusive
side). Every checkpoint is thus followed by a trim and none can overlap one.

A checkpoint writes what was appended since the last one as new row groups, and leaves the ones
on disk alone, but DuckDB (1.2 on) also merges a table's small row groups at a checkpoint whenever
they can make one twice as big: a checkpoint now and then rewrote the whole of a table that had
not yet filled a row group (122,880 rows; in a recording of 1-4 KB messages, hundreds of MB) and
held up every commit meanwhile. The store turns those merges off (``max_vacuum_tasks``), so each
checkpoint costs what was written since the last; a row group whose rows are all deleted is still
dropped.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

import duckdb

#: The write-ahead log's size at which the store checkpoints (folds it into the file). Each
#: checkpoint rewrites the tables' unfinished row groups and frees the old blocks: at DuckDB's
#: default (16 MB) a recording's file was 17% bigger, for no measurable gain in speed.
CHECKPOINT_AT = 16 * 2**20
#: What DuckDB's own checkpoint threshold is set to: never reached, the store checkpoints itself.
NEVER = "1000GB"
#: The memory limit a trim lowers DuckDB's to for a moment: the cache it keeps after a checkpoint.
TRIM_TO = "8MB"
#: How long a trim (or a checkpoint DuckDB refused beside other write transactions) waits for the
#: commits and reads under way to end; then it is left to the next checkpoint.
WAIT = 0.5

_log = logging.getLogger("footprint.tracer")


class SharedLock:
    """Many holders of the shared side at once, or one of the exclusive side. A thread waiting for
    the exclusive side goes before threads asking for the shared side after it, and gives up after
    its timeout (so a holder of the shared side waiting for something that waits for the exclusive
    side delays it, and never deadlocks). The shared side is re-entrant in a thread; a thread
    holding the exclusive side must not ask for either side again."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False
        self._waiting = 0  # threads waiting for the exclusive side
        self._mine = threading.local()  # .depth: how often this thread holds the shared side

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Hold the shared side for the block."""
        depth = getattr(self._mine, "depth", 0)
        if not depth:
            with self._cond:
                while self._exclusive or self._waiting:
                    self._cond.wait()
                self._shared += 1
        self._mine.depth = depth + 1
        try:
            yield
        finally:
            self._mine.depth = depth
            if not depth:
                with self._cond:
                    self._shared -= 1
                    if not self._shared:
                        self._cond.notify_all()

    @contextmanager
    def exclusive(self, timeout: float | None = None) -> Iterator[bool]:
        """Hold the exclusive side for the block, waiting at most ``timeout`` seconds for it; the
        block is told whether it holds it."""
        with self._cond:
            self._waiting += 1
            try:
                held = self._cond.wait_for(lambda: not self._exclusive and not self._shared, timeout)
            finally:
                self._waiting -= 1
                if not self._waiting:
                    self._cond.notify_all()  # (threads asking for the shared side may go)
            if held:
                self._exclusive = True
        try:
            yield held
        finally:
            if held:
                with self._cond:
                    self._exclusive = False
                    self._cond.notify_all()


class Upkeep:
    """The checkpoints and trims of one store file opened for writing (see the module docstring).

    ``memory_limit`` is the limit the store set (a trim restores it); None: DuckDB's default, and
    no trims (the cache may then take most of the RAM anyway).
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, path: str, memory_limit: str | None, *,
                 checkpoint_at: int | None = None, trim_to: str | None = None) -> None:
        self._con = con
        self._wal = f"{path}.wal"
        self._memory_limit = memory_limit
        self._checkpoint_at = CHECKPOINT_AT if checkpoint_at is None else checkpoint_at  # (tests lower them)
        self._trim_to = TRIM_TO if trim_to is None else trim_to
        con.execute("SET max_vacuum_tasks = 0")  # no merges of row groups (module docstring)
        self.lock = SharedLock()
        self._busy = threading.Lock()  # one checkpoint at a time; a committer that finds it taken goes on
        self.checkpoints = 0
        self.trims = 0
        # the seconds the checkpoints and the trims took, all told (bench/soak.py reports them)
        self.checkpoint_seconds = 0.0
        self.trim_seconds = 0.0

    def reading(self) -> AbstractContextManager[None]:
        """Hold the shared side for a read (a read may fail for want of memory during a trim)."""
        return self.lock.shared()

    @contextmanager
    def committing(self) -> Iterator[None]:
        """Hold the shared side for a write transaction; after it, checkpoint and trim when due."""
        with self.lock.shared():
            yield
        self.after_commit()

    def after_commit(self) -> None:
        """Checkpoint, then trim, once the write-ahead log holds ``checkpoint_at`` bytes. Call it
        holding neither side of the lock."""
        if self._wal_size() < self._checkpoint_at or not self._busy.acquire(blocking=False):
            return
        try:
            cur = self._con.cursor()
            try:
                if self._checkpoint(cur):
                    self.trim(cur)
            finally:
                cur.close()
        finally:
            self._busy.release()

    def _checkpoint(self, cur: duckdb.DuckDBPyConnection) -> bool:
        """Checkpoint while other commits go on or, where DuckDB refuses that (1.1: another write
        transaction is open), with none; False when it did not (the next commit tries again)."""
        with self.lock.shared():
            started = time.perf_counter()
            try:
                cur.execute("CHECKPOINT")
                self.checkpoints += 1
                return True
            except duckdb.TransactionException:
                pass  # another write transaction is open (DuckDB 1.1)
            finally:
                self.checkpoint_seconds += time.perf_counter() - started
        with self.lock.exclusive(WAIT) as held:
            if not held:
                return False
            started = time.perf_counter()
            try:
                cur.execute("CHECKPOINT")
            except duckdb.TransactionException:
                return False  # a write transaction outside the lock (a sandbox's, say) is still open
            finally:
                self.checkpoint_seconds += time.perf_counter() - started
            self.checkpoints += 1
            return True

    def trim(self, cur: duckdb.DuckDBPyConnection) -> None:
        """Evict DuckDB's cached blocks down to ``trim_to``, with nothing committing meanwhile."""
        if self._memory_limit is None:
            return
        with self.lock.exclusive(WAIT) as held:
            if not held:
                return  # a long read or commit: the next checkpoint trims
            started = time.perf_counter()
            try:
                cur.execute(f"SET memory_limit = '{self._trim_to}'")
                self.trims += 1
            except duckdb.Error as exc:  # more than that is pinned right now (a read): keep the cache
                _log.debug("could not trim DuckDB's cache: %s", exc)
            finally:
                cur.execute(f"SET memory_limit = '{self._memory_limit}'")
                self.trim_seconds += time.perf_counter() - started

    def _wal_size(self) -> int:
        try:
            return os.stat(self._wal).st_size
        except OSError:  # (DuckDB 2 removes the log at a checkpoint)
            return 0

"""The DuckDB session store: the embedded default, in the same file as the recordings.

One process owns a DuckDB file, so the host does not open the file a second time: it takes a
cursor from the tracer :class:`~tracer.Store` it records into and keeps sessions in a table of its
own, ``fp_session``. Given a ``path`` instead, it opens that file for itself. This is the only
hosting module that imports duckdb.

DuckDB is built for analytics: one UPDATE commits in milliseconds (the WAL is synced), which
would cap a busy host at a hundred saves a second. So saves are group-committed: saves that
arrive while a batch is being written wait for the next one, which writes them all in one
transaction with one set-based statement (``UPDATE ... FROM unnest(...) WHERE version =
expected``). A durable save still returns only once its row is committed, and the version check
is still per row. A batch costs a few milliseconds of CPU whatever its size, so while only
non-durable saves (``exit`` durability) wait, the batch lingers ``linger`` seconds (50 ms, as the
recorder's writer does) and takes whatever arrives meanwhile; a durable save, a flush, or a read
that needs the committed row cuts it short. Successive saves of one session in a batch are
written as one row (the last, checked against the first one's version). Because this process is the file's only writer, the
envelopes it wrote are also kept in a bounded read cache, so a session's next turn does not read
DuckDB at all, and the ids of the sessions stored are kept in memory (up to ``index_limit`` of
them), so a new session's first turn does not read it either. Reads that do go to DuckDB are
batched the same way as writes: loads that arrive while a read runs are answered by the next one,
in one statement. Writes run on one worker thread and reads on another, each with a cursor of its
own: the event loop never waits on DuckDB, and a load never waits behind a commit.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import duckdb

from tracer import Store

from ..errors import SessionStoreError, VersionConflictError
from ._base import SessionStore, next_version
from ._envelope import Envelope, SessionSummary

T = TypeVar("T")
log = logging.getLogger("footprint.host")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


@dataclass
class _Save:
    expected: int
    saved: Envelope
    text: str
    done: asyncio.Future[None] | None  # a durable save waits for its commit; a queued one does not
    new_id: bool = False  # this save put its session id into the index of stored ids


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class DuckDBSessions(SessionStore):
    """Sessions in a DuckDB table: in the recordings file (``store=``) or a file of their own (``path=``).

    ``cache_bytes`` bounds the read cache of envelopes this store wrote (0 turns it off).
    ``linger``: seconds a batch of non-durable saves waits for more before it is written.
    ``index_limit``: the ids of stored sessions are kept in memory while there are at most this
    many (about 100 bytes each), so loading a session that was never stored reads nothing.
    """

    name = "duckdb"

    def __init__(
        self, store: Store | None = None, *, path: str | None = None, table: str = "fp_session",
        cache_bytes: int = 64 * 1024 * 1024, linger: float = 0.05, index_limit: int = 100_000,
    ) -> None:
        if (store is None) == (path is None):
            raise ValueError("DuckDBSessions needs exactly one of `store` (the recordings store) or `path`")
        if not _IDENT.match(table):
            raise ValueError(f"table name {table!r} must be letters, digits and underscores")
        self._table = table
        self._owned: duckdb.DuckDBPyConnection | None = None
        try:
            if store is not None:
                self._con = store.cursor()
                self.location = store.path
            else:
                assert path is not None
                self._owned = self._con = duckdb.connect(path)
                self.location = path
            self._con.execute(
                f"CREATE TABLE IF NOT EXISTS {table} (session_id VARCHAR PRIMARY KEY, version BIGINT NOT NULL, "
                f"created_at DOUBLE, updated_at DOUBLE, status VARCHAR, payload VARCHAR NOT NULL)"
            )
            # every stored session id, while there are few enough (None: ask DuckDB instead)
            self._index_limit = index_limit
            self._ids: set[str] | None = None
            count = self._con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0]
            if count <= index_limit:
                self._ids = {r[0] for r in self._con.execute(f"SELECT session_id FROM {table}").fetchall()}
        except duckdb.Error as exc:
            raise SessionStoreError(f"cannot open the session store in {store.path if store else path}: {exc}") from exc
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="footprint-sessions")
        # reads get a cursor and a thread of their own, so a load never waits behind a commit
        self._reader = self._con.cursor()
        self._read_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="footprint-sessions-read")
        self._pending: list[_Save] = []
        self._flusher: asyncio.Task[None] | None = None
        self._linger = linger
        self._lingering: asyncio.Future[None] | None = None  # resolved to write the batch now
        self._urgent = False  # a durable save or a flush waits: the next batch does not linger
        self._waiters: list[asyncio.Future[None]] = []  # flushes waiting for the saves pending now
        self._writing: asyncio.Future[None] | None = None  # resolved when the batch being written is done
        self._cache: OrderedDict[str, tuple[Envelope, int]] = OrderedDict()  # envelope, its stored size
        self._cache_bytes = 0
        self._cache_limit = cache_bytes
        self._unsettled: dict[str, int] = {}  # saves queued and not yet committed, per session
        self._absent: dict[str, bool] = {}  # sessions a load found absent (bounded)
        self._reads: dict[str, list[asyncio.Future[tuple[Any, ...] | None]]] = {}  # loads waiting for a read
        self._reading: asyncio.Task[None] | None = None
        self._closed = False

    async def _run(self, fn: Callable[..., T], *args: Any, read: bool = False) -> T:
        if self._closed:
            raise SessionStoreError(f"the session store in {self.location} is closed")
        try:
            executor = self._read_executor if read else self._executor
            return await asyncio.get_running_loop().run_in_executor(executor, fn, *args)
        except duckdb.Error as exc:
            raise SessionStoreError(f"the session store in {self.location} failed: {exc}") from exc

    # ------------------------------------------------------------------ the read cache

    def _remember(self, envelope: Envelope, size: int) -> None:
        self._forget(envelope.session_id)
        if size > self._cache_limit // 4 or envelope.messages is None:
            return
        self._cache[envelope.session_id] = (envelope, size)
        self._cache_bytes += size
        while self._cache_bytes > self._cache_limit:
            _, (_, old) = self._cache.popitem(last=False)
            self._cache_bytes -= old

    def _forget(self, session_id: str) -> None:
        entry = self._cache.pop(session_id, None)
        if entry is not None:
            self._cache_bytes -= entry[1]

    # ------------------------------------------------------------------ the interface

    async def load(self, session_id: str) -> Envelope | None:
        """The session's envelope, or None."""
        cached = self._cache.get(session_id)
        if cached is not None:
            self._cache.move_to_end(session_id)
            return cached[0].copy()
        if session_id in self._unsettled:
            await self.flush()  # its last save is still queued and no longer cached: read it committed
        if self._ids is not None and session_id not in self._ids:
            row = None  # never stored: nothing to read
        else:
            row = await self._read(session_id)
        if row is None:
            self._absent[session_id] = True  # its first save can then be checked here, not in the database
            if len(self._absent) > 10_000:
                self._absent.pop(next(iter(self._absent)))
            return None
        return Envelope.decode(session_id, row[2], version=int(row[0]), updated_at=float(row[1] or 0.0))

    async def _read(self, session_id: str) -> tuple[Any, ...] | None:
        """The session's row (version, updated_at, payload), read with every other load waiting for one."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[tuple[Any, ...] | None] = loop.create_future()
        self._reads.setdefault(session_id, []).append(future)
        if self._reading is None or self._reading.done():
            self._reading = loop.create_task(self._read_batches())
        return await future

    async def _read_batches(self) -> None:
        while self._reads:
            batch, self._reads = self._reads, {}
            try:
                rows = await self._run(self._fetch, list(batch), read=True)
            except Exception as exc:
                for futures in batch.values():
                    for f in futures:
                        if not f.done():
                            f.set_exception(exc)
                continue
            for sid, futures in batch.items():
                for f in futures:
                    if not f.done():  # (a load that was cancelled meanwhile)
                        f.set_result(rows.get(sid))

    def _fetch(self, session_ids: list[str]) -> dict[str, tuple[Any, ...]]:
        # fetchall, not fetchone: a result left unread keeps its transaction open (and blocks CHECKPOINT)
        if len(session_ids) == 1:
            rows = self._reader.execute(
                f"SELECT session_id, version, updated_at, payload FROM {self._table} WHERE session_id = ?",
                session_ids,
            ).fetchall()
        else:
            rows = self._reader.execute(
                f"SELECT session_id, version, updated_at, payload FROM {self._table} "
                f"WHERE session_id IN (SELECT unnest(?))", [session_ids],
            ).fetchall()
        return {r[0]: r[1:] for r in rows}

    def _index(self, session_id: str) -> bool:
        """Note a stored session id; True when it was not known before."""
        ids = self._ids
        if ids is None or session_id in ids:
            return False
        ids.add(session_id)
        if len(ids) > self._index_limit:
            self._ids = None  # too many to keep: DuckDB answers from here on
        return True

    async def save(self, envelope: Envelope, *, durable: bool = True) -> Envelope:
        """Store the envelope when its version is current; returns once it is committed.

        With ``durable=False`` it returns once the save is queued: the version is checked against
        what this process wrote last (it is the file's only writer), later loads see the new
        envelope at once, and the commit follows in the next batch.
        """
        if self._closed:
            raise SessionStoreError(f"the session store in {self.location} is closed")
        sid = envelope.session_id
        if not durable:
            cached = self._cache.get(sid)
            if cached is not None and cached[0].version != envelope.version:
                raise VersionConflictError(sid, envelope.version, cached[0].version)
            known_new = envelope.version == 0 and self._absent.pop(sid, False)
            if cached is None and sid not in self._unsettled and not known_new:
                durable = True  # nothing to check the version against here: let the database decide
        saved = next_version(envelope)
        loop = asyncio.get_running_loop()
        request = _Save(envelope.version, saved, saved.encode(), loop.create_future() if durable else None)
        if envelope.version == 0:
            request.new_id = self._index(sid)  # loads see it stored from now on, as they see the cache
        self._pending.append(request)
        self._unsettled[sid] = self._unsettled.get(sid, 0) + 1
        if not durable:
            self._remember(saved.copy(), len(request.text))
        if self._flusher is None or self._flusher.done():
            self._flusher = loop.create_task(self._flush())
        if request.done is not None:
            self._hasten()
            await asyncio.shield(request.done)
        return saved

    def _hasten(self) -> None:
        """Write the waiting batch now, without lingering."""
        self._urgent = True
        if self._lingering is not None:
            _wake(self._lingering)

    def _settle(self, session_id: str) -> None:
        left = self._unsettled.get(session_id, 1) - 1
        if left > 0:
            self._unsettled[session_id] = left
        else:
            self._unsettled.pop(session_id, None)

    async def flush(self) -> None:
        """Return once every save made so far is committed (or has failed).

        Saves made while it waits are not waited for, so a flush returns under a steady stream
        of saves too.
        """
        loop = asyncio.get_running_loop()
        if self._pending:
            waiter = loop.create_future()
            self._waiters.append(waiter)  # resolved once the batch that takes these saves is written
            self._hasten()
            if self._flusher is None or self._flusher.done():
                self._flusher = loop.create_task(self._flush())
            await waiter
        elif self._writing is not None and not self._writing.done():
            await asyncio.shield(self._writing)

    async def _drain(self) -> None:
        """Return once nothing is pending or being written."""
        while self._flusher is not None and not self._flusher.done():
            self._hasten()
            await asyncio.gather(self._flusher, return_exceptions=True)

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            if self._linger > 0 and not self._urgent:
                self._lingering = lingering = loop.create_future()
                timer = loop.call_later(self._linger, _wake, lingering)
                try:
                    await lingering
                finally:
                    timer.cancel()
                    self._lingering = None
            self._urgent = False
            batch, self._pending = self._pending, []
            waiters, self._waiters = self._waiters, []
            self._writing = writing = loop.create_future()
            try:
                await self._write_batch(batch)
            finally:
                _wake(writing)
                for waiter in waiters:
                    _wake(waiter)

    async def _write_batch(self, batch: list[_Save]) -> None:
        """Write one batch, then settle its saves: cache, index, and the futures of durable ones.

        Successive saves of one session in the batch (each at the version the one before saved)
        are written as one row: the last envelope, checked against the first one's version — what
        writing them one by one leaves, with one statement instead of one per save.
        """
        rows: list[tuple[int, Envelope, str]] = []
        row_of: list[int] = []  # the row each save of the batch is written in
        chain_end: dict[str, tuple[int, int]] = {}  # session -> (its latest row, the version that row saves)
        for s in batch:
            sid = s.saved.session_id
            end = chain_end.get(sid)
            if end is not None and end[1] == s.expected:
                rows[end[0]] = (rows[end[0]][0], s.saved, s.text)
                row = end[0]
            else:
                row = len(rows)
                rows.append((s.expected, s.saved, s.text))
            chain_end[sid] = (row, s.saved.version)
            row_of.append(row)
        try:
            written = await self._run(self._write, rows)
            outcomes = [written[row] for row in row_of]
        except Exception as exc:
            log.error("the session store in %s failed to write %d session(s): %s", self.location, len(batch), exc)
            for s in batch:
                self._forget(s.saved.session_id)
                self._settle(s.saved.session_id)
                if s.new_id and self._ids is not None:
                    self._ids.discard(s.saved.session_id)  # the batch was rolled back: still never stored
                if s.done is not None and not s.done.done():
                    s.done.set_exception(exc)
                    s.done.exception()  # marks it retrieved: the failure is logged above
            return
        for s, outcome in zip(batch, outcomes, strict=True):
            sid = s.saved.session_id
            self._settle(sid)
            if outcome is None:
                cached = self._cache.get(sid)
                if cached is None or cached[0].version < s.saved.version:  # never over a newer queued save
                    self._remember(s.saved.copy(), len(s.text))
                if s.done is not None:
                    s.done.set_result(None)
            else:
                self._forget(sid)  # someone else wrote it: read it fresh next time
                error = VersionConflictError(sid, s.expected, outcome[0])
                if s.done is not None:
                    s.done.set_exception(error)
                    s.done.exception()  # marks it retrieved: the awaiting save re-raises it
                else:
                    log.error("session %s: a queued save was refused: %s", sid, error)

    def _write(self, batch: list[tuple[int, Envelope, str]]) -> list[tuple[int | None] | None]:
        """Write a batch in rounds of distinct sessions; None for a saved row, (found version,) for a conflict."""
        outcomes: list[tuple[int | None] | None] = [None] * len(batch)
        remaining = list(range(len(batch)))
        while remaining:
            seen: set[str] = set()
            this_round: list[int] = []
            remaining_next: list[int] = []
            for i in remaining:
                sid = batch[i][1].session_id
                (remaining_next if sid in seen else this_round).append(i)
                seen.add(sid)
            remaining = remaining_next
            written = self._write_round([batch[i] for i in this_round])
            failed = [i for i in this_round if batch[i][1].session_id not in written]
            if failed:
                found = dict(self._con.execute(
                    f"SELECT session_id, version FROM {self._table} WHERE session_id IN (SELECT unnest(?))",
                    [[batch[i][1].session_id for i in failed]],
                ).fetchall())
                for i in failed:
                    version = found.get(batch[i][1].session_id)
                    outcomes[i] = (None if version is None else int(version),)
        return outcomes

    def _write_round(self, rows: list[tuple[int, Envelope, str]]) -> set[str]:
        inserts = [(e, text) for expected, e, text in rows if expected == 0]
        updates = [(expected, e, text) for expected, e, text in rows if expected != 0]
        written: set[str] = set()
        con = self._con
        con.execute("BEGIN TRANSACTION")
        try:
            if inserts:
                written.update(r[0] for r in con.execute(
                    f"INSERT INTO {self._table} SELECT unnest(?), unnest(?), unnest(?), unnest(?), unnest(?), "
                    f"unnest(?) ON CONFLICT DO NOTHING RETURNING session_id",
                    [[e.session_id for e, _ in inserts], [e.version for e, _ in inserts],
                     [e.created_at for e, _ in inserts], [e.updated_at for e, _ in inserts],
                     [e.status for e, _ in inserts], [text for _, text in inserts]],
                ).fetchall())
            if updates:
                written.update(r[0] for r in con.execute(
                    f"UPDATE {self._table} SET version = u.version, updated_at = u.updated_at, status = u.status, "
                    f"payload = u.payload FROM (SELECT unnest(?) AS session_id, unnest(?) AS version, "
                    f"unnest(?) AS expected, unnest(?) AS updated_at, unnest(?) AS status, unnest(?) AS payload) u "
                    f"WHERE {self._table}.session_id = u.session_id AND {self._table}.version = u.expected "
                    f"RETURNING {self._table}.session_id",
                    [[e.session_id for _, e, _ in updates], [e.version for _, e, _ in updates],
                     [x for x, _, _ in updates], [e.updated_at for _, e, _ in updates],
                     [e.status for _, e, _ in updates], [text for _, _, text in updates]],
                ).fetchall())
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return written

    async def delete(self, session_id: str) -> bool:
        """Remove a session."""
        await self.flush()
        self._forget(session_id)
        deleted = await self._run(self._delete, session_id)
        if self._ids is not None:
            self._ids.discard(session_id)
        return deleted

    def _delete(self, session_id: str) -> bool:
        rows = self._con.execute(
            f"DELETE FROM {self._table} WHERE session_id = ? RETURNING session_id", [session_id]
        ).fetchall()
        return bool(rows)

    async def list(self, *, limit: int = 1000, offset: int = 0) -> list[SessionSummary]:
        """Sessions, most recently updated first (queued saves are committed first, so they are listed)."""
        await self.flush()
        rows = await self._run(
            lambda: self._reader.execute(
                f"SELECT session_id, version, created_at, updated_at, status FROM {self._table} "
                f"ORDER BY updated_at DESC, session_id DESC LIMIT ? OFFSET ?", [limit, offset],
            ).fetchall(),
            read=True,
        )
        return [SessionSummary(r[0], int(r[1]), float(r[2] or 0), float(r[3] or 0), r[4]) for r in rows]

    async def write_raw(self, session_id: str, text: str) -> None:
        """Overwrite a session's stored text as is (tests use it to store a corrupt envelope)."""
        await self.flush()
        self._forget(session_id)
        self._absent.pop(session_id, None)
        self._index(session_id)
        await self._run(
            lambda: self._con.execute(
                f"INSERT INTO {self._table} VALUES (?, 1, 0, 0, NULL, ?) "
                f"ON CONFLICT (session_id) DO UPDATE SET payload = excluded.payload", [session_id, text],
            )
        )

    async def close(self) -> None:
        """Finish pending saves and close the cursor (or the file this store opened); the recordings stay open."""
        if self._closed:
            return
        await self._drain()
        self._closed = True
        self._cache.clear()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._read_executor, self._reader.close)
        await loop.run_in_executor(self._executor, self._con.close)
        self._read_executor.shutdown(wait=True)
        self._executor.shutdown(wait=True)

"""The persistence protocol in DuckDB: the embedded default, in the recordings file or a file of its own.

Three tables (``fp_session_head``, ``fp_session_record``, ``fp_session_value`` by default), all
appended to: a session's records, never updated; its heads (the next record number; the host's
version, status and timestamps) and its values as *revisions* — a batch inserts a new head row for
each session it writes (revision = the stored one + 1) and a row per value set (or deleted: a NULL
value) at that revision, and a read takes the highest revision per session and per key. A turn
therefore writes a few small rows — what it added — however long the conversation is, and no
statement of a turn updates a row: DuckDB keeps ~2 KB of heap per UPDATE or ON CONFLICT upsert of
a stored row until the database closes, so updating the heads and values in place made a host's
memory grow with its turns (``bench/duckdb_retained.py`` measures each kind of statement).

A batch reads no heads but those of sessions its writer has not seen: the writer holds the
latest head of each session it read or committed (up to :data:`HEADS_HELD`, dropped whole when a
batch fails), and reads a missing one by ``session_id = ?`` — a filter ``session_id IN (...)``
on the heads keeps ~1.6 KB of heap per statement too.

Superseded revisions are deleted now and then, in the transaction of the batch that crosses
:data:`PRUNE_ROWS` revisions or :data:`PRUNE_CHARS` characters of value text written since the
last prune (and when the store opens): a DELETE keeps heap too, so it runs rarely, never per
batch. Dropping a session and clearing its records delete rows, as they always did (rarely).

One process owns a DuckDB file, so given the tracer :class:`~tracer.Store` the host records into,
the store takes cursors from it instead of opening the file twice, and one thread of one store
writes a set of tables (revisions are numbered by that writer, unguarded by an index). Writes run
on that thread (group-committed, see :mod:`hosting.sessions._stored`), reads on another with a
cursor of their own, so the event loop never waits on DuckDB and a read never waits behind a
commit. This is the only hosting module that imports duckdb.

Stores of earlier versions are migrated when they are opened, each in one transaction: heads and
values updated in place (one row per session and per key, under primary keys) become revision 1;
the envelope store's table (one ``fp_session`` row per session holding the whole conversation)
becomes records.
"""

from __future__ import annotations

import asyncio
import os
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from typing import Any, TypeVar

import duckdb

from tracer import RedactionPolicy, Store, StoreError, missing_directory, refuse_truncated, restrict_to_owner

from ..errors import SessionStoreError, VersionConflictError
from ._stored import (
    PREFIX_LONGEST,
    HeadUpdate,
    SessionHead,
    StoredPersistence,
    StoredSession,
    WriteSet,
    check_sql_name,
    plan_batch,
)

T = TypeVar("T")
# Heads and values are revisions, appended and never updated (DuckDB keeps ~2 KB of heap per UPDATE
# or ON CONFLICT upsert of a stored row until the database closes: bench/duckdb_retained.py); a
# session's head and a key's value are the rows of its highest revision, a value of NULL a deletion.
# No index: an index is a per-row cost of its own, and the superseded revisions are pruned.
_HEAD = ("(session_id VARCHAR NOT NULL, rev BIGINT NOT NULL, next_seq BIGINT NOT NULL, version BIGINT NOT NULL, "
         "created_at DOUBLE, updated_at DOUBLE, status VARCHAR)")
# no index either: a session's records are read once per process (the host caches what it wrote)
_RECORD = "(session_id VARCHAR NOT NULL, seq BIGINT NOT NULL, kind VARCHAR NOT NULL, body VARCHAR NOT NULL)"
_VALUE = "(session_id VARCHAR NOT NULL, key VARCHAR NOT NULL, rev BIGINT NOT NULL, value VARCHAR)"
#: Head and value revisions (rows, and characters of value text) written before a batch also
#: prunes the superseded ones: one DELETE per table, in the batch's transaction. A DELETE keeps heap
#: of its own (~1.5 KB), so it runs now and then, not per batch; the text bound keeps what the
#: superseded values hold (in the file and DuckDB's cache) small when values are big.
PRUNE_ROWS = 2048
PRUNE_CHARS = 1 << 20
#: The latest heads the writer holds (least recently written let go first), so that a batch reads
#: no head it read or wrote before: its only reads are of sessions it has not seen.
HEADS_HELD = 100_000
LegacyMigration = Callable[[list[tuple[Any, ...]], RedactionPolicy], list[WriteSet]]


class DuckDBPersistence(StoredPersistence):
    """Session records and values in DuckDB: in the recordings file (``store=``) or at ``path``.

    ``migrate`` turns the rows of an earlier version's envelope table (named ``prefix``) into write
    sets; without it such a table is left alone.
    """

    def __init__(
        self, store: Store | None = None, *, path: str | None = None, prefix: str = "fp_session",
        policy: RedactionPolicy | None = None, migrate: LegacyMigration | None = None,
        prune_rows: int = PRUNE_ROWS, prune_chars: int = PRUNE_CHARS,
    ) -> None:
        super().__init__(policy=policy)
        if (store is None) == (path is None):
            raise ValueError("DuckDB session storage needs exactly one of `store` (the recordings store) or `path`")
        check_sql_name("table prefix", prefix, PREFIX_LONGEST)
        self._store = store
        self._path = path
        self.location = store.path if store is not None else str(path)
        self._prefix = prefix
        self._head, self._record, self._value = f"{prefix}_head", f"{prefix}_record", f"{prefix}_value"
        self._migrate = migrate
        if prune_rows < 1 or prune_chars < 1:
            raise ValueError(f"prune_rows and prune_chars must be at least 1, not {prune_rows} and {prune_chars}")
        self._prune_at = (prune_rows, prune_chars)
        self._written = (0, 0)  # revisions and value characters written since the last prune
        # the writer's copy of the latest heads it read or committed: (head, revision), None: none stored
        self._heads: OrderedDict[str, tuple[SessionHead, int] | None] = OrderedDict()
        self._committing: dict[str, tuple[SessionHead, int] | None] = {}  # what the open batch changes
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="footprint-sessions")
        self._read_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="footprint-sessions-read")
        self._owned: duckdb.DuckDBPyConnection | None = None
        self.healthy = True
        self._connect()

    # ------------------------------------------------------------------ opening

    def _connect(self) -> None:
        self._heads.clear()
        try:
            if self._store is not None:
                self._con = self._store.cursor()
            else:
                assert self._path is not None
                self._owned = self._con = _connect_owned(self._path)
            with self._store.committing() if self._store is not None else nullcontext():
                self._prepare()  # (its tables, or a migration: commits into the recordings file)
            self._reader = self._con.cursor()
        except duckdb.Error as exc:
            raise SessionStoreError(f"cannot open the session store in {self.location}: {exc}") from exc

    def _prepare(self) -> None:
        con = self._con
        shapes = {t: {r[0] for r in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ?", [t]).fetchall()}
            for t in (self._prefix, self._head, self._value)}
        if shapes[self._head] and "rev" not in shapes[self._head]:
            self._migrate_keyed()
        for table, columns in ((self._head, _HEAD), (self._record, _RECORD), (self._value, _VALUE)):
            con.execute(f"CREATE TABLE IF NOT EXISTS {table} {columns}")
        if "payload" in shapes[self._prefix] and self._migrate is not None:
            self._migrate_legacy()
        self._prune()

    def _migrate_keyed(self) -> None:
        """Turn the head and value tables of the version before (one row per session and per key,
        updated in place, under primary keys) into revisions, each row revision 1, in one transaction."""
        con = self._con
        with self._transaction():
            for table, columns, select in (
                (self._head, _HEAD, "session_id, 1, next_seq, version, created_at, updated_at, status"),
                (self._value, _VALUE, "session_id, key, 1, value"),
            ):
                con.execute(f"CREATE TABLE {table}_revisions {columns}")
                con.execute(f"INSERT INTO {table}_revisions SELECT {select} FROM {table}")
                con.execute(f"DROP TABLE {table}")
                con.execute(f"ALTER TABLE {table}_revisions RENAME TO {table}")

    def _migrate_legacy(self) -> None:
        """Turn the envelope table of earlier versions into records, in one transaction, then drop it."""
        assert self._migrate is not None
        con = self._con
        rows = con.execute(
            f"SELECT session_id, version, created_at, updated_at, status, payload FROM {self._prefix} "
            f"ORDER BY session_id"
        ).fetchall()
        writes = self._migrate(rows, self.policy)
        with self._transaction():
            self._apply(writes)
            con.execute(f"DROP TABLE {self._prefix}")

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One transaction on the writer's connection: committed, or rolled back when the body fails."""
        con = self._con
        con.execute("BEGIN TRANSACTION")
        try:
            yield
            con.execute("COMMIT")
        except BaseException:
            try:
                con.execute("ROLLBACK")
            except duckdb.Error:
                pass  # (an invalidated database has no transaction to roll back)
            raise

    async def reopen(self) -> None:
        """Reconnect after a fatal error; :class:`SessionStoreError` when that is not possible.

        A store in the recordings file shares its DuckDB instance with the recorder: once DuckDB
        has invalidated it, only a new process can open the file again.
        """
        if self._store is not None:
            raise SessionStoreError(
                f"the session store in {self.location} shares the recordings' DuckDB database, which "
                f"failed; the host must be restarted to open it again"
            )
        loop = asyncio.get_running_loop()

        def again() -> None:
            for con in (self._reader, self._owned):
                try:
                    if con is not None:
                        con.close()
                except duckdb.Error:
                    pass
            self._connect()

        await loop.run_in_executor(self._executor, again)
        self.healthy = True

    async def _failed(self, error: SessionStoreError) -> None:
        loop = asyncio.get_running_loop()
        self.healthy = await loop.run_in_executor(self._executor, self._usable)

    def _usable(self) -> bool:
        try:
            self._con.execute("SELECT 1").fetchall()
            return True
        except duckdb.Error:
            return False

    # ------------------------------------------------------------------ writing

    async def _run(self, fn: Callable[..., T], *args: Any, read: bool = False) -> T:
        if self._closed:
            raise SessionStoreError(f"the session store in {self.location} is closed")
        try:
            executor = self._read_executor if read else self._executor
            if read and self._store is not None:  # a read must not overlap the recordings store's cache trim
                return await asyncio.get_running_loop().run_in_executor(executor, self._reading, fn, *args)
            return await asyncio.get_running_loop().run_in_executor(executor, fn, *args)
        except duckdb.Error as exc:
            raise SessionStoreError(f"the session store in {self.location} failed: {exc}") from exc

    def _reading(self, fn: Callable[..., T], *args: Any) -> T:
        assert self._store is not None
        try:
            with self._store.reading():
                return fn(*args)
        except StoreError as exc:  # a damaged block of the recordings file, refused as every reader refuses it
            raise SessionStoreError(str(exc)) from exc

    async def _write(self, batch: list[WriteSet]) -> dict[int, VersionConflictError]:
        return await self._run(self._write_batch, batch)

    def _write_batch(self, batch: list[WriteSet]) -> dict[int, VersionConflictError]:
        # in the recordings file, the commit must not overlap the recordings store's cache trim
        with self._store.committing() if self._store is not None else nullcontext():
            try:
                with self._transaction():
                    self._committing = {}
                    conflicts, (rows, chars) = self._apply(batch)
                    written = (self._written[0] + rows, self._written[1] + chars)
                    pruning = written[0] >= self._prune_at[0] or written[1] >= self._prune_at[1]
                    if pruning:
                        self._prune()
            except BaseException:
                self._heads.clear()  # (whatever the batch did or did not commit: read again)
                raise
        self._written = (0, 0) if pruning else written
        for sid, latest in self._committing.items():
            self._heads[sid] = latest
            self._heads.move_to_end(sid)
        while len(self._heads) > HEADS_HELD:
            self._heads.popitem(last=False)
        return conflicts

    def _latest_heads(self, where: str) -> str:
        return (f"SELECT session_id, rev, next_seq, version, created_at, updated_at, status FROM {self._head} "
                f"{where} QUALIFY row_number() OVER (PARTITION BY session_id ORDER BY rev DESC) = 1")

    def _apply(self, batch: list[WriteSet]) -> tuple[dict[int, VersionConflictError], tuple[int, int]]:
        """Write ``batch`` inside the open transaction, in a handful of set-based INSERTs (a DELETE
        only for a dropped session or cleared records); the conflicts, and the revisions and value
        characters written."""
        con = self._con
        stored: dict[str, SessionHead] = {}
        revs: dict[str, int] = {}
        for sid in dict.fromkeys(ws.session_id for ws in batch):
            if sid in self._heads:
                latest = self._heads[sid]
            else:
                latest = self._committing[sid] = self._read_head(sid)
            if latest is not None:
                stored[sid], revs[sid] = latest
        plan = plan_batch(batch, stored)
        if plan.drop:
            for table in (self._record, self._value, self._head):
                con.execute(f"DELETE FROM {table} WHERE session_id IN (SELECT unnest(?))", [plan.drop])
            for sid in plan.drop:
                revs.pop(sid, None)
                self._committing[sid] = None
        if plan.clear_below:
            con.execute(
                f"DELETE FROM {self._record} USING (SELECT unnest(?) AS s, unnest(?) AS n) c "
                f"WHERE session_id = c.s AND seq < c.n",
                [list(plan.clear_below), list(plan.clear_below.values())],
            )
        _insert_columns(con, self._record, plan.records)
        # every session the plan wrote to has a new head: its revision is its values' too
        rev = {h.session_id: revs.get(h.session_id, 0) + 1 for h in plan.heads}
        values: list[tuple[str, str, str | None]] = [*plan.value_upserts, *((s, k, None) for s, k in plan.value_deletes)]
        _insert_columns(con, self._value, [(s, k, rev[s], v) for s, k, v in values], text={3})
        heads = plan.heads
        self._committing.update((x.session_id, (x, rev[x.session_id])) for x in heads)
        _insert_columns(con, self._head, [(x.session_id, rev[x.session_id], x.next_seq, x.version, x.created_at,
                                           x.updated_at, x.status) for x in heads], text={6})
        return plan.conflicts, (len(heads) + len(values), sum(len(v[2]) for v in values if v[2] is not None))

    def _read_head(self, session_id: str) -> tuple[SessionHead, int] | None:
        # one session per statement: a filter `session_id IN (...)` (or a join on a list of them)
        # keeps ~2 KB of heap per statement in DuckDB 2.0.1, `=` does not (bench/duckdb_retained.py)
        rows = self._con.execute(self._latest_heads("WHERE session_id = ?"), [session_id]).fetchall()
        return (_head(session_id, rows[0][2:]), int(rows[0][1])) if rows else None

    def _prune(self) -> None:
        """Delete the superseded head and value revisions (and the values whose latest is a deletion)."""
        con = self._con
        con.execute(
            f"DELETE FROM {self._head} USING (SELECT session_id AS s, max(rev) AS m FROM {self._head} "
            f"GROUP BY session_id) l WHERE session_id = l.s AND rev < l.m"
        )
        con.execute(
            f"DELETE FROM {self._value} USING (SELECT session_id AS s, key AS k, max(rev) AS m FROM {self._value} "
            f"GROUP BY ALL) l WHERE session_id = l.s AND key = l.k AND (rev < l.m OR value IS NULL)"
        )

    # ------------------------------------------------------------------ reading

    async def read(
        self, session_id: str, *, records: bool = True, prefix: str | None = "", after_seq: int = 0
    ) -> StoredSession:
        """The session's head, records above ``after_seq`` and values under ``prefix``."""
        return await self._run(self._read_session, session_id, records, prefix, after_seq, read=True)

    def _read_session(self, session_id: str, records: bool, prefix: str | None, after_seq: int) -> StoredSession:
        # fetchall, not fetchone: a result left unread keeps its transaction open (and blocks CHECKPOINT)
        con = self._reader
        con.execute("BEGIN TRANSACTION")  # the three reads see one state
        try:
            rows = con.execute(self._latest_heads("WHERE session_id = ?"), [session_id]).fetchall()
            head = None if not rows else _head(session_id, rows[0][2:])
            found: list[tuple[int, str, str]] = []
            values: list[tuple[str, str]] = []
            if head is not None and records:
                found = [(int(r[0]), r[1], r[2]) for r in con.execute(
                    f"SELECT seq, kind, body FROM {self._record} WHERE session_id = ? AND seq > ? ORDER BY seq",
                    [session_id, after_seq],
                ).fetchall()]
            if head is not None and prefix is not None:
                values = [(r[0], r[1]) for r in con.execute(
                    f"SELECT key, value FROM {self._value} WHERE session_id = ? AND starts_with(key, ?) "
                    f"QUALIFY row_number() OVER (PARTITION BY key ORDER BY rev DESC) = 1",
                    [session_id, prefix],
                ).fetchall() if r[1] is not None]
        finally:
            con.execute("COMMIT")
        return StoredSession(head, found, values)

    async def heads(self, *, limit: int, offset: int) -> list[SessionHead]:
        """Sessions the host saved, most recently updated first."""
        rows = await self._run(
            lambda: self._reader.execute(
                f"SELECT * FROM ({self._latest_heads('')}) WHERE version > 0 "
                f"ORDER BY updated_at DESC, session_id DESC LIMIT ? OFFSET ?", [limit, offset],
            ).fetchall(),
            read=True,
        )
        return [_head(r[0], r[2:]) for r in rows]

    async def stored_bytes(self) -> int:
        """The bytes of record bodies and of the values kept (their latest revisions)."""
        rows = await self._run(
            lambda: self._reader.execute(
                f"SELECT (SELECT coalesce(sum(strlen(body)), 0) FROM {self._record}) + "
                f"(SELECT coalesce(sum(strlen(value)), 0) FROM (SELECT value FROM {self._value} "
                f"QUALIFY row_number() OVER (PARTITION BY session_id, key ORDER BY rev DESC) = 1))"
            ).fetchall(),
            read=True,
        )
        return int(rows[0][0])

    async def write_raw_value(self, session_id: str, key: str, text: str) -> None:
        """Store ``text`` as a value as is, unchecked (tests use it to plant unreadable data); a
        session never stored gets a head of version 1."""
        await self.flush()
        writes = WriteSet(session_id, values={key: text})
        if (await self.read(session_id, records=False, prefix=None)).head is None:
            writes.head = HeadUpdate(0, 1, 0.0, 0.0, None)
        await self._run(self._write_batch, [writes])

    async def close(self) -> None:
        """Commit what is pending and close the cursors (or the file this store opened)."""
        if self._closed:
            return
        await super().close()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._read_executor, _close_quietly, self._reader)
        await loop.run_in_executor(self._executor, _close_quietly, self._con)
        self._read_executor.shutdown(wait=True)
        self._executor.shutdown(wait=True)


def _insert_columns(con: duckdb.DuckDBPyConnection, table: str, rows: Sequence[Sequence[Any]], *,
                    text: Collection[int] = ()) -> None:
    """Insert ``rows`` in one statement, a list per column (``unnest``); the columns in ``text`` are
    typed VARCHAR, for a list of only NULLs. Nothing to insert, no statement."""
    if not rows:
        return
    selects = ", ".join("unnest(?::VARCHAR[])" if i in text else "unnest(?)" for i in range(len(rows[0])))
    con.execute(f"INSERT INTO {table} SELECT {selects}", [list(column) for column in zip(*rows, strict=True)])


def _head(session_id: str, row: Sequence[Any]) -> SessionHead:
    """A head from its stored columns (next_seq, version, created_at, updated_at, status)."""
    return SessionHead(session_id, int(row[0]), int(row[1]), float(row[2] or 0), float(row[3] or 0), row[4])


def _connect_owned(path: str) -> duckdb.DuckDBPyConnection:
    """Open (or create, readable by its owner only) a DuckDB file of the session store's own."""
    new = path != ":memory:" and not os.path.exists(path)
    if not new and path != ":memory:":
        refuse_truncated(path)
    if new and (what := missing_directory(path)) is not None:
        raise SessionStoreError(f"cannot create the session store {path}: {what} (create the directory first)")
    con = duckdb.connect(path)
    if new:
        restrict_to_owner(path)
    return con


def _close_quietly(con: duckdb.DuckDBPyConnection) -> None:
    try:
        con.close()
    except duckdb.Error:
        pass

"""The persistence protocol in DuckDB: the embedded default, in the recordings file or a file of its own.

Three tables (``fp_session_head``, ``fp_session_record``, ``fp_session_value`` by default): a
session's head row (the next record number; the host's version, status and timestamps), its
records, appended and never updated, and its values. A turn therefore writes a few small rows —
what it added — however long the conversation is.

One process owns a DuckDB file, so given the tracer :class:`~tracer.Store` the host records into,
the store takes cursors from it instead of opening the file twice. Writes run on one thread
(group-committed, see :mod:`hosting.sessions._stored`), reads on another with a cursor of their
own, so the event loop never waits on DuckDB and a read never waits behind a commit. This is the
only hosting module that imports duckdb.

A store written by the envelope store of earlier versions (one ``fp_session`` row per session
holding the whole conversation) is migrated when it is opened for writing, in one transaction.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from typing import Any, TypeVar

import duckdb

from tracer import RedactionPolicy, Store, StoreError, missing_directory, refuse_truncated, restrict_to_owner

from ..errors import SessionStoreError, VersionConflictError
from ._stored import (
    PREFIX_LONGEST,
    SessionHead,
    StoredPersistence,
    StoredSession,
    WriteSet,
    check_sql_name,
    plan_batch,
)

T = TypeVar("T")
LegacyMigration = Callable[[list[tuple[Any, ...]], RedactionPolicy], list[WriteSet]]


class DuckDBPersistence(StoredPersistence):
    """Session records and values in DuckDB: in the recordings file (``store=``) or at ``path``.

    ``migrate`` turns the rows of an earlier version's envelope table (named ``prefix``) into write
    sets; without it such a table is left alone.
    """

    def __init__(
        self, store: Store | None = None, *, path: str | None = None, prefix: str = "fp_session",
        policy: RedactionPolicy | None = None, migrate: LegacyMigration | None = None,
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
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="footprint-sessions")
        self._read_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="footprint-sessions-read")
        self._owned: duckdb.DuckDBPyConnection | None = None
        self.healthy = True
        self._connect()

    # ------------------------------------------------------------------ opening

    def _connect(self) -> None:
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
        con.execute(
            f"CREATE TABLE IF NOT EXISTS {self._head} (session_id VARCHAR PRIMARY KEY, next_seq BIGINT NOT NULL, "
            f"version BIGINT NOT NULL, created_at DOUBLE, updated_at DOUBLE, status VARCHAR)"
        )
        # no index: a session's records are read once per process (the host caches what it wrote)
        con.execute(
            f"CREATE TABLE IF NOT EXISTS {self._record} (session_id VARCHAR NOT NULL, seq BIGINT NOT NULL, "
            f"kind VARCHAR NOT NULL, body VARCHAR NOT NULL)"
        )
        con.execute(
            f"CREATE TABLE IF NOT EXISTS {self._value} (session_id VARCHAR NOT NULL, key VARCHAR NOT NULL, "
            f"value VARCHAR NOT NULL, PRIMARY KEY (session_id, key))"
        )
        columns = {r[0] for r in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ?", [self._prefix]
        ).fetchall()}
        if "payload" in columns and self._migrate is not None:
            self._migrate_legacy()

    def _migrate_legacy(self) -> None:
        """Turn the envelope table of earlier versions into records, in one transaction, then drop it."""
        assert self._migrate is not None
        con = self._con
        rows = con.execute(
            f"SELECT session_id, version, created_at, updated_at, status, payload FROM {self._prefix} "
            f"ORDER BY session_id"
        ).fetchall()
        writes = self._migrate(rows, self.policy)
        con.execute("BEGIN TRANSACTION")
        try:
            self._apply(writes)
            con.execute(f"DROP TABLE {self._prefix}")
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
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
        con = self._con
        # in the recordings file, the commit must not overlap the recordings store's cache trim
        with self._store.committing() if self._store is not None else nullcontext():
            con.execute("BEGIN TRANSACTION")
            try:
                conflicts = self._apply(batch)
                con.execute("COMMIT")
            except BaseException:
                try:
                    con.execute("ROLLBACK")
                except duckdb.Error:
                    pass  # (an invalidated database has no transaction to roll back)
                raise
        return conflicts

    def _apply(self, batch: list[WriteSet]) -> dict[int, VersionConflictError]:
        """Write ``batch`` inside the open transaction, in a handful of set-based statements."""
        con = self._con
        sids = list(dict.fromkeys(ws.session_id for ws in batch))
        stored = {
            r[0]: SessionHead(r[0], int(r[1]), int(r[2]), float(r[3] or 0), float(r[4] or 0), r[5])
            for r in con.execute(
                f"SELECT session_id, next_seq, version, created_at, updated_at, status FROM {self._head} "
                f"WHERE session_id IN (SELECT unnest(?))", [sids],
            ).fetchall()
        }
        plan = plan_batch(batch, stored)
        if plan.drop:
            for table in (self._record, self._value, self._head):
                con.execute(f"DELETE FROM {table} WHERE session_id IN (SELECT unnest(?))", [plan.drop])
        if plan.clear_below:
            con.execute(
                f"DELETE FROM {self._record} USING (SELECT unnest(?) AS s, unnest(?) AS n) c "
                f"WHERE session_id = c.s AND seq < c.n",
                [list(plan.clear_below), list(plan.clear_below.values())],
            )
        if plan.records:
            con.execute(
                f"INSERT INTO {self._record} SELECT unnest(?), unnest(?), unnest(?), unnest(?)",
                [[r[0] for r in plan.records], [r[1] for r in plan.records],
                 [r[2] for r in plan.records], [r[3] for r in plan.records]],
            )
        if plan.value_deletes:
            con.execute(
                f"DELETE FROM {self._value} USING (SELECT unnest(?) AS s, unnest(?) AS k) d "
                f"WHERE session_id = d.s AND key = d.k",
                [[d[0] for d in plan.value_deletes], [d[1] for d in plan.value_deletes]],
            )
        if plan.value_upserts:
            con.execute(
                f"INSERT INTO {self._value} SELECT unnest(?), unnest(?), unnest(?) "
                f"ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value",
                [[u[0] for u in plan.value_upserts], [u[1] for u in plan.value_upserts],
                 [u[2] for u in plan.value_upserts]],
            )
        # the heads read above are updated, the others inserted: no upsert (DuckDB plans ON CONFLICT
        # as a MERGE, about twice the CPU of an UPDATE of the same rows, and it is every batch)
        kept = set(stored).difference(plan.drop)
        for heads, sql in (
            ([x for x in plan.heads if x.session_id in kept],
             f"UPDATE {self._head} SET next_seq = c.n, version = c.v, created_at = c.c, updated_at = c.u, "
             f"status = c.s FROM (SELECT unnest(?) AS id, unnest(?) AS n, unnest(?) AS v, unnest(?) AS c, "
             f"unnest(?) AS u, unnest(?::VARCHAR[]) AS s) c WHERE session_id = c.id"),
            ([x for x in plan.heads if x.session_id not in kept],
             f"INSERT INTO {self._head} SELECT unnest(?), unnest(?), unnest(?), unnest(?), unnest(?), "
             f"unnest(?::VARCHAR[])"),
        ):
            if heads:
                con.execute(sql, [[x.session_id for x in heads], [x.next_seq for x in heads],
                                  [x.version for x in heads], [x.created_at for x in heads],
                                  [x.updated_at for x in heads], [x.status for x in heads]])
        return plan.conflicts

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
            rows = con.execute(
                f"SELECT next_seq, version, created_at, updated_at, status FROM {self._head} WHERE session_id = ?",
                [session_id],
            ).fetchall()
            head = None if not rows else SessionHead(session_id, int(rows[0][0]), int(rows[0][1]),
                                                     float(rows[0][2] or 0), float(rows[0][3] or 0), rows[0][4])
            found: list[tuple[int, str, str]] = []
            values: list[tuple[str, str]] = []
            if head is not None and records:
                found = [(int(r[0]), r[1], r[2]) for r in con.execute(
                    f"SELECT seq, kind, body FROM {self._record} WHERE session_id = ? AND seq > ? ORDER BY seq",
                    [session_id, after_seq],
                ).fetchall()]
            if head is not None and prefix is not None:
                values = [(r[0], r[1]) for r in con.execute(
                    f"SELECT key, value FROM {self._value} WHERE session_id = ? AND starts_with(key, ?)",
                    [session_id, prefix],
                ).fetchall()]
        finally:
            con.execute("COMMIT")
        return StoredSession(head, found, values)

    async def heads(self, *, limit: int, offset: int) -> list[SessionHead]:
        """Sessions the host saved, most recently updated first."""
        rows = await self._run(
            lambda: self._reader.execute(
                f"SELECT session_id, next_seq, version, created_at, updated_at, status FROM {self._head} "
                f"WHERE version > 0 ORDER BY updated_at DESC, session_id DESC LIMIT ? OFFSET ?", [limit, offset],
            ).fetchall(),
            read=True,
        )
        return [SessionHead(r[0], int(r[1]), int(r[2]), float(r[3] or 0), float(r[4] or 0), r[5]) for r in rows]

    async def stored_bytes(self) -> int:
        """The bytes of record bodies and values stored (the soak bench's measure of growth)."""
        rows = await self._run(
            lambda: self._reader.execute(
                f"SELECT (SELECT coalesce(sum(strlen(body)), 0) FROM {self._record}) + "
                f"(SELECT coalesce(sum(strlen(value)), 0) FROM {self._value})"
            ).fetchall(),
            read=True,
        )
        return int(rows[0][0])

    async def write_raw_value(self, session_id: str, key: str, text: str) -> None:
        """Store ``text`` as a value as is, unchecked (tests use it to plant unreadable data)."""
        await self.flush()

        def write() -> None:
            self._con.execute(
                f"INSERT INTO {self._value} VALUES (?, ?, ?) ON CONFLICT (session_id, key) "
                f"DO UPDATE SET value = excluded.value", [session_id, key, text],
            )
            self._con.execute(
                f"INSERT INTO {self._head} VALUES (?, 1, 1, 0, 0, NULL) ON CONFLICT (session_id) DO NOTHING",
                [session_id],
            )

        await self._run(write)

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

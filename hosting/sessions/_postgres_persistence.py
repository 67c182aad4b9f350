"""The persistence protocol in PostgreSQL: for several hosts sharing their sessions.

The same three tables as DuckDB (``fp_session_head``, ``fp_session_record``, ``fp_session_value``
in ``schema``), the same plan per batch (:func:`hosting.sessions._stored.plan_batch`). Several
hosts may write at once, so a batch first makes each session it touches a head row where it has
none and locks those rows, in session order so two hosts never deadlock — one upsert that
changes nothing, which waits for a host holding the row and returns it as committed: record
numbers and the host's version check are decided on what is committed, not on what this process
last saw. Then one statement stores the batch's records, values and heads (deletes, rare, go
before it). A read is one statement too (head, records and values in one snapshot). The host's
event loop runs every statement: a turn whose saves share one batch costs five round trips
(BEGIN and COMMIT included), where it cost thirteen. Connections (psycopg 3, async) are opened
on first use and kept in a small pool; a broken one is dropped and the next use opens a fresh one.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import sql

from tracer import RedactionPolicy

from ..errors import SessionStoreError, VersionConflictError
from ._duckdb_persistence import LegacyMigration
from ._stored import (
    PREFIX_LONGEST,
    SessionHead,
    StoredPersistence,
    StoredSession,
    WriteSet,
    check_sql_name,
    plan_batch,
)


def redact_dsn(dsn: str) -> str:
    """``dsn`` with its password masked (for messages and logs)."""
    return re.sub(r"(password=)\S+", r"\1***", re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", dsn))


class PostgresPersistence(StoredPersistence):
    """Session records and values in PostgreSQL (``schema``), shared by every host that points at it."""

    shared = True

    def __init__(
        self, dsn: str, *, schema: str = "public", prefix: str = "fp_session", max_connections: int = 4,
        policy: RedactionPolicy | None = None, migrate: LegacyMigration | None = None,
    ) -> None:
        super().__init__(policy=policy)
        check_sql_name("schema", schema, PREFIX_LONGEST)
        check_sql_name("table prefix", prefix, PREFIX_LONGEST)
        self.dsn = dsn
        self.location = redact_dsn(dsn)
        self._schema_name, self._prefix = schema, prefix
        self._schema = sql.Identifier(schema)
        self._head = sql.Identifier(schema, f"{prefix}_head")
        self._record = sql.Identifier(schema, f"{prefix}_record")
        self._value = sql.Identifier(schema, f"{prefix}_value")
        self._legacy = sql.Identifier(schema, prefix)
        self._lock_heads = sql.SQL(
            "INSERT INTO {} AS h (session_id, next_seq, version) "
            "SELECT s, 1, 0 FROM unnest(%s::text[]) WITH ORDINALITY AS t(s, n) ORDER BY n "
            "ON CONFLICT (session_id) DO UPDATE SET session_id = h.session_id "
            "RETURNING session_id, next_seq, version, created_at, updated_at, status"
        ).format(self._head)
        self._store_rows = sql.SQL(
            "WITH r AS (INSERT INTO {} SELECT * FROM unnest(%s::text[], %s::bigint[], %s::text[], %s::text[])), "
            "v AS (INSERT INTO {} SELECT * FROM unnest(%s::text[], %s::text[], %s::text[]) "
            "ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value) "
            "INSERT INTO {} SELECT * FROM unnest(%s::text[], %s::bigint[], %s::bigint[], "
            "%s::double precision[], %s::double precision[], %s::text[]) ON CONFLICT (session_id) DO UPDATE SET "
            "next_seq = excluded.next_seq, version = excluded.version, created_at = excluded.created_at, "
            "updated_at = excluded.updated_at, status = excluded.status"
        ).format(self._record, self._value, self._head)
        self._read_all = sql.SQL(
            # the head, the records and the values in one statement, so in one snapshot
            "SELECT 0, NULL::bigint, NULL, NULL, next_seq, version, created_at, updated_at, status FROM {} "
            "WHERE session_id = %(s)s "
            "UNION ALL SELECT 1, seq, kind, body, NULL, NULL, NULL, NULL, NULL FROM {} "
            "WHERE %(records)s AND session_id = %(s)s AND seq > %(after)s "
            "UNION ALL SELECT 2, NULL, key, value, NULL, NULL, NULL, NULL, NULL FROM {} "
            "WHERE %(values)s AND session_id = %(s)s AND starts_with(key, %(prefix)s)"
        ).format(self._head, self._record, self._value)
        self._migrate = migrate
        self._max = max(1, max_connections)
        self._idle: asyncio.Queue[psycopg.AsyncConnection[Any]] = asyncio.Queue()
        self._opened = 0
        self._all: list[psycopg.AsyncConnection[Any]] = []
        self._ready = False
        self._setup_lock = asyncio.Lock()
        self.healthy = True

    def check_reachable(self, timeout: float = 5.0) -> None:
        """Connect once, synchronously, and raise :class:`SessionStoreError` (password masked) if the
        server cannot be reached: a host refuses to start on a store it cannot use, instead of
        starting, reporting healthy, and failing every turn."""
        try:
            psycopg.connect(self.dsn, connect_timeout=max(1, round(timeout))).close()
        except psycopg.Error as exc:
            raise SessionStoreError(
                f"cannot reach the PostgreSQL session store {self.location}: {_masked(exc, self.dsn)}") from None

    # ------------------------------------------------------------------ connections

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        if self._closed:
            raise SessionStoreError(f"the session store {self.location} is closed")
        if self._idle.empty() and self._opened < self._max:
            self._opened += 1
            try:
                con = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
            except psycopg.Error as exc:
                self._opened -= 1
                raise SessionStoreError(
                    f"cannot reach the PostgreSQL session store {self.location}: {_masked(exc, self.dsn)}"
                ) from None
            self._all.append(con)
        else:
            con = await self._idle.get()
        keep = True
        try:
            if not self._ready:
                await self._setup(con)
            yield con
        except psycopg.OperationalError as exc:
            keep = False  # a broken connection is dropped, not handed to the next request
            raise SessionStoreError(
                f"the PostgreSQL session store {self.location} failed: {_masked(exc, self.dsn)}") from None
        except psycopg.Error as exc:
            raise SessionStoreError(
                f"the PostgreSQL session store {self.location} failed: {_masked(exc, self.dsn)}") from None
        except asyncio.CancelledError:
            keep = False  # a statement may still be in flight on it
            raise
        finally:
            if keep and not con.closed:
                self._idle.put_nowait(con)
            else:
                self._opened -= 1
                if con in self._all:
                    self._all.remove(con)
                await con.close()

    async def _setup(self, con: psycopg.AsyncConnection[Any]) -> None:
        async with self._setup_lock:
            if self._ready:
                return
            async with con.transaction():
                # one setup at a time across hosts: CREATE ... IF NOT EXISTS races otherwise
                await con.execute("SELECT pg_advisory_xact_lock(hashtext(%s))",
                                  [f"footprint:{self._schema_name}.{self._prefix}"])
                await con.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(self._schema))
                await con.execute(sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (session_id TEXT PRIMARY KEY, next_seq BIGINT NOT NULL, "
                    "version BIGINT NOT NULL, created_at DOUBLE PRECISION, updated_at DOUBLE PRECISION, status TEXT)"
                ).format(self._head))
                await con.execute(sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (session_id TEXT NOT NULL, seq BIGINT NOT NULL, kind TEXT NOT NULL, "
                    "body TEXT NOT NULL, PRIMARY KEY (session_id, seq))"
                ).format(self._record))
                await con.execute(sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (session_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, "
                    "PRIMARY KEY (session_id, key))"
                ).format(self._value))
                cur = await con.execute(
                    "SELECT 1 FROM information_schema.columns WHERE table_schema = %s AND table_name = %s "
                    "AND column_name = 'payload'", [self._schema_name, self._prefix],
                )
                if await cur.fetchone() is not None and self._migrate is not None:
                    cur = await con.execute(sql.SQL(
                        "SELECT session_id, version, created_at, updated_at, status, payload FROM {} ORDER BY session_id"
                    ).format(self._legacy))
                    writes = self._migrate(list(await cur.fetchall()), self.policy)
                    await self._apply(con, writes)
                    await con.execute(sql.SQL("DROP TABLE {}").format(self._legacy))
            self._ready = True

    async def reopen(self) -> None:
        """Drop every connection; the next use opens fresh ones."""
        for con in list(self._all):
            await con.close()
        self._all.clear()
        while not self._idle.empty():
            self._idle.get_nowait()
        self._opened = 0
        async with self._connection() as con:
            await con.execute("SELECT 1")
        self.healthy = True

    # ------------------------------------------------------------------ writing

    async def _write(self, batch: list[WriteSet]) -> dict[int, VersionConflictError]:
        async with self._connection() as con, con.transaction():
            return await self._apply(con, batch)

    async def _apply(self, con: psycopg.AsyncConnection[Any], batch: list[WriteSet]) -> dict[int, VersionConflictError]:
        sids = sorted({ws.session_id for ws in batch})
        # each session's head row, made (version 0: nothing of the host's yet) where there is none,
        # and locked, in session order, in one statement: an upsert that changes nothing still
        # locks the row it meets and returns it as committed, also one another host has just made
        cur = await con.execute(self._lock_heads, [sids])
        rows = await cur.fetchall()
        stored = {r[0]: SessionHead(r[0], int(r[1]), int(r[2]), float(r[3] or 0), float(r[4] or 0), r[5])
                  for r in rows}
        plan = plan_batch(batch, stored)
        if plan.drop:
            for table in (self._record, self._value, self._head):
                await con.execute(sql.SQL("DELETE FROM {} WHERE session_id = ANY(%s)").format(table), [plan.drop])
        if plan.clear_below:
            await con.execute(sql.SQL(
                "DELETE FROM {} r USING (SELECT unnest(%s::text[]) AS s, unnest(%s::bigint[]) AS n) c "
                "WHERE r.session_id = c.s AND r.seq < c.n"
            ).format(self._record), [list(plan.clear_below), list(plan.clear_below.values())])
        if plan.value_deletes:
            await con.execute(sql.SQL(
                "DELETE FROM {} v USING (SELECT unnest(%s::text[]) AS s, unnest(%s::text[]) AS k) d "
                "WHERE v.session_id = d.s AND v.key = d.k"
            ).format(self._value), [[d[0] for d in plan.value_deletes], [d[1] for d in plan.value_deletes]])
        if plan.records or plan.value_upserts or plan.heads:
            # the records, the values and the heads in one statement: one round trip, not three
            r, u, h = plan.records, plan.value_upserts, plan.heads
            await con.execute(self._store_rows, [
                [x[0] for x in r], [x[1] for x in r], [x[2] for x in r], [x[3] for x in r],
                [x[0] for x in u], [x[1] for x in u], [x[2] for x in u],
                [x.session_id for x in h], [x.next_seq for x in h], [x.version for x in h],
                [x.created_at for x in h], [x.updated_at for x in h], [x.status for x in h]])
        return plan.conflicts

    # ------------------------------------------------------------------ reading

    async def read(
        self, session_id: str, *, records: bool = True, prefix: str | None = "", after_seq: int = 0
    ) -> StoredSession:
        """The session's head, records above ``after_seq`` and values under ``prefix``, read in one snapshot."""
        async with self._connection() as con:
            cur = await con.execute(self._read_all, {
                "s": session_id, "records": records, "after": after_seq, "values": prefix is not None,
                "prefix": prefix or ""})
            rows = await cur.fetchall()
        head: SessionHead | None = None
        found: list[tuple[int, str, str]] = []
        values: list[tuple[str, str]] = []
        for part, seq, a, b, next_seq, version, created_at, updated_at, status in rows:
            if part == 0:
                head = SessionHead(session_id, int(next_seq), int(version), float(created_at or 0),
                                   float(updated_at or 0), status)
            elif part == 1:
                found.append((int(seq), a, b))
            else:
                values.append((a, b))
        if head is None:
            return StoredSession(None, [], [])
        found.sort()  # (in order: the statement does not promise one)
        return StoredSession(head, found, values)

    async def heads(self, *, limit: int, offset: int) -> list[SessionHead]:
        """Sessions the host saved, most recently updated first."""
        async with self._connection() as con:
            cur = await con.execute(sql.SQL(
                "SELECT session_id, next_seq, version, created_at, updated_at, status FROM {} WHERE version > 0 "
                "ORDER BY updated_at DESC, session_id DESC LIMIT %s OFFSET %s"
            ).format(self._head), [limit, offset])
            rows = await cur.fetchall()
        return [SessionHead(r[0], int(r[1]), int(r[2]), float(r[3] or 0), float(r[4] or 0), r[5]) for r in rows]

    async def stored_bytes(self) -> int:
        """The bytes of record bodies and values stored (the soak bench's measure of growth)."""
        async with self._connection() as con:
            cur = await con.execute(sql.SQL(
                "SELECT (SELECT coalesce(sum(octet_length(body)), 0) FROM {}) + "
                "(SELECT coalesce(sum(octet_length(value)), 0) FROM {})"
            ).format(self._record, self._value))
            row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def write_raw_value(self, session_id: str, key: str, text: str) -> None:
        """Store ``text`` as a value as is, unchecked (tests use it to plant unreadable data)."""
        await self.flush()
        async with self._connection() as con, con.transaction():
            await con.execute(sql.SQL(
                "INSERT INTO {} VALUES (%s, %s, %s) ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value"
            ).format(self._value), [session_id, key, text])
            await con.execute(sql.SQL(
                "INSERT INTO {} VALUES (%s, 1, 1, 0, 0, NULL) ON CONFLICT (session_id) DO NOTHING"
            ).format(self._head), [session_id])

    async def close(self) -> None:
        """Commit what is pending and close every connection."""
        if self._closed:
            return
        await super().close()
        for con in self._all:
            await con.close()
        self._all.clear()


def _masked(exc: BaseException, dsn: str) -> str:
    """The error text with the DSN's password (should the driver echo it) masked."""
    text = str(exc)
    password = re.search(r"://[^:/@]+:([^@]*)@", dsn) or re.search(r"password=(\S+)", dsn)
    if password and password.group(1):
        text = text.replace(password.group(1), "***")
    return text

"""The PostgreSQL session store: for several hosts behind a load balancer.

Every save is one conditional statement (``INSERT ... ON CONFLICT DO NOTHING`` for a new session,
``UPDATE ... WHERE version = expected`` otherwise), so two hosts that loaded the same version can
never both write: the second gets :class:`VersionConflictError` and nothing is overwritten.
Connections (psycopg 3, async) are opened on first use and kept in a small pool.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import sql

from ..errors import SessionStoreError, VersionConflictError
from ._base import SessionStore, next_version
from ._envelope import Envelope, SessionSummary

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def _redact(dsn: str) -> str:
    return re.sub(r"(password=)\S+", r"\1***", re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", dsn))


class PostgresSessions(SessionStore):
    """Sessions in a PostgreSQL table (``schema.table``), shared by every host that points at it."""

    shared = True
    name = "postgresql"

    def __init__(
        self, dsn: str, *, schema: str = "public", table: str = "fp_session", max_connections: int = 4
    ) -> None:
        for what, value in (("schema", schema), ("table", table)):
            if not _IDENT.match(value):
                raise ValueError(f"{what} name {value!r} must be letters, digits and underscores")
        self.dsn = dsn
        self.location = _redact(dsn)
        self._table = sql.Identifier(schema, table)
        self._schema = sql.Identifier(schema)
        self._max = max(1, max_connections)
        self._idle: asyncio.Queue[psycopg.AsyncConnection[Any]] = asyncio.Queue()
        self._opened = 0
        self._all: list[psycopg.AsyncConnection[Any]] = []
        self._ready = False
        self._setup_lock = asyncio.Lock()
        self._closed = False

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
                raise SessionStoreError(f"cannot reach the PostgreSQL session store {self.location}: {exc}") from exc
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
            raise SessionStoreError(f"the PostgreSQL session store {self.location} failed: {exc}") from exc
        except psycopg.Error as exc:
            raise SessionStoreError(f"the PostgreSQL session store {self.location} failed: {exc}") from exc
        except asyncio.CancelledError:
            keep = False  # a statement may still be in flight on it
            raise
        finally:
            if keep:
                self._idle.put_nowait(con)
            else:
                self._opened -= 1
                self._all.remove(con)
                await con.close()

    async def _setup(self, con: psycopg.AsyncConnection[Any]) -> None:
        async with self._setup_lock:
            if self._ready:
                return
            await con.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(self._schema))
            await con.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (session_id TEXT PRIMARY KEY, version BIGINT NOT NULL, "
                    "created_at DOUBLE PRECISION, updated_at DOUBLE PRECISION, status TEXT, payload TEXT NOT NULL)"
                ).format(self._table)
            )
            self._ready = True

    async def load(self, session_id: str) -> Envelope | None:
        """The session's envelope, or None."""
        async with self._connection() as con:
            cur = await con.execute(
                sql.SQL("SELECT version, updated_at, payload FROM {} WHERE session_id = %s").format(self._table),
                [session_id],
            )
            row = await cur.fetchone()
        if row is None:
            return None
        return Envelope.decode(session_id, row[2], version=int(row[0]), updated_at=float(row[1] or 0.0))

    async def save(self, envelope: Envelope, *, durable: bool = True) -> Envelope:
        """Store the envelope when its version is current (one conditional statement)."""
        saved = next_version(envelope)
        payload = saved.encode()
        async with self._connection() as con:
            if envelope.version == 0:
                cur = await con.execute(
                    sql.SQL("INSERT INTO {} VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING "
                            "RETURNING version").format(self._table),
                    [saved.session_id, saved.version, saved.created_at, saved.updated_at, saved.status, payload],
                )
            else:
                cur = await con.execute(
                    sql.SQL("UPDATE {} SET version = %s, updated_at = %s, status = %s, payload = %s "
                            "WHERE session_id = %s AND version = %s RETURNING version").format(self._table),
                    [saved.version, saved.updated_at, saved.status, payload, saved.session_id, envelope.version],
                )
            if await cur.fetchone() is None:
                cur = await con.execute(
                    sql.SQL("SELECT version FROM {} WHERE session_id = %s").format(self._table), [saved.session_id]
                )
                found = await cur.fetchone()
                raise VersionConflictError(saved.session_id, envelope.version, None if found is None else int(found[0]))
        return saved

    async def delete(self, session_id: str) -> bool:
        """Remove a session."""
        async with self._connection() as con:
            cur = await con.execute(
                sql.SQL("DELETE FROM {} WHERE session_id = %s RETURNING session_id").format(self._table), [session_id]
            )
            return await cur.fetchone() is not None

    async def list(self, *, limit: int = 1000, offset: int = 0) -> list[SessionSummary]:
        """Sessions, most recently updated first."""
        async with self._connection() as con:
            cur = await con.execute(
                sql.SQL("SELECT session_id, version, created_at, updated_at, status FROM {} "
                        "ORDER BY updated_at DESC, session_id DESC LIMIT %s OFFSET %s").format(self._table),
                [limit, offset],
            )
            rows = await cur.fetchall()
        return [SessionSummary(r[0], int(r[1]), float(r[2] or 0), float(r[3] or 0), r[4]) for r in rows]

    async def write_raw(self, session_id: str, text: str) -> None:
        """Overwrite a session's stored text as is (tests use it to store a corrupt envelope)."""
        async with self._connection() as con:
            await con.execute(
                sql.SQL("INSERT INTO {} VALUES (%s, 1, 0, 0, NULL, %s) ON CONFLICT (session_id) "
                        "DO UPDATE SET payload = excluded.payload").format(self._table),
                [session_id, text],
            )

    async def close(self) -> None:
        """Close every connection."""
        self._closed = True
        for con in self._all:
            await con.close()
        self._all.clear()

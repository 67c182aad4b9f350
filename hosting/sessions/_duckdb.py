"""The DuckDB session store: the embedded default, in the same file as the recordings.

One process owns a DuckDB file, so the host does not open the file a second time: it takes a
cursor from the tracer :class:`~tracer.Store` it records into and keeps sessions in a table of its
own, ``fp_session``. Given a ``path`` instead, it opens that file for itself. Every statement runs
on one worker thread, so the event loop never waits on DuckDB and statements never interleave.
This is the only hosting module that imports duckdb.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import duckdb

from tracer import Store

from ..errors import SessionStoreError, VersionConflictError
from ._base import SessionStore, next_version
from ._envelope import Envelope, SessionSummary

T = TypeVar("T")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


class DuckDBSessions(SessionStore):
    """Sessions in a DuckDB table: in the recordings file (``store=``) or a file of their own (``path=``)."""

    name = "duckdb"

    def __init__(self, store: Store | None = None, *, path: str | None = None, table: str = "fp_session") -> None:
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
        except duckdb.Error as exc:
            raise SessionStoreError(f"cannot open the session store {path}: {exc}") from exc
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="footprint-sessions")
        self._con.execute(
            f"CREATE TABLE IF NOT EXISTS {table} (session_id VARCHAR PRIMARY KEY, version BIGINT NOT NULL, "
            f"created_at DOUBLE, updated_at DOUBLE, status VARCHAR, payload VARCHAR NOT NULL)"
        )
        self._closed = False

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise SessionStoreError(f"the session store in {self.location} is closed")
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
        except duckdb.Error as exc:
            raise SessionStoreError(f"the session store in {self.location} failed: {exc}") from exc

    async def load(self, session_id: str) -> Envelope | None:
        """The session's envelope, or None."""
        row = await self._run(self._fetch, session_id)
        if row is None:
            return None
        return Envelope.decode(session_id, row[2], version=int(row[0]), updated_at=float(row[1] or 0.0))

    def _fetch(self, session_id: str) -> tuple[Any, ...] | None:
        return self._con.execute(
            f"SELECT version, updated_at, payload FROM {self._table} WHERE session_id = ?", [session_id]
        ).fetchone()

    async def save(self, envelope: Envelope) -> Envelope:
        """Store the envelope when its version is current."""
        saved = next_version(envelope)
        await self._run(self._write, envelope.version, saved)
        return saved

    def _write(self, expected: int, saved: Envelope) -> None:
        payload = saved.encode()
        if expected == 0:
            row = self._con.execute(
                f"INSERT INTO {self._table} VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING version",
                [saved.session_id, saved.version, saved.created_at, saved.updated_at, saved.status, payload],
            ).fetchone()
        else:
            row = self._con.execute(
                f"UPDATE {self._table} SET version = ?, updated_at = ?, status = ?, payload = ? "
                f"WHERE session_id = ? AND version = ? RETURNING version",
                [saved.version, saved.updated_at, saved.status, payload, saved.session_id, expected],
            ).fetchone()
        if row is None:
            found = self._con.execute(
                f"SELECT version FROM {self._table} WHERE session_id = ?", [saved.session_id]
            ).fetchone()
            raise VersionConflictError(saved.session_id, expected, None if found is None else int(found[0]))

    async def delete(self, session_id: str) -> bool:
        """Remove a session."""
        return await self._run(self._delete, session_id)

    def _delete(self, session_id: str) -> bool:
        row = self._con.execute(
            f"DELETE FROM {self._table} WHERE session_id = ? RETURNING session_id", [session_id]
        ).fetchone()
        return row is not None

    async def list(self, *, limit: int = 1000, offset: int = 0) -> list[SessionSummary]:
        """Sessions, most recently updated first."""
        rows = await self._run(
            lambda: self._con.execute(
                f"SELECT session_id, version, created_at, updated_at, status FROM {self._table} "
                f"ORDER BY updated_at DESC, session_id DESC LIMIT ? OFFSET ?", [limit, offset],
            ).fetchall()
        )
        return [SessionSummary(r[0], int(r[1]), float(r[2] or 0), float(r[3] or 0), r[4]) for r in rows]

    async def write_raw(self, session_id: str, text: str) -> None:
        """Overwrite a session's stored text as is (tests use it to store a corrupt envelope)."""
        await self._run(
            lambda: self._con.execute(
                f"INSERT INTO {self._table} VALUES (?, 1, 0, 0, NULL, ?) "
                f"ON CONFLICT (session_id) DO UPDATE SET payload = excluded.payload", [session_id, text],
            )
        )

    async def close(self) -> None:
        """Close the cursor (or the file this store opened); the recordings store stays open."""
        if self._closed:
            return
        self._closed = True
        await asyncio.get_running_loop().run_in_executor(self._executor, self._con.close)
        self._executor.shutdown(wait=True)

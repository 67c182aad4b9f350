"""The PostgreSQL agents repository: one set of agents for every host that points at it.

``shared`` is True: another host may change an agent at any time, so a gateway re-checks a cached
agent's ``updated_at`` before using it (at most every ``revalidate_after`` seconds). A unique index
on ``lower(name)`` keeps two hosts from creating two agents of one name. Statements run on one
connection (psycopg 3, async, opened on first use, replaced when it breaks): agent definitions are
read rarely, and personal memory once per turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import psycopg

from ..sessions._postgres_persistence import redact_dsn
from ..sessions._stored import check_sql_name
from ._sql import SqlAgents
from .errors import AgentConflictError, AgentStoreError


class PostgresAgents(SqlAgents):
    """Agents and personal memory in PostgreSQL tables (``schema.fp_agents``, ``schema.fp_personal_memory``)."""

    name = "postgresql"
    shared = True

    def __init__(
        self, dsn: str, *, schema: str = "public", table: str = "fp_agents", memory_table: str = "fp_personal_memory",
    ) -> None:
        self._schema = check_sql_name("schema", schema)
        check_sql_name("table", table)
        check_sql_name("memory table", memory_table)
        super().__init__(f'"{schema}"."{table}"', f'"{schema}"."{memory_table}"')
        self._table = table
        self.dsn = dsn
        self.location = redact_dsn(dsn)
        self._con: psycopg.AsyncConnection[Any] | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    def check_reachable(self, timeout: float = 5.0) -> None:
        """Connect once, synchronously, and raise :class:`AgentStoreError` (password masked) if the
        server cannot be reached: ``footprint serve`` refuses to start on a repository it cannot use."""
        try:
            psycopg.connect(self.dsn, connect_timeout=max(1, round(timeout))).close()
        except psycopg.Error as exc:
            raise AgentStoreError(f"cannot reach the agents repository {self.location}: "
                                  f"{' '.join(redact_dsn(str(exc)).split())}") from None

    async def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement (autocommit) on the repository's connection."""
        async with self._lock:
            con = await self._connection()
            try:
                cursor = await con.execute(sql.replace("?", "%s"), list(params))
                return list(await cursor.fetchall()) if cursor.description else []
            except psycopg.errors.UniqueViolation as exc:
                raise AgentConflictError(f"another agent already has this name ({exc.diag.message_detail})") from exc
            except psycopg.OperationalError as exc:
                await self._drop()
                raise AgentStoreError(f"the agents repository {self.location} failed: {exc}") from exc
            except psycopg.Error as exc:
                raise AgentStoreError(f"the agents repository {self.location} failed: {exc}") from exc
            except asyncio.CancelledError:
                await self._drop()  # a statement may still be in flight on it
                raise

    async def _connection(self) -> psycopg.AsyncConnection[Any]:
        if self._closed:
            raise AgentStoreError(f"the agents repository {self.location} is closed")
        if self._con is not None and not self._con.closed:
            return self._con
        try:
            con = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
            await con.execute(f'CREATE SCHEMA IF NOT EXISTS "{self._schema}"')
            await con.execute(self.agents_ddl("TEXT", "DOUBLE PRECISION"))
            await con.execute(f'CREATE UNIQUE INDEX IF NOT EXISTS "{self._table}_name" ON {self._agents} (lower(name))')
            await con.execute(self.memory_ddl("TEXT", "DOUBLE PRECISION"))
        except psycopg.Error as exc:
            raise AgentStoreError(f"cannot reach the agents repository {self.location}: {exc}") from exc
        self._con = con
        return con

    async def _drop(self) -> None:
        con, self._con = self._con, None
        if con is not None:
            await con.close()

    async def close(self) -> None:
        """Close the connection."""
        self._closed = True
        await self._drop()

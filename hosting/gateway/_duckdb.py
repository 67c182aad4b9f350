"""The DuckDB agents repository: the host's embedded default, in the recordings file.

Like the DuckDB session store, it takes a cursor from the tracer :class:`~tracer.Store` the host
records into (one process owns a DuckDB file), or opens a file of its own. Statements run on one
worker thread, so the event loop never waits on DuckDB and writes are serialized — which is also
what makes a create's name check and its insert one step. Agent definitions are read on an
agent's first use and when it changes, not on every turn, so nothing here is batched.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from typing import Any

import duckdb

from tracer import Store

from ..sessions._stored import check_sql_name
from ._sql import SqlAgents
from .errors import AgentStoreError


class DuckDBAgents(SqlAgents):
    """Agents and personal memory in DuckDB: the recordings file (``store=``) or a file of its own (``path=``)."""

    name = "duckdb"

    def __init__(
        self, store: Store | None = None, *, path: str | None = None, table: str = "fp_agents",
        memory_table: str = "fp_personal_memory",
    ) -> None:
        if (store is None) == (path is None):
            raise ValueError("DuckDBAgents needs exactly one of `store` (the recordings store) or `path`")
        super().__init__(check_sql_name("table", table), check_sql_name("memory table", memory_table))
        self.location = store.path if store is not None else str(path)
        self._store = store
        self._owned: duckdb.DuckDBPyConnection | None = None
        try:
            if store is not None:
                self._con = store.cursor()
            else:
                self._owned = self._con = duckdb.connect(str(path))
            with store.committing() if store is not None else nullcontext():
                self._con.execute(self.agents_ddl("VARCHAR", "DOUBLE"))
                self._con.execute(self.memory_ddl("VARCHAR", "DOUBLE"))
        except duckdb.Error as exc:
            raise AgentStoreError(f"cannot open the agents repository in {self.location}: {exc}") from exc
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="footprint-agents")
        self._closed = False

    async def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement on the worker thread."""
        if self._closed:
            raise AgentStoreError(f"the agents repository in {self.location} is closed")
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._run, sql, list(params))

    def _run(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        try:  # in the recordings file, a write must not overlap the recordings store's cache trim
            with self._store.committing() if self._store is not None else nullcontext():
                cursor = self._con.execute(sql, params)
                return cursor.fetchall() if cursor.description else []
        except duckdb.Error as exc:
            raise AgentStoreError(f"the agents repository in {self.location} failed: {exc}") from exc

    async def close(self) -> None:
        """Stop the worker and close the file this repository opened itself."""
        if self._closed:
            return
        self._closed = True
        await asyncio.get_running_loop().run_in_executor(None, self._executor.shutdown)
        if self._owned is not None:
            self._owned.close()

"""The SQL both database repositories share: DuckDB and PostgreSQL differ only in how a statement
is run and in their table setup.

Tables (``fp_agents`` and ``fp_personal_memory`` by default):

    fp_agents           id PK, name, system_prompt, provider, model, config (JSON text),
                        created_at, updated_at (Unix seconds)
    fp_personal_memory  (user_id, kind, name) PK, text, status, importance, updated_at

A create or a rename that would give two agents one name (compared case-insensitively) writes
nothing: the check is part of the statement that writes, so it cannot be raced on one writer
(DuckDB), and PostgreSQL backs it with a unique index on ``lower(name)``.
"""

from __future__ import annotations

import builtins  # (`list` in a class that defines a method `list`)
import time
from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

from agent import MemoryRecord, PersonalMemory
from agent._personal import sort_records

from ._definition import AgentRecord, record_from_row
from ._repository import AgentsRepository, check_free

_COLUMNS = "id, name, system_prompt, provider, model, config, created_at, updated_at"


class SqlAgents(AgentsRepository):
    """Agents and personal memory in two SQL tables; subclasses run the statements."""

    def __init__(self, agents_table: str, memory_table: str) -> None:
        self._agents = agents_table
        self._memory_table = memory_table
        self.memory: PersonalMemory = _SqlMemory(self)

    @abstractmethod
    async def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement (``?`` placeholders) and return its rows (none for a write without RETURNING)."""

    async def create(self, record: AgentRecord) -> AgentRecord:
        """Insert the agent unless its id or name is taken."""
        rows = await self.query(
            f"INSERT INTO {self._agents} ({_COLUMNS}) SELECT ?, ?, ?, ?, ?, ?, ?, ? WHERE NOT EXISTS "
            f"(SELECT 1 FROM {self._agents} WHERE id = ? OR lower(name) = lower(?)) RETURNING id",
            [*_values(record), record.id, record.name],
        )
        if not rows:
            check_free(record, await self.get(record.id), await self.get_by_name(record.name))
        return record

    async def get(self, agent_id: str) -> AgentRecord | None:
        """The agent, or None."""
        rows = await self.query(f"SELECT {_COLUMNS} FROM {self._agents} WHERE id = ?", [agent_id])
        return record_from_row(rows[0], where=f"agent {agent_id}") if rows else None

    async def get_by_name(self, name: str) -> AgentRecord | None:
        """The agent with this name (case-insensitive)."""
        rows = await self.query(f"SELECT {_COLUMNS} FROM {self._agents} WHERE lower(name) = lower(?)", [name])
        return record_from_row(rows[0], where=f"agent {rows[0][0]}") if rows else None

    async def list(self, *, limit: int = 1000, offset: int = 0) -> list[AgentRecord]:
        """Agents by name."""
        rows = await self.query(
            f"SELECT {_COLUMNS} FROM {self._agents} ORDER BY lower(name), id LIMIT ? OFFSET ?",
            [max(0, limit), max(0, offset)],
        )
        return [record_from_row(row, where=f"agent {row[0]}") for row in rows]

    async def update(self, record: AgentRecord) -> AgentRecord | None:
        """Replace the agent unless another one has its name."""
        rows = await self.query(
            f"UPDATE {self._agents} SET name = ?, system_prompt = ?, provider = ?, model = ?, config = ?, "
            f"created_at = ?, updated_at = ? WHERE id = ? AND NOT EXISTS (SELECT 1 FROM {self._agents} "
            f"WHERE lower(name) = lower(?) AND id <> ?) RETURNING id",
            [*_values(record)[1:], record.id, record.name, record.id],
        )
        if rows:
            return record
        if await self.get(record.id) is None:
            return None
        check_free(record, None, await self.get_by_name(record.name))
        return record  # unreachable in practice: the name was free after all (a concurrent rename)

    async def delete(self, agent_id: str) -> bool:
        """Remove the agent."""
        return bool(await self.query(f"DELETE FROM {self._agents} WHERE id = ? RETURNING id", [agent_id]))

    async def count(self) -> int:
        """How many agents."""
        return int((await self.query(f"SELECT count(*) FROM {self._agents}"))[0][0])

    async def revision(self, agent_id: str) -> float | None:
        """The agent's ``updated_at`` alone (one indexed lookup)."""
        rows = await self.query(f"SELECT updated_at FROM {self._agents} WHERE id = ?", [agent_id])
        return float(rows[0][0]) if rows else None

    # ------------------------------------------------------------------ personal memory

    async def memory_records(self, user_id: str) -> builtins.list[MemoryRecord]:
        """Every personal memory record of the user."""
        rows = await self.query(
            f"SELECT user_id, kind, name, text, status, importance, updated_at FROM {self._memory_table} "
            f"WHERE user_id = ?", [user_id],
        )
        return sort_records(MemoryRecord(r[0], r[1], r[2], r[3], r[4], float(r[5]), float(r[6])) for r in rows)

    async def put_memory(self, record: MemoryRecord) -> MemoryRecord:
        """Add or replace a record."""
        stored = MemoryRecord(record.user_id, record.kind, record.name, record.text, record.status,
                              record.importance, time.time())
        await self.query(
            f"INSERT INTO {self._memory_table} (user_id, kind, name, text, status, importance, updated_at) "
            f"VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (user_id, kind, name) DO UPDATE SET text = excluded.text, "
            f"status = excluded.status, importance = excluded.importance, updated_at = excluded.updated_at",
            [stored.user_id, stored.kind, stored.name, stored.text, stored.status, stored.importance,
             stored.updated_at],
        )
        return stored

    async def delete_memory(self, user_id: str, key: str) -> bool:
        """Remove the record ``kind/name``."""
        kind, _, name = key.partition("/")
        rows = await self.query(
            f"DELETE FROM {self._memory_table} WHERE user_id = ? AND kind = ? AND name = ? RETURNING name",
            [user_id, kind, name],
        )
        return bool(rows)

    def agents_ddl(self, text: str, real: str) -> str:
        """The agents table's CREATE statement in the dialect's type names."""
        return (f"CREATE TABLE IF NOT EXISTS {self._agents} (id {text} PRIMARY KEY, name {text} NOT NULL, "
                f"system_prompt {text}, provider {text} NOT NULL, model {text} NOT NULL, "
                f"config {text} NOT NULL DEFAULT '{{}}', created_at {real}, updated_at {real})")

    def memory_ddl(self, text: str, real: str) -> str:
        """The personal memory table's CREATE statement."""
        return (f"CREATE TABLE IF NOT EXISTS {self._memory_table} (user_id {text} NOT NULL, kind {text} NOT NULL, "
                f"name {text} NOT NULL, text {text} NOT NULL, status {text} NOT NULL, importance {real} NOT NULL, "
                f"updated_at {real} NOT NULL, PRIMARY KEY (user_id, kind, name))")


def _values(record: AgentRecord) -> list[Any]:
    return [record.id, record.name, record.system_prompt, record.provider, record.model, record.config_json(),
            record.created_at, record.updated_at]


class _SqlMemory(PersonalMemory):
    """The personal memory view of a :class:`SqlAgents` repository."""

    def __init__(self, repository: SqlAgents) -> None:
        self._repository = repository

    async def records(self, user_id: str) -> list[MemoryRecord]:
        """Every record of the user, in profile order."""
        return await self._repository.memory_records(user_id)

    async def put(self, record: MemoryRecord) -> MemoryRecord:
        """Add or replace a record."""
        return await self._repository.put_memory(record)

    async def delete(self, user_id: str, key: str) -> bool:
        """Remove a record."""
        return await self._repository.delete_memory(user_id, key)

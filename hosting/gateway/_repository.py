"""The agents repository: where stored agent definitions and users' personal memory are kept.

One interface, three stores: in memory (tests, one process), DuckDB (the host's embedded default,
in the recordings file) and PostgreSQL (several hosts sharing one database). One conformance
suite runs against all of them (tests/hosting/gateway/test_repository.py).

``shared`` says whether other hosts may change the same agents: a gateway then re-checks a cached
agent's ``updated_at`` (:meth:`AgentsRepository.revision`) before using it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from agent import InMemoryPersonalMemory, PersonalMemory

from ._definition import AgentRecord
from .errors import AgentConflictError


class AgentsRepository(ABC):
    """Stored agent definitions, and (``memory``) the users' personal memory."""

    name: str = "agents"
    shared: bool = False
    memory: PersonalMemory

    @abstractmethod
    async def create(self, record: AgentRecord) -> AgentRecord:
        """Store a new agent; :class:`AgentConflictError` when its id or name is taken."""

    @abstractmethod
    async def get(self, agent_id: str) -> AgentRecord | None:
        """The agent with this id, or None."""

    @abstractmethod
    async def get_by_name(self, name: str) -> AgentRecord | None:
        """The agent with this name (case-insensitive), or None."""

    @abstractmethod
    async def list(self, *, limit: int = 1000, offset: int = 0) -> list[AgentRecord]:
        """Agents, by name."""

    @abstractmethod
    async def update(self, record: AgentRecord) -> AgentRecord | None:
        """Replace the stored agent of ``record.id``; None when there is none. A name taken by
        another agent is an :class:`AgentConflictError`."""

    @abstractmethod
    async def delete(self, agent_id: str) -> bool:
        """Remove an agent; True when it existed."""

    @abstractmethod
    async def count(self) -> int:
        """How many agents are stored."""

    async def revision(self, agent_id: str) -> float | None:
        """The agent's ``updated_at`` (None: gone): what tells a cached agent it is stale."""
        record = await self.get(agent_id)
        return None if record is None else record.updated_at

    async def close(self) -> None:  # noqa: B027 - only stores holding connections need it
        """Release connections."""


class InMemoryAgents(AgentsRepository):
    """Agents and personal memory in dicts."""

    name = "memory"

    def __init__(self) -> None:
        self._agents: dict[str, AgentRecord] = {}
        self.memory = InMemoryPersonalMemory()

    async def create(self, record: AgentRecord) -> AgentRecord:
        """Store a new agent."""
        check_free(record, self._agents.get(record.id), await self.get_by_name(record.name))
        self._agents[record.id] = record
        return record

    async def get(self, agent_id: str) -> AgentRecord | None:
        """The agent, or None."""
        return self._agents.get(agent_id)

    async def get_by_name(self, name: str) -> AgentRecord | None:
        """The agent with this name."""
        folded = name.lower()  # as the SQL stores compare: lower(name), so 'Straße' is not 'STRASSE' anywhere
        return next((r for r in self._agents.values() if r.name.lower() == folded), None)

    async def list(self, *, limit: int = 1000, offset: int = 0) -> list[AgentRecord]:
        """Agents by name."""
        ordered = sorted(self._agents.values(), key=lambda r: (r.name.lower(), r.id))
        return ordered[offset:offset + limit]

    async def update(self, record: AgentRecord) -> AgentRecord | None:
        """Replace an agent."""
        if record.id not in self._agents:
            return None
        check_free(record, None, await self.get_by_name(record.name))
        self._agents[record.id] = record
        return record

    async def delete(self, agent_id: str) -> bool:
        """Remove an agent."""
        return self._agents.pop(agent_id, None) is not None

    async def count(self) -> int:
        """How many agents."""
        return len(self._agents)


def check_free(record: AgentRecord, same_id: AgentRecord | None, same_name: AgentRecord | None) -> None:
    """Raise :class:`AgentConflictError` when ``record``'s id or name belongs to another agent."""
    if same_id is not None:
        raise AgentConflictError(f"an agent with the id {record.id!r} already exists")
    if same_name is not None and same_name.id != record.id:
        raise AgentConflictError(f"the name {record.name!r} is taken by agent {same_name.id!r}; pick another")

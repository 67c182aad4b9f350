"""The agents gateway: agent definitions stored as data, built into running agents on first use.

A :class:`Gateway` keeps definitions in an :class:`AgentsRepository` (:class:`InMemoryAgents`,
:class:`DuckDBAgents` in the host's file, :class:`PostgresAgents` for several hosts), seeds default
agents from a JSON file, builds an agent lazily with its provider, tools and personal memory,
caches it, and drops it when its definition or the tools change. The REST API over it is
``/api/agents`` in :func:`hosting.create_app`.
"""

from ._definition import AgentConfig, AgentDefinition, AgentRecord
from ._duckdb import DuckDBAgents
from ._gateway import Gateway
from ._instance import GatewaySettings, LiveAgent, session_key
from ._postgres import PostgresAgents
from ._repository import AgentsRepository, InMemoryAgents
from ._seeds import SyncReport, choose_agent, load_seed_file, parse_seeds
from .errors import (
    AgentConflictError,
    AgentDefinitionError,
    AgentNotFoundError,
    AgentStoreError,
    GatewayError,
    SeedFileError,
)

__all__ = [
    "AgentConfig",
    "AgentConflictError",
    "AgentDefinition",
    "AgentDefinitionError",
    "AgentNotFoundError",
    "AgentRecord",
    "AgentStoreError",
    "AgentsRepository",
    "DuckDBAgents",
    "Gateway",
    "GatewayError",
    "GatewaySettings",
    "InMemoryAgents",
    "LiveAgent",
    "PostgresAgents",
    "SeedFileError",
    "SyncReport",
    "choose_agent",
    "load_seed_file",
    "parse_seeds",
    "session_key",
]

"""Durable agent sessions: the persistence protocol (records + sorted values) and its implementations.

``hosting.sessions`` implements the same protocol for DuckDB and PostgreSQL: one storage design.
"""

from ._memory import InMemoryPersistence
from ._persistence import PersistenceContext, SessionPersistence, SessionRecord

__all__ = ["InMemoryPersistence", "PersistenceContext", "SessionPersistence", "SessionRecord"]

"""Session stores: in memory, DuckDB (the embedded default) and PostgreSQL — one record design.

The host's stores (:class:`SessionStore`: envelopes in, envelopes out) are built on the
persistence protocol of ``agent.durable`` (:class:`DuckDBPersistence`, :class:`PostgresPersistence`
implement it), so a turn appends only what it added.

Each name is imported from its module when first used (tracer._lazy), so ``footprint serve --help``
loads neither DuckDB, psycopg nor the agent loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracer._lazy import lazy_exports

if TYPE_CHECKING:
    from ._base import SessionStore
    from ._duckdb import DuckDBSessions
    from ._duckdb_persistence import DuckDBPersistence
    from ._envelope import Envelope, SessionSummary
    from ._memory import InMemorySessions, MemoryTables
    from ._postgres import PostgresSessions
    from ._postgres_persistence import PostgresPersistence
    from ._records import DEFAULT_CACHE_BYTES, RecordSessions
    from ._stored import StoredPersistence

#: each public name and the module that defines it, imported when the name is first used
_EXPORTS: dict[str, str] = {
    "DEFAULT_CACHE_BYTES": "._records",
    "DuckDBPersistence": "._duckdb_persistence",
    "DuckDBSessions": "._duckdb",
    "Envelope": "._envelope",
    "InMemorySessions": "._memory",
    "MemoryTables": "._memory",
    "PostgresPersistence": "._postgres_persistence",
    "PostgresSessions": "._postgres",
    "RecordSessions": "._records",
    "SessionStore": "._base",
    "SessionSummary": "._envelope",
    "StoredPersistence": "._stored",
}

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "DuckDBPersistence",
    "DuckDBSessions",
    "Envelope",
    "InMemorySessions",
    "MemoryTables",
    "PostgresPersistence",
    "PostgresSessions",
    "RecordSessions",
    "SessionStore",
    "SessionSummary",
    "StoredPersistence",
]

if not TYPE_CHECKING:  # (mypy reads the imports above; a module __getattr__ would let any name through)
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

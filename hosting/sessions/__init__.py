"""Session stores: in memory, DuckDB (the embedded default) and PostgreSQL — one record design.

The host's stores (:class:`SessionStore`: envelopes in, envelopes out) are built on the
persistence protocol of ``agent.durable`` (:class:`DuckDBPersistence`, :class:`PostgresPersistence`
implement it), so a turn appends only what it added.
"""

from ._base import SessionStore
from ._duckdb import DuckDBSessions
from ._duckdb_persistence import DuckDBPersistence
from ._envelope import Envelope, SessionSummary
from ._memory import InMemorySessions, MemoryTables
from ._postgres import PostgresSessions
from ._postgres_persistence import PostgresPersistence
from ._records import DEFAULT_CACHE_BYTES, RecordSessions
from ._stored import StoredPersistence

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

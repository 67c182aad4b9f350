"""Session stores behind one interface: in memory, DuckDB (the embedded default) and PostgreSQL."""

from ._base import SessionStore
from ._duckdb import DuckDBSessions
from ._envelope import Envelope, SessionSummary
from ._memory import InMemorySessions
from ._postgres import PostgresSessions

__all__ = ["DuckDBSessions", "Envelope", "InMemorySessions", "PostgresSessions", "SessionStore", "SessionSummary"]

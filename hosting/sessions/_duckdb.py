"""The DuckDB session store: the embedded default, in the same file as the recordings.

The host's sessions as records (:mod:`hosting.sessions._records`) in DuckDB
(:mod:`hosting.sessions._duckdb_persistence`): a turn appends its new messages and rewrites one
small value, group-committed with the other sessions' saves, and returns once committed.
"""

from __future__ import annotations

from tracer import RedactionPolicy, Store

from ._duckdb_persistence import DuckDBPersistence
from ._records import DEFAULT_CACHE_BYTES, RecordSessions, legacy_writes


class DuckDBSessions(RecordSessions):
    """Sessions in DuckDB: in the recordings file (``store=``) or a file of their own (``path=``).

    ``prefix`` names the tables (``<prefix>_head``, ``_record``, ``_value``); a table named
    ``prefix`` itself, written by the envelope store of earlier versions, is migrated on open.
    ``cache_bytes`` bounds the cache of the envelopes this process saved (0 turns it off).
    """

    name = "duckdb"

    def __init__(
        self, store: Store | None = None, *, path: str | None = None, prefix: str = "fp_session",
        cache_bytes: int = DEFAULT_CACHE_BYTES, policy: RedactionPolicy | None = None,
    ) -> None:
        super().__init__(DuckDBPersistence(store, path=path, prefix=prefix, policy=policy, migrate=legacy_writes),
                         cache_bytes=cache_bytes)

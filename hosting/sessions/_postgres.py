"""The PostgreSQL session store: for several hosts behind a load balancer.

The host's sessions as records (:mod:`hosting.sessions._records`) in PostgreSQL
(:mod:`hosting.sessions._postgres_persistence`). Each save is guarded by the session's version,
checked on the locked head row, so two hosts that loaded the same version can never both write:
the second gets :class:`VersionConflictError` and nothing is overwritten.
"""

from __future__ import annotations

from tracer import RedactionPolicy

from ._postgres_persistence import PostgresPersistence
from ._records import DEFAULT_CACHE_BYTES, RecordSessions, legacy_writes


class PostgresSessions(RecordSessions):
    """Sessions in PostgreSQL tables (``schema.<prefix>_head`` ...), shared by every host that points at them.

    A table named ``prefix`` itself, written by the envelope store of earlier versions, is
    migrated on first use. ``cache_bytes`` bounds the cache of the envelopes this process loaded
    or saved (0 turns it off): a cached session's next turn reads only the records other hosts
    appended since.
    """

    name = "postgresql"

    def __init__(
        self, dsn: str, *, schema: str = "public", prefix: str = "fp_session", max_connections: int = 4,
        policy: RedactionPolicy | None = None, cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        super().__init__(PostgresPersistence(dsn, schema=schema, prefix=prefix, max_connections=max_connections,
                                             policy=policy, migrate=legacy_writes), cache_bytes=cache_bytes)

    @property
    def dsn(self) -> str:
        """The connection string (with its password: never print it; ``location`` masks it)."""
        assert isinstance(self.persistence, PostgresPersistence)
        return self.persistence.dsn

    def check_reachable(self, timeout: float = 5.0) -> None:
        """Raise :class:`SessionStoreError` when the server cannot be reached (see ``footprint serve``)."""
        assert isinstance(self.persistence, PostgresPersistence)
        self.persistence.check_reachable(timeout)

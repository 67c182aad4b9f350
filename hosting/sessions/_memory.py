"""The in-memory session store: for tests, demos and a host that may forget on restart.

It is the same record store as DuckDB and PostgreSQL (:class:`MemoryTables` plays the database:
three dicts written by the shared batch plan), so what the host keeps and how it reads it back
is tested once for all three.
"""

from __future__ import annotations

from tracer import RedactionPolicy

from ..errors import VersionConflictError
from ._records import RecordSessions
from ._stored import SessionHead, StoredPersistence, StoredSession, WriteSet, plan_batch


class MemoryTables(StoredPersistence):
    """Session heads, records and values in dicts, kept as JSON text like every other store."""

    def __init__(self, *, policy: RedactionPolicy | None = None) -> None:
        super().__init__(policy=policy)
        self.location = "memory"
        self._heads: dict[str, SessionHead] = {}
        self._records: dict[str, list[tuple[int, str, str]]] = {}
        self._values: dict[str, dict[str, str]] = {}

    async def _write(self, batch: list[WriteSet]) -> dict[int, VersionConflictError]:
        plan = plan_batch(batch, {ws.session_id: self._heads[ws.session_id]
                                  for ws in batch if ws.session_id in self._heads})
        for sid in plan.drop:
            self._heads.pop(sid, None)
            self._records.pop(sid, None)
            self._values.pop(sid, None)
        for sid, below in plan.clear_below.items():
            self._records[sid] = [r for r in self._records.get(sid, []) if r[0] >= below]
        for sid, seq, kind, body in plan.records:
            self._records.setdefault(sid, []).append((seq, kind, body))
        for sid, key in plan.value_deletes:
            self._values.get(sid, {}).pop(key, None)
        for sid, key, value in plan.value_upserts:
            self._values.setdefault(sid, {})[key] = value
        for head in plan.heads:
            self._heads[head.session_id] = head
        return plan.conflicts

    async def read(
        self, session_id: str, *, records: bool = True, prefix: str | None = "", after_seq: int = 0
    ) -> StoredSession:
        """The session's head, records above ``after_seq`` and values under ``prefix``."""
        head = self._heads.get(session_id)
        if head is None:
            return StoredSession(None, [], [])
        found = [r for r in self._records.get(session_id, []) if r[0] > after_seq] if records else []
        values = [] if prefix is None else [
            (k, v) for k, v in self._values.get(session_id, {}).items() if k.startswith(prefix)
        ]
        return StoredSession(head, found, values)

    async def heads(self, *, limit: int, offset: int) -> list[SessionHead]:
        """Sessions the host saved, most recently updated first."""
        heads = sorted((h for h in self._heads.values() if h.version > 0),
                       key=lambda h: (h.updated_at, h.session_id), reverse=True)
        return heads[offset:offset + limit]

    async def stored_bytes(self) -> int:
        """The bytes of record bodies and values kept."""
        return sum(len(b.encode()) for rs in self._records.values() for _, _, b in rs) + sum(
            len(v.encode()) for vs in self._values.values() for v in vs.values())

    async def write_raw_value(self, session_id: str, key: str, text: str) -> None:
        """Store ``text`` as a value as is, unchecked (tests use it to plant unreadable data)."""
        self._values.setdefault(session_id, {})[key] = text
        self._heads.setdefault(session_id, SessionHead(session_id, 1, 1))


class InMemorySessions(RecordSessions):
    """The host's sessions in this process only (lost when it exits)."""

    name = "memory"

    def __init__(self, *, policy: RedactionPolicy | None = None) -> None:
        super().__init__(MemoryTables(policy=policy))

    def snapshot(self) -> InMemorySessions:
        """A new store holding what this one has committed now (what a file would hold after a crash)."""
        tables = self.persistence
        assert isinstance(tables, MemoryTables)
        copied = InMemorySessions(policy=tables.policy)
        target = copied.persistence
        assert isinstance(target, MemoryTables)
        target._heads = dict(tables._heads)
        target._records = {k: list(v) for k, v in tables._records.items()}
        target._values = {k: dict(v) for k, v in tables._values.items()}
        return copied

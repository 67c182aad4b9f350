"""The in-memory session store: for tests, demos and a host that may forget on restart."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import VersionConflictError
from ._base import SessionStore, next_version
from ._envelope import Envelope, SessionSummary


@dataclass
class _Row:
    text: str
    version: int
    created_at: float
    updated_at: float
    status: str | None


class InMemorySessions(SessionStore):
    """Sessions in a dict, kept as encoded JSON text like every other store (no shared objects)."""

    name = "memory"

    def __init__(self) -> None:
        self._rows: dict[str, _Row] = {}

    async def load(self, session_id: str) -> Envelope | None:
        """The session's envelope, or None."""
        row = self._rows.get(session_id)
        if row is None:
            return None
        return Envelope.decode(session_id, row.text, version=row.version, updated_at=row.updated_at)

    async def save(self, envelope: Envelope, *, durable: bool = True) -> Envelope:
        """Store the envelope when its version is current (no await inside: atomic on the loop)."""
        row = self._rows.get(envelope.session_id)
        found = 0 if row is None else row.version
        if found != envelope.version:
            raise VersionConflictError(envelope.session_id, envelope.version, None if row is None else found)
        saved = next_version(envelope)
        self._rows[envelope.session_id] = _Row(
            saved.encode(), saved.version, saved.created_at, saved.updated_at, saved.status
        )
        return saved

    async def delete(self, session_id: str) -> bool:
        """Remove a session."""
        return self._rows.pop(session_id, None) is not None

    async def list(self, *, limit: int = 1000, offset: int = 0) -> list[SessionSummary]:
        """Sessions, most recently updated first."""
        rows = sorted(self._rows.items(), key=lambda kv: (kv[1].updated_at, kv[0]), reverse=True)
        return [
            SessionSummary(sid, r.version, r.created_at, r.updated_at, r.status)
            for sid, r in rows[offset:offset + limit]
        ]

    async def write_raw(self, session_id: str, text: str) -> None:
        """Overwrite a session's stored text as is (tests use it to store a corrupt envelope)."""
        row = self._rows.get(session_id)
        if row is None:
            self._rows[session_id] = _Row(text, 1, 0.0, 0.0, None)
        else:
            row.text = text

"""The one interface every session store implements.

A store keeps one :class:`Envelope` per session id. Saving is optimistic: an envelope is written
only when the stored version still equals the version it was loaded at, so two hosts (or two
requests) can never silently overwrite each other — the loser gets :class:`VersionConflictError`.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import Any

from tracer import ContextItem, RedactionPolicy

from ..errors import SessionStoreError
from ._envelope import Envelope, SessionSummary


class SessionStore(ABC):
    """Where a standing agent keeps its sessions.

    ``shared`` is True for a store that several hosts write at the same time (PostgreSQL): a turn
    marked running there may belong to a live host elsewhere, so only an expired lease makes it a
    crash leftover. An unshared store (memory, DuckDB) has exactly one writer process.
    """

    shared: bool = False
    name: str = "sessions"
    #: the credential masking applied to what is kept (and to the replies built from it)
    policy: RedactionPolicy = RedactionPolicy()

    @abstractmethod
    async def load(self, session_id: str) -> Envelope | None:
        """The session's envelope; None when nothing is stored.

        Raises :class:`UnreadableEnvelopeError` (naming the session) when something is stored but
        cannot be read — never None for that.
        """

    @abstractmethod
    async def save(self, envelope: Envelope, *, durable: bool = True) -> Envelope:
        """Store ``envelope`` if the stored version still equals ``envelope.version`` (0: absent).

        Returns the stored envelope (version + 1, ``updated_at`` now) once it is committed;
        raises :class:`VersionConflictError` and writes nothing otherwise. ``durable`` is kept
        for compatibility: every save is committed before it returns, so a reply is never sent
        for a turn that is not stored.
        """

    async def older_messages(self, session_id: str, count: int) -> tuple[ContextItem, ...]:
        """The session's first ``count`` messages (a store whose envelopes let go of them reads them
        back; one that always holds them never hands out such an envelope)."""
        raise SessionStoreError(f"the session store {self.name} cannot read back session "
                                f"{session_id!r}'s first {count} messages")

    @abstractmethod
    async def finished_turn(self, session_id: str, turn_id: str, text: str) -> tuple[dict[str, Any], bool] | None:
        """The stored reply of the session's finished turn sent with ``turn_id`` (any earlier turn,
        not only the last), and whether ``text`` is the message (or decision) it was sent with;
        None when no finished turn has that id."""

    @abstractmethod
    async def delete(self, session_id: str) -> bool:
        """Remove a session; True when it existed."""

    @abstractmethod
    async def list(self, *, limit: int = 1000, offset: int = 0) -> list[SessionSummary]:
        """Sessions, most recently updated first."""

    @property
    def healthy(self) -> bool:
        """False once the store failed in a way only :meth:`reopen` can mend."""
        return True

    async def reopen(self) -> None:
        """Open the store's database again after a fatal error (:class:`SessionStoreError` when it cannot)."""
        raise SessionStoreError(f"the {self.name} session store cannot be reopened")

    async def flush(self) -> None:  # noqa: B027 - only stores that write in the background need it
        """Return once every save made so far is committed."""

    async def close(self) -> None:  # noqa: B027 - optional for stores that hold nothing
        """Release connections (the store is unusable afterwards)."""


def next_version(envelope: Envelope) -> Envelope:
    """The envelope as it is stored by a successful save: one version on, updated now."""
    now = time.time()
    return envelope.replace(version=envelope.version + 1, updated_at=max(now, envelope.updated_at))

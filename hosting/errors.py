"""Errors raised by the standing-agent host.

    FootprintError (tracer.errors)
    └── HostingError
        ├── SessionStoreError            a session store cannot be reached, read or written
        │   ├── UnreadableEnvelopeError  a session's stored data exists but cannot be read
        │   └── VersionConflictError     another writer saved the session first (optimistic versioning)
        ├── TurnRefusedError             the host will not run this turn (``code`` and ``http_status`` say why)
        │   ├── SessionBusyError         a second turn of a session while one runs (``refuse``)
        │   ├── NotAwaitingError         a decision for a session that is not paused on a question
        │   │   └── SessionNotFoundError a session that is not stored at all (404)
        │   ├── AwaitingDecisionError    a message for a session that is paused on a question
        │   ├── TurnIdReusedError        a ``turn_id`` already used for a different message
        │   ├── HostShuttingDownError    the host is draining after SIGTERM
        │   └── HostFailedError          a store failed and could not be reopened: the host exits to be restarted
        └── HostClientError              the host's API answered with an error or could not be reached
            └── HostAuthError            the host wants a (different) bearer token
"""

from __future__ import annotations

from tracer.errors import FootprintError


class HostingError(FootprintError):
    """An error of the standing-agent host."""


class SessionStoreError(HostingError):
    """A session store cannot be reached, read or written."""


class UnreadableEnvelopeError(SessionStoreError):
    """A session's stored envelope exists but cannot be read; it is never answered with a fresh start."""

    def __init__(self, session_id: str, reason: str) -> None:
        super().__init__(
            f"session {session_id!r}: its stored conversation cannot be read ({reason}); "
            f"it was not replaced with a fresh one — repair or delete it first"
        )
        self.session_id = session_id
        self.reason = reason


class VersionConflictError(SessionStoreError):
    """The session was saved by another writer since it was loaded; nothing was overwritten."""

    def __init__(self, session_id: str, expected: int, found: int | None) -> None:
        where = "it no longer exists" if found is None else f"it is now at version {found}"
        super().__init__(
            f"session {session_id!r} was changed by another writer (loaded at version {expected}, {where}); "
            f"nothing was overwritten — retry the request"
        )
        self.session_id = session_id
        self.expected = expected
        self.found = found


class TurnRefusedError(HostingError):
    """The host will not run this turn; ``code`` is a stable machine-readable reason."""

    code = "refused"
    http_status = 409

    def __init__(self, message: str, *, session_id: str | None = None) -> None:
        super().__init__(message)
        self.session_id = session_id


class SessionBusyError(TurnRefusedError):
    """A turn of this session is already running and ``on_concurrent_invoke`` is ``refuse``."""

    code = "session_busy"


class NotAwaitingError(TurnRefusedError):
    """A decision was sent for a session that is not paused on a question."""

    code = "not_awaiting"


class SessionNotFoundError(NotAwaitingError):
    """A request names a session that is not stored (a typo, or one deleted since): a decision to
    send, or a durable session to describe."""

    code = "session_not_found"
    http_status = 404

    def __init__(self, session_id: str, *, what: str = "so there is no question to decide",
                 listing: str = "GET /v1/sessions") -> None:
        super().__init__(f"no session {session_id!r} is stored, {what}; check the id ({listing} lists them)",
                         session_id=session_id)


class AwaitingDecisionError(TurnRefusedError):
    """A plain message was sent to a session that is paused on a question."""

    code = "awaiting_decision"


class TurnIdReusedError(TurnRefusedError):
    """A ``turn_id`` came again with a different message: it is not a retry, so neither the stored
    reply is sent nor the message run."""

    code = "turn_id_reused"

    def __init__(self, session_id: str, turn_id: str) -> None:
        super().__init__(f"turn_id {turn_id!r} of session {session_id!r} was already used for a different message; "
                         f"a retry must send the same message — use a new turn_id for a new message",
                         session_id=session_id)
        self.turn_id = turn_id


class HostShuttingDownError(TurnRefusedError):
    """The host received SIGTERM and takes no new turns."""

    code = "shutting_down"
    http_status = 503


class HostFailedError(TurnRefusedError):
    """A store failed and could not be reopened; the host is exiting (non-zero) so a supervisor restarts it."""

    code = "host_failed"
    http_status = 503


class HostClientError(HostingError):
    """The host's API answered with an error, or could not be reached."""

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class HostAuthError(HostClientError):
    """The host refused the bearer token (or wants one)."""

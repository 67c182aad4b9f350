"""Errors of durable agent sessions.

    FootprintError (tracer.errors)
    └── AgentError (agent.errors)
        └── DurableError                  a durable session failed
            ├── PersistenceReentryError   a persistence call was made while the same task held the lock
            ├── PersistenceError          the session's storage failed (load, queue write, commit)
            ├── SettingsError             a message carried settings the session cannot use
            ├── CompactionError           the provider could not compact; the history is untouched
            └── SessionClosedError        steer/send/compact on a closed session
"""

from __future__ import annotations

from agent.errors import AgentError


class DurableError(AgentError):
    """An error of a durable session; the message names the session."""


class PersistenceReentryError(DurableError):
    """A persistence operation started while the same task was inside one (a bug, never retried)."""


class PersistenceError(DurableError):
    """The session's storage failed; nothing half-written is kept (the transaction rolled back)."""


class SettingsError(DurableError):
    """A message's inference settings are malformed (unknown effort, empty model name, ...)."""


class CompactionError(DurableError):
    """The provider failed to compact the conversation; the history was left as it was."""


class SessionClosedError(DurableError):
    """The session was closed; create a new DurableAgent for it to go on."""

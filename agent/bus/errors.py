"""Errors of the bus agent types.

    FootprintError (tracer.errors)
    └── AgentError (agent.errors)
        ├── UserError
        │   └── BindingError                 an AgentBinding or SourceBinding is malformed
        └── BusError                         a bus agent could not handle an event
            ├── BadEventError                an event lacks what the agent needs (e.g. a chat sequence number)
            ├── ConversationUnreadableError  a stored conversation could not be read; never answered fresh
            └── RunFailedError               an agent's recorded run ended failed or cancelled

A handler's error never reaches the bus's caller: the agent reports it as a :class:`~agent.bus.BusFailure`
(through the bus's ``on_error`` callback and its ``failures`` list).
"""

from __future__ import annotations

from ..errors import AgentError, UserError


class BindingError(UserError):
    """A binding names no source, or gives more or less than one of endpoint, prefix and task."""


class BusError(AgentError):
    """A bus agent could not handle an event."""


class BadEventError(BusError):
    """An event lacks something the agent needs; the message names the event and the field."""


class ConversationUnreadableError(BusError):
    """A stored conversation could not be read; the agent refuses to answer it as a fresh one."""

    def __init__(self, message: str, *, conversation_id: str) -> None:
        super().__init__(message)
        self.conversation_id = conversation_id


class RunFailedError(BusError):
    """An agent's run for an event did not answer (status failed or cancelled)."""

    def __init__(self, message: str, *, run_id: str, status: str) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.status = status

"""What travels on the bus.

Inbound, from the host's sources to the agents: a :class:`MessageEvent` (someone wrote something
somewhere), a :class:`HeartbeatEvent` (a clock tick) and a :class:`TaskEvent` (work assigned to
whoever claims it). Outbound, from the agents to the host's transports: :class:`SendText` (a message
to deliver) and :class:`SendTrace` (a progress or audit line for transports that keep a trail next
to the conversation).

Every transport, endpoint and channel name is an opaque string here: the bus knows nothing about
WhatsApp or a chat canister. The host turns outbound events into real sends.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class MessageEvent:
    """A message that arrived on a source.

    ``source`` names the transport it came through, ``endpoint`` the conversation there (a phone
    number, a chat id — the "from" an answer goes back to), ``sender_id`` its author and
    ``message_id`` the transport's id for it (a chat's sequence number, for a chat transport).
    ``timestamp`` is when it was written, in seconds since the epoch: an agent compares it with its
    clock to tell a fresh message from a stale one.
    """

    source: str
    endpoint: str
    sender_id: str
    message_id: str
    text: str
    timestamp: float
    sender_name: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def author(self) -> str:
        """The sender's display name, or its id."""
        return self.sender_name or self.sender_id


@dataclass(frozen=True)
class HeartbeatEvent:
    """A clock tick: agents that hear the heartbeat do periodic work on it (summaries, reminders)."""

    timestamp: float
    tick: int = 0


@dataclass(frozen=True)
class TaskEvent:
    """Work assigned through a source: ``task`` is its name (what a binding listens for).

    ``text`` is the instruction, ``payload`` any structured arguments, and ``reply_to`` where an
    answer goes on the agent's reply channel (``None``: to the task's name).
    """

    source: str
    task: str
    task_id: str
    text: str
    timestamp: float
    payload: Mapping[str, Any] = field(default_factory=dict)
    reply_to: str | None = None


@dataclass(frozen=True)
class SendText:
    """Deliver ``text`` to ``to`` over ``channel``; ``agent`` names who answers (no name prefix is added)."""

    channel: str
    to: str
    text: str
    agent: str
    in_reply_to: str | None = None


@dataclass(frozen=True)
class SendTrace:
    """A trace line for transports that keep an audit trail next to the conversation.

    ``kind`` is ``progress`` (a tool's own progress line, sent before the tool runs) or ``tool``
    (one line per finished tool call); ``tool`` names the tool. Traces are for people: an agent
    never puts them back into a model's context.
    """

    channel: str
    to: str
    text: str
    agent: str
    kind: str = "progress"
    tool: str | None = None
    in_reply_to: str | None = None


InboundEvent = MessageEvent | HeartbeatEvent | TaskEvent
OutboundEvent = SendText | SendTrace

"""Events a durable session reports besides the loop's own (text deltas, tool starts and ends, ...)."""

from __future__ import annotations

from dataclasses import dataclass

from agent import AgentEvent


@dataclass(frozen=True)
class MessageQueued:
    """A message was written to the steering or send queue (it is durable now)."""

    queue: str
    key: str
    text: str


@dataclass(frozen=True)
class MessagesConsumed:
    """Queued messages joined the conversation in run ``run_id`` (their keys are gone)."""

    queue: str
    keys: tuple[str, ...]
    run_id: str


@dataclass(frozen=True)
class TurnDone:
    """A turn ended. ``state``: answered, failed, cancelled, awaiting, or internal_error.

    ``internal_error`` with no ``run_id`` is a failed history load: nothing ran, every queued
    message is still waiting, and the next requested turn loads again.
    """

    state: str
    run_id: str | None
    error: str | None = None
    answer: str = ""


@dataclass(frozen=True)
class Compacted:
    """A compaction replaced ``replaced`` messages with ``kept`` (recorded as run ``run_id``)."""

    replaced: int
    kept: int
    run_id: str


@dataclass(frozen=True)
class Settled:
    """The loop stopped: nothing runs until the next message, ``start()`` or ``compact()``.

    ``waiting`` counts the queued messages left (non-zero after an abort or a storage failure).
    """

    waiting: int


SessionEvent = AgentEvent | MessageQueued | MessagesConsumed | TurnDone | Compacted | Settled

"""What a durable session keeps, and the one lock every persistence call goes through.

Records (the main context store, append-only, in context order):

    user        a consumed queued message            {"item": <context item>, "queue": "steering"|"send", "key"}
    assistant   one finished block: text or a call   {"item": <context item>}
    tool        one tool result                      {"item": <context item>}
    system      a hand-off or failed-turn message    {"item": <context item>}
    compaction  the replacement of a compacted past  {"items": [<context item>...], "replaced": [...]}

Values (the sorted key-value area):

    steering.<stamp> / send.<stamp>   a queued message   {"text", "settings", "queued_at"}
    tool.<run>.<position>             a dispatched call  {"id", "name", "arguments"}
    settings                          the effective inference settings

A context item keeps its origin (run, stage, source), so a history loaded by another process
still points ``why`` at the run that first produced each message.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tracer import ContextItem, Item, ItemKind, Origin, context_item_from_dict, context_item_to_dict

from ._persistence import PersistenceContext, SessionPersistence, SessionRecord
from ._settings import InferenceSettings
from .errors import PersistenceError, PersistenceReentryError

T = TypeVar("T")

QUEUES = ("steering", "send")
SETTINGS_KEY = "settings"
TOOL_PREFIX = "tool."
_RECORD_KIND: dict[str, str] = {
    ItemKind.USER: "user", ItemKind.ASSISTANT: "assistant", ItemKind.TOOL_CALL: "assistant",
    ItemKind.TOOL_RESULT: "tool", ItemKind.SYSTEM: "system", ItemKind.SUMMARY: "system",
}


@dataclass(frozen=True)
class QueuedMessage:
    """A message waiting in the steering or send queue (already durable under ``key``)."""

    key: str
    queue: str
    text: str
    settings: InferenceSettings
    queued_at: float

    @property
    def source(self) -> str:
        """The origin source its user item gets: the queue and when it was queued (UTC)."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(self.queued_at))
        return f"{self.queue}@{stamp}.{int(self.queued_at * 1000) % 1000:03d}Z"


@dataclass
class Loaded:
    """A session as its storage holds it."""

    history: list[ContextItem] = field(default_factory=list)
    queues: dict[str, list[QueuedMessage]] = field(default_factory=lambda: {q: [] for q in QUEUES})
    pending_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (key, call)
    settings: InferenceSettings = field(default_factory=InferenceSettings)
    records: int = 0


def record_of(ci: ContextItem, **extra: Any) -> SessionRecord:
    """The record a context item is kept as (with its content address: a load need not hash it again)."""
    return SessionRecord(_RECORD_KIND.get(ci.item.kind, "system"), {"item": item_dict(ci), **extra})


def item_dict(ci: ContextItem) -> dict[str, Any]:
    """A context item's stored form: kind, body, origin and hash."""
    return {**context_item_to_dict(ci), "hash": ci.item.hash}


def item_from(data: dict[str, Any], origins: dict[tuple[Any, ...], Origin] | None = None) -> ContextItem:
    """A context item from :func:`item_dict`'s form (or a form without the hash).

    ``origins`` shares one Origin among the items of one stage (a long history has few stages' worth).
    """
    known = data.get("hash")
    if not isinstance(known, str) or not known:
        return context_item_from_dict(data)
    o = data["origin"]
    key = (o["kind"], o.get("run_id"), o.get("stage_id"), o.get("source"))
    origin = origins.get(key) if origins is not None else None
    if origin is None:
        origin = Origin(str(key[0]), key[1], key[2], key[3])
        if origins is not None:
            origins[key] = origin
    return ContextItem(Item(str(data["kind"]), dict(data["body"]), known), origin)


class Journal:
    """The session's persistence, behind one lock that raises on re-entry from the same task.

    ``DurableAgent`` makes every storage call through :meth:`locked`; a call made while the same
    task already holds the lock is a bug (a hook or tool calling back into the session) and fails
    loudly with :class:`PersistenceReentryError` instead of deadlocking.
    """

    def __init__(self, persistence: SessionPersistence, session_id: str) -> None:
        self.persistence = persistence
        self.session_id = session_id
        self.ctx = PersistenceContext(session_id)
        self._lock = asyncio.Lock()
        self._owner: asyncio.Task[Any] | None = None
        self._last_stamp = 0

    async def locked(self, what: str, work: Callable[[], Awaitable[T]]) -> T:
        """Run ``work`` holding the lock; storage failures become :class:`PersistenceError`."""
        task = asyncio.current_task()
        if task is not None and self._owner is task:
            raise PersistenceReentryError(
                f"session {self.session_id}: {what} was called while this task was already inside a "
                f"persistence call (a hook or tool must not call back into its own session's storage)"
            )
        async with self._lock:
            self._owner = task
            try:
                return await work()
            except (PersistenceReentryError, asyncio.CancelledError):
                raise
            except Exception as exc:
                raise PersistenceError(f"session {self.session_id}: {what} failed: {type(exc).__name__}: {exc}") \
                    from exc
            finally:
                self._owner = None

    async def in_transaction(self, what: str, work: Callable[[PersistenceContext], Awaitable[T]]) -> T:
        """Run ``work`` in one transaction under the lock: all of its writes land, or none."""
        return await self.locked(what, lambda: self.persistence.transaction(self.ctx, work))

    # ------------------------------------------------------------------ reading

    async def load(self) -> Loaded:
        """Every record and value of the session (one load, on the first inference attempt)."""
        async def work() -> Loaded:
            p, ctx = self.persistence, self.ctx
            return _decode(self.session_id, await p.load(ctx), await p.read_values(ctx, ""))

        return await self.locked("loading the session", work)

    # ------------------------------------------------------------------ writing

    def new_key(self, queue: str) -> str:
        """A queue key ordered by append time (strictly increasing within this process)."""
        stamp = max(time.time_ns(), self._last_stamp + 1)
        self._last_stamp = stamp
        return f"{queue}.{stamp:020d}"

    async def enqueue(self, message: QueuedMessage) -> None:
        """Write a queued message (its key orders it in its queue)."""
        value = {"text": message.text, "settings": message.settings.to_dict(), "queued_at": message.queued_at}
        await self.locked(f"queueing a {message.queue} message",
                          lambda: self.persistence.write_value(self.ctx, message.key, value))

    async def append(self, what: str, records: Sequence[SessionRecord]) -> None:
        """Append records one by one (assistant blocks, as each finishes)."""
        for record in records:
            await self.locked(what, lambda r=record: self.persistence.append(self.ctx, r))  # type: ignore[misc]


def _decode(session_id: str, records: Sequence[SessionRecord], values: Sequence[tuple[str, Any]]) -> Loaded:
    loaded = Loaded(records=len(records))
    origins: dict[tuple[Any, ...], Origin] = {}
    # Decoding allocates a few objects per record and no cycles; the collector's passes over a
    # heap that holds a long history would otherwise cost more than the decoding itself.
    collecting = gc.isenabled()
    gc.disable()
    try:
        for record in records:
            if record.kind == "compaction":
                loaded.history = [item_from(d, origins) for d in record.body["items"]]
            else:
                loaded.history.append(item_from(record.body["item"], origins))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise PersistenceError(f"session {session_id}: a stored record is malformed: {exc}") from exc
    finally:
        if collecting:
            gc.enable()
    for key, value in values:
        queue = key.split(".", 1)[0]
        try:
            if queue in QUEUES:
                loaded.queues[queue].append(QueuedMessage(
                    key, queue, str(value["text"]), InferenceSettings.from_dict(value.get("settings")),
                    float(value["queued_at"])))
            elif key.startswith(TOOL_PREFIX):
                loaded.pending_calls.append((key, dict(value)))
            elif key == SETTINGS_KEY:
                loaded.settings = InferenceSettings.from_dict(value)
        except (KeyError, TypeError, ValueError) as exc:
            raise PersistenceError(f"session {session_id}: stored value {key!r} is malformed: {exc}") from exc
    return loaded

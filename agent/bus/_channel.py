"""ChannelAgent: the base every bus agent type extends.

It owns what every agent on the bus needs the same way: subscribing itself, matching an event to
its binding, the claim-or-share verdict, the staleness split, running handlers in order per
conversation, and error isolation. A subclass writes a couple of async handlers
(:meth:`ChannelAgent.on_message`, :meth:`~ChannelAgent.on_task`, :meth:`~ChannelAgent.on_heartbeat`)
and, when it needs one, a synchronous :meth:`~ChannelAgent.accepts` filter. A test drives it with
plain event objects: :meth:`~ChannelAgent.deliver` and :meth:`~ChannelAgent.idle`, no bus needed
(what it would send is kept in :attr:`~ChannelAgent.outbox`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Self

from ._binding import AgentBinding, SourceBinding
from ._bus import Bus, BusFailure, Verdict
from ._events import HeartbeatEvent, InboundEvent, MessageEvent, OutboundEvent, SendText, SendTrace, TaskEvent
from .errors import BindingError

log = logging.getLogger("footprint.bus")

#: Messages older than this (seconds) when delivered are stale: a message replayed after a restart
#: or an outage should not be answered as if it had just been written.
DEFAULT_STALE_AFTER = 300.0


class ChannelAgent:
    """An agent on the bus: hears what its :class:`AgentBinding` names and handles it in tasks.

    Turns for one conversation (see :meth:`conversation_key`) run one after another in delivery
    order; different conversations run concurrently. A message older than ``stale_after`` seconds
    (``None``: never) goes to :meth:`on_stale` instead of :meth:`on_message` — it is still claimed
    or shared as the binding says, so no later agent answers it late either. Tasks and heartbeats
    are never stale: a task is owed whatever its age, and a tick only says time passed.
    """

    def __init__(
        self,
        name: str,
        binding: AgentBinding,
        *,
        stale_after: float | None = DEFAULT_STALE_AFTER,
        clock: Callable[[], float] = time.time,
        keep_failures: int = 50,
    ) -> None:
        if not name:
            raise BindingError("a bus agent needs a name")
        if not isinstance(binding, AgentBinding):
            raise BindingError(f"agent {name}: binding must be an AgentBinding, got {type(binding).__name__}")
        self.name = name
        self.binding = binding
        self.stale_after = stale_after
        self.clock = clock
        self.bus: Bus | None = None
        #: What the agent sent while not started on a bus (a unit test reads it).
        self.outbox: list[OutboundEvent] = []
        #: This agent's newest failures (also reported to its bus).
        self.failures: deque[BusFailure] = deque(maxlen=keep_failures)
        self._chains: dict[str, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ the bus

    def start(self, bus: Bus) -> Self:
        """Subscribe to ``bus`` (after the agents already there) and send through its transports."""
        bus.subscribe(self)
        self.bus = bus
        return self

    def stop(self) -> None:
        """Unsubscribe; handlers in flight finish (await :meth:`idle` to wait for them)."""
        if self.bus is not None:
            self.bus.unsubscribe(self)
            self.bus = None

    def deliver(self, event: InboundEvent) -> Verdict:
        """Decide about ``event`` now, schedule its handler, and say whether it is claimed or shared."""
        if isinstance(event, HeartbeatEvent):
            if not self.binding.heartbeat or not self.accepts(event):
                return Verdict.IGNORE
            self._schedule("heartbeat", event, lambda: self.on_heartbeat(event))
            return Verdict.SHARE  # a tick belongs to everyone who hears it
        route = self.binding.route(event)
        if route is None or not self.accepts(event):
            return Verdict.IGNORE
        key = self.conversation_key(event)
        if isinstance(event, MessageEvent):
            message = event
            if self.is_stale(message):
                self._schedule(key, event, lambda: self.on_stale(message, route))
            else:
                self._schedule(key, event, lambda: self.on_message(message, route))
        else:
            task = event
            self._schedule(key, event, lambda: self.on_task(task, route))
        return Verdict.CLAIM if route.claim else Verdict.SHARE

    # ------------------------------------------------------------------ what subclasses write

    def accepts(self, event: InboundEvent) -> bool:
        """A synchronous filter after the binding matched (default: everything). Keep it cheap."""
        return True

    async def on_message(self, message: MessageEvent, route: SourceBinding) -> None:
        """Handle a fresh message that arrived where ``route`` listens (default: nothing)."""

    async def on_task(self, task: TaskEvent, route: SourceBinding) -> None:
        """Handle an assigned task (default: nothing)."""

    async def on_heartbeat(self, tick: HeartbeatEvent) -> None:
        """Handle a heartbeat tick (default: nothing)."""

    async def on_stale(self, message: MessageEvent, route: SourceBinding) -> None:
        """Handle a stale message (default: log it and drop it)."""
        log.info("%s: dropped a stale message %s from %s:%s (%.0f s old)", self.name, message.message_id,
                 message.source, message.endpoint, self.clock() - message.timestamp)

    def conversation_key(self, event: MessageEvent | TaskEvent) -> str:
        """Which conversation an event belongs to: its turns run in order (default: source and endpoint)."""
        if isinstance(event, TaskEvent):
            return f"task:{event.source}:{event.task}:{event.task_id}"
        return f"{event.source}:{event.endpoint}"

    def is_stale(self, message: MessageEvent) -> bool:
        """True when ``message`` is older than ``stale_after`` seconds by this agent's clock."""
        return self.stale_after is not None and self.clock() - message.timestamp > self.stale_after

    # ------------------------------------------------------------------ answering

    async def send(self, event: OutboundEvent) -> None:
        """Send through the bus's transports (kept in :attr:`outbox` when not on a bus)."""
        if self.bus is None:
            self.outbox.append(event)
        else:
            await self.bus.send(event)

    async def reply(self, event: MessageEvent | TaskEvent, route: SourceBinding, text: str) -> bool:
        """Answer ``event`` on the route's reply channel; False (and nothing sent) when silent there or empty."""
        if route.reply_channel is None or not text:
            return False
        if isinstance(event, TaskEvent):
            to, ref = event.reply_to or event.task, event.task_id
        else:
            to, ref = event.endpoint, event.message_id
        await self.send(SendText(route.reply_channel, to, text, self.name, in_reply_to=ref))
        return True

    async def trace(
        self, message: MessageEvent, route: SourceBinding, text: str, *, kind: str = "progress",
        tool: str | None = None,
    ) -> bool:
        """Send a trace line next to the conversation; False when silent there."""
        if route.reply_channel is None or not text:
            return False
        await self.send(SendTrace(route.reply_channel, message.endpoint, text, self.name, kind=kind, tool=tool,
                                  in_reply_to=message.message_id))
        return True

    def report(self, failure: BusFailure) -> None:
        """Keep a failure and pass it to the bus (logged when not on a bus)."""
        self.failures.append(failure)
        if self.bus is not None:
            self.bus.report(failure)
        else:
            log.warning("%s", failure.describe(), exc_info=failure.error)

    # ------------------------------------------------------------------ running handlers

    @property
    def busy(self) -> bool:
        """True while a handler is scheduled or running."""
        return bool(self._tasks)

    async def idle(self) -> None:
        """Wait until every scheduled handler has finished (including ones scheduled meanwhile)."""
        while self._tasks:
            await asyncio.wait(list(self._tasks))

    def _schedule(self, key: str, event: InboundEvent, handler: Callable[[], Awaitable[None]]) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise BindingError(f"agent {self.name}: events must be delivered inside a running event loop") from None
        previous = self._chains.get(key)
        task = loop.create_task(self._run(previous, event, handler), name=f"{self.name}:{key}")
        self._chains[key] = task
        self._tasks.add(task)
        task.add_done_callback(lambda done: self._finished(key, done))

    async def _run(
        self, previous: asyncio.Task[None] | None, event: InboundEvent, handler: Callable[[], Awaitable[None]]
    ) -> None:
        if previous is not None and not previous.done():
            await asyncio.wait([previous])  # the conversation's earlier turn first; its failure is not ours
        try:
            await handler()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # isolation: a failing handler is reported, never raised into the bus
            self.report(BusFailure(self.name, "handler", exc, event))

    def _finished(self, key: str, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if self._chains.get(key) is task:
            del self._chains[key]

"""The bus: one inbound stream, agents that subscribe themselves, and the host's transports.

    sources ──┐
              ├──► publish(event) ──► each subscriber in subscription order:
    heartbeat ┘                          ignore | share (handle, pass on) | claim (handle, stop)
                                                   │
                                  agents ──► send(outbound) ──► every transport, in order

There is no router: delivery is synchronous and ordered, and the first subscriber that claims an
event takes it, so priority is the order the host starts its agents in. A subscriber decides on
the spot (a synchronous call) and does its async work in its own tasks, so a slow agent never
holds up delivery. Nothing one agent or transport does wrong stops delivery to the others or
crashes the bus: the failure is logged, kept in :attr:`Bus.failures` and passed to ``on_error``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, runtime_checkable

from ._events import HeartbeatEvent, InboundEvent, OutboundEvent
from .errors import BindingError

log = logging.getLogger("footprint.bus")


class Verdict(StrEnum):
    """A subscriber's answer to an event: leave it, handle it and pass it on, or take it."""

    IGNORE = "ignore"
    SHARE = "share"
    CLAIM = "claim"


@runtime_checkable
class BusSubscriber(Protocol):
    """What the bus delivers to: a named object that decides about each event synchronously."""

    name: str

    def deliver(self, event: InboundEvent) -> Verdict:
        """Decide about ``event`` (and schedule any async handling); never block."""
        ...


@dataclass(frozen=True)
class BusFailure:
    """Something went wrong without stopping the bus: who, on what, where, and the error.

    ``where`` is ``deliver`` (a subscriber's synchronous decision raised), ``handler`` (an agent's
    async handler raised), ``run`` (an agent's run did not answer), ``transport`` (a transport
    refused an outbound event) or ``source`` (an inbound source broke off).
    """

    agent: str
    where: str
    error: BaseException
    event: InboundEvent | OutboundEvent | None = None
    at: float = field(default_factory=time.time)

    def describe(self) -> str:
        """One line: ``agent where: ErrorType: message``."""
        return f"{self.agent} {self.where}: {type(self.error).__name__}: {self.error}"


@dataclass(frozen=True)
class DeliveryReport:
    """What became of one published event: who claimed it, who shared it, whose decision failed."""

    event: InboundEvent
    claimed_by: str | None = None
    shared_with: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()

    @property
    def handled(self) -> bool:
        """True when some agent claimed or shared the event."""
        return self.claimed_by is not None or bool(self.shared_with)


#: A transport: called with each outbound event (sync or async).
Transport = Callable[[OutboundEvent], Awaitable[None] | None]
ErrorCallback = Callable[[BusFailure], None]


class Bus:
    """Delivers inbound events to subscribers in subscription order and outbound events to transports.

    ``on_error`` is told about every :class:`BusFailure`; the newest ``keep_failures`` are kept
    in :attr:`failures`. Call :meth:`publish` from inside the event loop (agents schedule tasks).
    """

    def __init__(
        self,
        *,
        on_error: ErrorCallback | None = None,
        keep_failures: int = 100,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.on_error = on_error
        self.clock = clock
        self.failures: deque[BusFailure] = deque(maxlen=keep_failures)
        self._subscribers: list[BusSubscriber] = []
        self._transports: list[Transport] = []
        self._sources: dict[str, asyncio.Task[None]] = {}

    # ------------------------------------------------------------------ inbound

    @property
    def subscribers(self) -> tuple[str, ...]:
        """The subscribers' names, in delivery (priority) order."""
        return tuple(s.name for s in self._subscribers)

    def subscribe(self, subscriber: BusSubscriber) -> None:
        """Add a subscriber after those already there; names must be unique on one bus."""
        if any(s.name == subscriber.name for s in self._subscribers):
            raise BindingError(f"an agent named {subscriber.name!r} is already subscribed to this bus")
        self._subscribers.append(subscriber)

    def unsubscribe(self, subscriber: BusSubscriber) -> bool:
        """Remove a subscriber; True when it was subscribed."""
        if subscriber in self._subscribers:
            self._subscribers.remove(subscriber)
            return True
        return False

    def publish(self, event: InboundEvent) -> DeliveryReport:
        """Deliver ``event`` to each subscriber in order until one claims it."""
        shared: list[str] = []
        failed: list[str] = []
        for subscriber in list(self._subscribers):
            try:
                verdict = Verdict(subscriber.deliver(event))
            except Exception as exc:  # one agent's broken filter must not starve the others
                failed.append(subscriber.name)
                self.report(BusFailure(subscriber.name, "deliver", exc, event))
                continue
            if verdict is Verdict.CLAIM:
                return DeliveryReport(event, subscriber.name, tuple(shared), tuple(failed))
            if verdict is Verdict.SHARE:
                shared.append(subscriber.name)
        if not shared and not isinstance(event, HeartbeatEvent):
            log.debug("no agent took %r", event)
        return DeliveryReport(event, None, tuple(shared), tuple(failed))

    def listen(self, source: AsyncIterable[InboundEvent], *, name: str) -> asyncio.Task[None]:
        """Publish every event ``source`` yields, in a task (sources are merged by running several)."""
        if name in self._sources and not self._sources[name].done():
            raise BindingError(f"the bus already listens to a source named {name!r}")

        async def pump() -> None:
            try:
                async for event in source:
                    self.publish(event)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a broken source ends; the bus and the other sources go on
                self.report(BusFailure(f"source:{name}", "source", exc))

        task = asyncio.get_running_loop().create_task(pump(), name=f"bus-source-{name}")
        self._sources[name] = task
        return task

    async def drain(self) -> None:
        """Wait until every subscriber that can say so (``busy`` / ``idle()``) has finished its work."""
        while True:
            waiting = [s for s in self._subscribers if getattr(s, "busy", False)]
            if not waiting:
                return
            for subscriber in waiting:
                await subscriber.idle()  # type: ignore[attr-defined]

    async def close(self) -> None:
        """Stop listening to every source and wait for the subscribers' work in flight."""
        tasks = list(self._sources.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._sources.clear()
        await self.drain()

    # ------------------------------------------------------------------ outbound

    def add_transport(self, transport: Transport) -> None:
        """Receive every outbound event (in the order transports were added)."""
        self._transports.append(transport)

    def remove_transport(self, transport: Transport) -> bool:
        """Stop sending to ``transport``; True when it was added."""
        if transport in self._transports:
            self._transports.remove(transport)
            return True
        return False

    async def send(self, event: OutboundEvent) -> None:
        """Hand ``event`` to every transport; a failing transport is reported, the others still get it."""
        if not self._transports:
            log.debug("no transport for %r", event)
        for transport in list(self._transports):
            try:
                value = transport(event)
                if inspect.isawaitable(value):
                    await value
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.report(BusFailure(event.agent, "transport", exc, event))

    # ------------------------------------------------------------------ failures

    def report(self, failure: BusFailure) -> None:
        """Log and keep a failure, and tell ``on_error`` (whose own failure is only logged)."""
        log.warning("bus: %s", failure.describe(), exc_info=failure.error)
        self.failures.append(failure)
        if self.on_error is not None:
            try:
                self.on_error(failure)
            except Exception:
                log.exception("bus: the on_error callback failed")


async def heartbeats(
    interval: float, *, clock: Callable[[], float] = time.time, count: int | None = None
) -> AsyncIterator[HeartbeatEvent]:
    """A heartbeat source for :meth:`Bus.listen`: a tick every ``interval`` seconds (``count`` ticks, or forever)."""
    tick = 0
    while count is None or tick < count:
        await asyncio.sleep(interval)
        tick += 1
        yield HeartbeatEvent(clock(), tick)

"""The agent pool: one agent instance per active session, least recently used evicted.

An agent instance holds per-run state on itself, so runs on one instance are serialized (each
:class:`Slot` has a lock). The pool bounds how many IDLE instances are retained: a slot that is
running or has a request waiting is never evicted, so the bound may be exceeded while more
sessions than ``max_active`` run at once, and it is restored as they finish. The idle instance
evicted is the one idle the longest (least recently used). An evicted instance's tools are closed
with reason ``evicted``; the conversation was never in the instance (it is in the session store),
so the session's next request re-hydrates onto a fresh one. Idle instances are kept in an order
of their own, so finding the one to evict never walks the instances that are running.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from agent import Agent

log = logging.getLogger("footprint.host")

AgentFactory = Callable[[], Agent]


@dataclass(eq=False)
class Slot:
    """One agent instance and the lock that serializes its runs."""

    key: str | None  # the session id; None for the shared or fallback instance
    agent: Agent
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0  # requests holding or waiting for this slot
    last_used: float = field(default_factory=time.time)

    @property
    def idle(self) -> bool:
        """True when no request holds or waits for this instance."""
        return self.users == 0


class AgentPool:
    """Instances built by ``factory`` on first sight of a session, at most ``max_active`` idle ones kept."""

    def __init__(
        self,
        factory: AgentFactory,
        max_active: int,
        *,
        wire: Callable[[Agent], None],
        unwire: Callable[[Agent], None],
    ) -> None:
        self._factory = factory
        self.max_active = max_active
        self._wire = wire
        self._unwire = unwire
        self._slots: OrderedDict[str, Slot] = OrderedDict()
        self._idle: OrderedDict[str, Slot] = OrderedDict()  # idle slots, the longest idle first
        self._closing: set[asyncio.Task[None]] = set()
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._slots)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._slots

    def build(self, key: str | None) -> Slot:
        """A new wired instance from the factory (not retained by the pool)."""
        agent = self._factory()
        if not isinstance(agent, Agent):
            raise TypeError(f"agent_factory returned {type(agent).__name__}, not an agent.Agent")
        self._wire(agent)
        return Slot(key, agent)

    def acquire(self, session_id: str) -> Slot:
        """The session's slot (built when absent), marked in use and most recently used.

        Synchronous on purpose: between looking the slot up and counting the user there is no
        await, so an eviction can never pick a slot that a request is about to use.
        """
        slot = self._slots.get(session_id)
        if slot is None:
            slot = self.build(session_id)
            self._slots[session_id] = slot
        else:
            self._slots.move_to_end(session_id)
            self._idle.pop(session_id, None)
        slot.users += 1
        self._evict_idle()
        return slot

    def release(self, slot: Slot) -> None:
        """The request is done with the slot."""
        slot.users -= 1
        slot.last_used = time.time()
        if slot.users == 0 and slot.key is not None and self._slots.get(slot.key) is slot:
            self._idle[slot.key] = slot  # (a slot is idle only once: acquire took it out)
        self._evict_idle()

    def _evict_idle(self) -> None:
        while len(self._slots) > self.max_active and self._idle:
            key, slot = self._idle.popitem(last=False)
            del self._slots[key]
            self._evicted(slot)

    def _evicted(self, slot: Slot) -> None:
        self.evictions += 1
        task = asyncio.get_running_loop().create_task(self._close(slot, "evicted"))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _close(self, slot: Slot, reason: str) -> None:
        try:
            await slot.agent.close(reason)
        except Exception:  # a tool that fails to close must not take the host down
            log.exception("closing the agent of session %s (%s) failed", slot.key, reason)
        finally:
            self._unwire(slot.agent)

    def slots(self) -> list[Slot]:
        """The retained slots, least recently acquired first."""
        return list(self._slots.values())

    def evict(self, session_id: str) -> bool:
        """Drop a session's idle instance now (its tools closed with reason ``evicted``)."""
        slot = self._slots.get(session_id)
        if slot is None or not slot.idle:
            return False
        del self._slots[session_id]
        self._idle.pop(session_id, None)
        self._evicted(slot)
        return True

    async def close(self, reason: str = "closed") -> None:
        """Close every retained instance and wait for evictions in progress."""
        slots = list(self._slots.values())
        self._slots.clear()
        self._idle.clear()
        for slot in slots:
            await self._close(slot, reason)
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

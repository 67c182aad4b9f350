"""Holding a reply until the run it reports is committed to the recordings, one flush for many turns.

Under the recorder's ``exit`` durability a run's rows go to the store's writer thread and are
committed in the background, in batches. The host's rule is that a reply is never sent for work
that is not stored, and a reply names its run (``run_id``): a client reads that run next, and the
session's later turns point at it. So before a turn's session save (and so before its reply), and
before a durable session's ``TurnDone``, ``Compacted`` or ``Settled`` event goes to its listeners,
the host waits for :meth:`tracer.Store.flush`. (Under ``sync`` every stage is durable when it
closes, so nothing waits.)

A flush blocks until the writer has committed everything submitted so far, so it runs in a
thread, and it is group-committed: at most one flush of a store is in flight; a turn that finishes
while one runs waits for the next, which starts when that one ends and serves every turn that
queued behind it. A busy host pays one commit for many turns, not one each.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from tracer import Durability, Recorder, Store


class GroupFlush:
    """``await wait()`` returns once a ``flush`` that began after the call has returned.

    One flush runs at a time: callers that arrive while it runs share the next one.
    """

    def __init__(self, flush: Callable[[], None]) -> None:
        self._flush = flush
        self._running: asyncio.Task[None] | None = None
        self._queued: asyncio.Task[None] | None = None
        self.flushes = 0  # flushes begun (fewer than waits under load: that is the point)
        self.waits = 0

    async def wait(self) -> None:
        """Return once everything submitted before this call is committed (the flush's error raised)."""
        loop = asyncio.get_running_loop()
        self.waits += 1
        queued, running = self._queued, self._running
        if queued is not None and not queued.done() and queued.get_loop() is loop:
            task = queued  # it starts after the running flush, so after this call: it covers us
        elif running is not None and not running.done() and running.get_loop() is loop:
            # the running flush may have begun before our rows were submitted: wait for the next
            task = self._queued = loop.create_task(self._after(running))
        else:
            task = self._running = loop.create_task(self._flush_now())
        task.add_done_callback(_retrieved)
        await asyncio.shield(task)  # a waiter that is cancelled leaves the flush to the others

    async def _after(self, previous: asyncio.Task[None]) -> None:
        await asyncio.wait([previous])
        self._running, self._queued = asyncio.current_task(), None
        await self._flush_now()

    async def _flush_now(self) -> None:
        self.flushes += 1
        await asyncio.to_thread(self._flush)


def _retrieved(task: asyncio.Task[None]) -> None:
    """Mark the task's error seen: every waiter gets it, and one with no waiter left is not logged."""
    if not task.cancelled():
        task.exception()


def background_store(recorder: Recorder | None) -> Store | None:
    """The store ``recorder`` writes in the background (``exit`` durability), or None: no recorder,
    a disabled one, a read-only store, or ``sync`` (each stage durable before the run goes on)."""
    if recorder is None or not recorder.enabled or recorder.durability is Durability.SYNC:
        return None
    store = recorder.store
    return None if store.read_only else store


class RecordingsCommits:
    """One :class:`GroupFlush` per recordings store a host's agents write to."""

    def __init__(self) -> None:
        self._flushes: dict[int, tuple[Store, GroupFlush]] = {}

    def needed(self, recorder: Recorder | None) -> bool:
        """True when what ``recorder`` records is committed in the background (a reply must wait)."""
        return background_store(recorder) is not None

    async def committed(self, recorder: Recorder | None) -> None:
        """Return once every row ``recorder`` submitted so far is committed (at once when it
        writes none in the background); raises the store's :class:`tracer.StoreError` when the
        rows cannot be written."""
        store = background_store(recorder)
        if store is None:
            return
        entry = self._flushes.get(id(store))
        if entry is None or entry[0] is not store:
            entry = self._flushes[id(store)] = (store, GroupFlush(store.flush))
        await entry[1].wait()

    def flush_counts(self) -> tuple[int, int]:
        """(flushes begun, waits) over every store: how much the group commit shared."""
        flushes = [flush for _, flush in self._flushes.values()]
        return sum(f.flushes for f in flushes), sum(f.waits for f in flushes)

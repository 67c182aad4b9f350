"""Holding a reply until the run it reports is committed to the recordings, one commit for many turns.

Under the recorder's ``exit`` durability a run's rows go to the store's writer thread and are
committed in the background, in batches. The host's rule is that a reply is never sent for work
that is not stored, and a reply names its run (``run_id``): a client reads that run next, and the
session's later turns point at it. So before a turn's session save (and so before its reply), and
before a durable session's ``TurnDone``, ``Compacted`` or ``Settled`` event goes to its listeners,
the host awaits :meth:`tracer.Store.committed`. (Under ``sync`` every stage is durable when it
closes, so nothing waits.)

The wait holds no thread, and it is group-committed by the writer itself: every wait that comes in
while a batch is being written is answered by the next batch, together. A busy host pays one
commit for many turns, and a turn waits for no commit that began before its rows were handed over
unless that commit holds them.
"""

from __future__ import annotations

from tracer import Durability, Recorder, Store


def background_store(recorder: Recorder | None) -> Store | None:
    """The store ``recorder`` writes in the background (``exit`` durability), or None: no recorder,
    a disabled one, a read-only store, or ``sync`` (each stage durable before the run goes on)."""
    if recorder is None or not recorder.enabled or recorder.durability is Durability.SYNC:
        return None
    store = recorder.store
    return None if store.read_only else store


class RecordingsCommits:
    """Waits for the recordings a host's agents write in the background to be committed."""

    def needed(self, recorder: Recorder | None) -> bool:
        """True when what ``recorder`` records is committed in the background (a reply must wait)."""
        return background_store(recorder) is not None

    async def committed(self, recorder: Recorder | None) -> None:
        """Return once every row ``recorder`` submitted so far is committed (at once when it
        writes none in the background); raises the store's :class:`tracer.StoreError` when the
        rows cannot be written."""
        store = background_store(recorder)
        if store is not None:
            await store.committed()

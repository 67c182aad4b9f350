"""What a standing host holds grows with its sessions' conversations, and with nothing else.

A recorded host (DuckDB, ``sync``) runs two sessions of the soak's turns; between the middle and
the end the objects the garbage collector tracks are counted by type (with the recorder's and the
session store's writes committed), for the types of footprint's own packages. The only ones more numerous at the end are the conversations'
messages — one :class:`tracer.ContextItem`, :class:`tracer.Item` and :class:`tracer.Origin` each
— and they are as many as the messages the sessions gained. A run, a stage, a request, a reply, a
listener or a queued write kept per turn would show as a type that grows with the turns.
"""

from __future__ import annotations

import asyncio
import gc
from collections import Counter
from pathlib import Path

from hosting import DuckDBSessions, standing_agent
from tests.hosting.soakkit import message, soak_agent
from tracer import Recorder, Store

SESSIONS, TURNS, SIZE = 2, 120, 512
MESSAGE_TYPES = {"ContextItem", "Item", "Origin"}
SLACK = 12  # objects of other types that may come and go (a write in flight)
OURS = ("tracer", "agent", "hosting")


def _census() -> Counter[str]:
    """Objects of footprint's types, by type (Python's own come and go with its caches: the
    weak references of its ABC caches, the default executor's threads)."""
    gc.collect()
    return Counter(type(o).__qualname__ for o in gc.get_objects()
                   if str(getattr(type(o), "__module__", "")).split(".")[0] in OURS)


async def test_a_host_holds_its_conversations_and_nothing_per_turn(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "held.duckdb")
    sessions = DuckDBSessions(store)
    recorder = Recorder(store)
    host = standing_agent(agent_factory=lambda: soak_agent(recorder), sessions=sessions, durability="sync",
                          close_sessions=True)

    async def messages_held() -> int:
        total = 0
        for n in range(SESSIONS):
            envelope = await sessions.load(f"held-{n}")
            assert envelope is not None
            total += envelope.message_count
        return total

    censuses: list[Counter[str]] = []
    held: list[int] = []
    try:
        for turn in range(TURNS):
            replies = await asyncio.gather(*(host.handle(message(n, turn, SIZE), session_id=f"held-{n}")
                                             for n in range(SESSIONS)))
            assert all(r.status == "answered" for r in replies), replies
            if turn + 1 in (TURNS // 2, TURNS):
                await sessions.flush()
                await asyncio.to_thread(store.flush)
                held.append(await messages_held())
                censuses.append(_census())
    finally:
        await host.close()
        store.close()
    before, after = censuses
    grown = {kind: after[kind] - before[kind] for kind in after if after[kind] > before[kind]}
    added = held[1] - held[0]
    assert added > 2 * SESSIONS * (TURNS // 2)  # (a user message and an answer a turn, and tool calls)
    for kind in MESSAGE_TYPES:
        assert grown.get(kind, 0) == added, (kind, grown, added)
    others = {kind: n for kind, n in grown.items() if kind not in MESSAGE_TYPES}
    assert sum(others.values()) <= SLACK, others

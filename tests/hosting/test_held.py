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
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from agent import Agent, ConversationMemory
from hosting import DuckDBSessions, standing_agent
from hosting.sessions._records import _held_bytes
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


async def _drive(host: Any, sessions: DuckDBSessions, store: Store, turns: int, prefix: str,
                 sample: Callable[[], Awaitable[Any]]) -> tuple[list[Counter[str]], list[Any]]:
    """``turns`` turns of every session through ``host``; at the middle and at the end, with
    everything flushed, the objects of footprint's types and what ``sample`` reads."""
    censuses: list[Counter[str]] = []
    samples: list[Any] = []
    for turn in range(turns):
        replies = await asyncio.gather(*(host.handle(message(n, turn, SIZE), session_id=f"{prefix}-{n}")
                                         for n in range(SESSIONS)))
        assert all(r.status == "answered" for r in replies), replies
        if turn + 1 in (turns // 2, turns):
            await sessions.flush()
            await asyncio.to_thread(store.flush)
            samples.append(await sample())
            censuses.append(_census())
    return censuses, samples


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

    try:
        censuses, held = await _drive(host, sessions, store, TURNS, "held", messages_held)
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


WINDOW_TOKENS = 1_500  # about 10 turns of the messages below: the window slides for most of the session


def _windowed_agent(recorder: Recorder) -> Agent:
    agent = soak_agent(recorder)
    agent.memory = ConversationMemory(max_tokens=WINDOW_TOKENS)
    return agent


@pytest.mark.parametrize("durability", ["sync", "exit"])
async def test_a_long_session_holds_its_window_not_its_history(tmp_path: Path, durability: str) -> None:
    """Past its window, a session's held messages stop growing: the cache, the agent's memory and
    the recorder let go of those its last recorded call left out (the store has them). What the
    host holds between the middle and the end of a long session grows by a window's worth at most,
    while the session gains hundreds of messages; the store still has every one, in order."""
    store = Store.open(tmp_path / "held.duckdb")
    sessions = DuckDBSessions(store)
    recorder = Recorder(store)
    host = standing_agent(agent_factory=lambda: _windowed_agent(recorder), sessions=sessions,
                          durability=durability, close_sessions=True)
    turns = 150

    async def message_counts() -> list[int]:
        return [(await sessions.load(f"long-{n}")).message_count  # type: ignore[union-attr]
                for n in range(SESSIONS)]

    try:
        censuses, counts = await _drive(host, sessions, store, turns, "long", message_counts)
        # the cache counts what it holds (--session-cache-mb bounds that)
        assert sessions._cache_bytes == sum(_held_bytes(e.held()) for e, _, _ in sessions._cache.values())
        assert all(e.offset > 0 for e, _, _ in sessions._cache.values())
        # what was let go of is read back from the store whole, in order, when something needs it
        whole = await sessions.older_messages("long-0", counts[1][0])
        assert [m.item.kind for m in whole[:3]] == ["user", "assistant", "user"]
        assert whole[0].item.text == message(0, 0, SIZE)
        assert sum(1 for m in whole if m.item.kind == "user") == turns
    finally:
        await host.close()
        store.close()
    before, after = censuses
    added = sum(counts[1]) - sum(counts[0])
    assert added > 2 * SESSIONS * (turns // 2)
    grown = after["ContextItem"] - before["ContextItem"]
    assert grown <= 40, (grown, added)  # a window is ~25 messages a session: not the ~330 added


@pytest.mark.parametrize(("durability", "evict_every"), [("sync", 0), ("exit", 7)])
async def test_a_host_letting_go_of_old_messages_records_the_rows_one_holding_them_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durability: str, evict_every: int,
) -> None:
    """The same sessions through a host that keeps no envelope (every turn reads the whole
    conversation back, and hands the recorder every item) and through one whose cache lets go of
    what the windows left out (the recorder is handed receipts; now and then a session is read
    back whole): the recordings' snapshot rows are the same, row for row."""

    async def rows(name: str, cache_bytes: int) -> list[list[tuple[object, ...]]]:
        counter = iter(range(1, 10_000_000))
        monkeypatch.setattr("tracer._recorder.new_id", lambda prefix: f"{prefix}-{next(counter):09d}")
        store = Store.open(tmp_path / f"{name}.duckdb")
        sessions = DuckDBSessions(store, cache_bytes=cache_bytes)
        recorder = Recorder(store)
        host = standing_agent(agent_factory=lambda: _windowed_agent(recorder), sessions=sessions,
                              durability=durability, close_sessions=True)
        try:
            for turn in range(60):
                for n in range(SESSIONS):  # (one after the other: the ids are handed out in the same order)
                    reply = await host.handle(message(n, turn, SIZE), session_id=f"same-{n}")
                    assert reply.status == "answered", reply
                    if cache_bytes and evict_every and turn % evict_every == n:
                        sessions._forget(f"same-{n}")
            await sessions.flush()
            await asyncio.to_thread(store.flush)
            return [store.query(q) for q in ("SELECT * FROM fp_snapshot ORDER BY stage_id",
                                             "SELECT count(*) FROM fp_entry", "SELECT count(*) FROM fp_stage")]
        finally:
            await host.close()
            store.close()

    from tracer import LeftOut
    from tracer._rows import SnapshotPacker

    named: list[bool] = []
    add = SnapshotPacker.add

    def counted(self: SnapshotPacker, *args: Any) -> Any:
        named.append(isinstance(args[4], LeftOut) and args[4].recorded is not None)
        return add(self, *args)

    monkeypatch.setattr(SnapshotPacker, "add", counted)
    whole = await rows("whole", 0)
    assert not any(named)
    held = await rows("held", 64 * 1024 * 1024)
    assert sum(named) > 60 * SESSIONS // 2  # most turns named what their window left out by a receipt
    assert whole[2][0][0] > 60 * SESSIONS * 3  # (the runs were recorded)
    assert held == whole


async def test_a_host_whose_recorder_has_a_listener_holds_its_sessions_whole(tmp_path: Path) -> None:
    """A listener is told every item a stage left out, so the recorder cannot be handed receipts:
    the host keeps holding each session whole (and never reads a conversation back per turn)."""
    from tracer import RecordingListener

    store = Store.open(tmp_path / "listened.duckdb")
    sessions = DuckDBSessions(store)
    recorder = Recorder(store, listeners=[RecordingListener()])
    host = standing_agent(agent_factory=lambda: _windowed_agent(recorder), sessions=sessions, durability="exit",
                          close_sessions=True)
    reads: list[int] = []
    older = sessions.older_messages

    async def counted(session_id: str, count: int) -> Any:
        reads.append(count)
        return await older(session_id, count)

    sessions.older_messages = counted  # type: ignore[method-assign]
    try:
        for turn in range(40):
            reply = await host.handle(message(0, turn, SIZE), session_id="listened")
            assert reply.status == "answered", reply
        envelope = await sessions.load("listened")
        assert envelope is not None and envelope.offset == 0 and envelope.message_count > 80
        assert not reads
    finally:
        await host.close()
        store.close()

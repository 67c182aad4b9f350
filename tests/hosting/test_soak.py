"""The soak, CI-sized: 2 sessions x 200 turns of 2 KB on the embedded default (DuckDB, in the
recordings file, ``sync``), a tool call in every third turn.

Every turn is answered, every answered turn is stored (read back from the file after the host
closed), and what a turn adds to the store does not grow with the session: neither the session's
records nor the recording (counted in snapshot entries stored, which grew with the conversation
when every inference stored its whole context). ``bench/soak.py`` runs the full size and prints
the figures.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest

from hosting import DuckDBSessions, standing_agent
from hosting.sessions._duckdb_persistence import PRUNE_CHARS
from tests.hosting.soakkit import message, soak_agent
from tracer import Recorder, Store, _upkeep

SESSIONS, TURNS, SIZE = 2, 200, 2048


def _file_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def _session_table_bytes(store: Store) -> int:
    """The text every session table holds (superseded head and value revisions included)."""
    tables = [r[0] for r in store.query(
        "SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'fp_session%'")]
    total = 0
    for table in tables:
        columns = [r[0] for r in store.query(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? AND data_type = 'VARCHAR'",
            [table])]
        for column in columns:
            total += int(store.query(f'SELECT coalesce(sum(strlen("{column}")), 0) FROM {table}')[0][0])
    return total


def _stored_snapshot_entries(store: Store) -> int:
    store.flush()
    return int(store.query(
        "SELECT coalesce(sum(CASE WHEN entries = '' THEN 0 ELSE len(string_split(entries, chr(31))) END), 0) "
        "FROM fp_snapshot")[0][0])


async def test_long_sessions_of_big_turns_are_all_answered_stored_and_grow_linearly(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "soak.duckdb"
    # checkpoints (and cache trims) every 1 MB of DuckDB's log (the store's is 16 MB), so this small
    # soak checkpoints about as often as the full one, under the default cap of DuckDB's memory: a
    # checkpoint that cannot pin what it needs fails fatally (at a 64 MB cap the full soak died so)
    monkeypatch.setattr(_upkeep, "CHECKPOINT_AT", 2**20)
    store = Store.open(path)
    sessions = DuckDBSessions(store)
    recorder = Recorder(store)
    host = standing_agent(agent_factory=lambda: soak_agent(recorder), sessions=sessions, durability="sync",
                          close_sessions=True)
    failed: list[str] = []
    growth: list[int] = []  # bytes the sessions hold after each round of turns
    superseded: list[int] = []  # and the bytes of head and value revisions not pruned yet
    recorded: list[int] = []  # snapshot entries the recording holds after each round

    async def session(n: int, turn: int) -> None:
        reply = await host.handle(message(n, turn, SIZE), session_id=f"soak-{n}")
        if reply.status != "answered":
            failed.append(f"session {n} turn {turn}: {reply.status} {reply.error}")

    try:
        for turn in range(TURNS):
            outcomes = await asyncio.gather(*(session(n, turn) for n in range(SESSIONS)), return_exceptions=True)
            failed.extend(f"turn {turn}: {o!r}" for o in outcomes if isinstance(o, BaseException))
            if turn % 20 == 19:
                await sessions.flush()
                growth.append(await sessions.stored_bytes())
                superseded.append(await asyncio.to_thread(_session_table_bytes, store) - growth[-1])
                recorded.append(await asyncio.to_thread(_stored_snapshot_entries, store))
    finally:
        await host.close()
        store.close()
    assert failed == [], failed[:5]
    upkeep = store.writer_stats  # the store checkpointed, and trimmed DuckDB's cache after each checkpoint
    assert upkeep["checkpoints"] >= 5 and upkeep["trims"] >= 5, upkeep

    reopened = Store.open(path)
    again = DuckDBSessions(reopened)
    try:
        for n in range(SESSIONS):
            envelope = await again.load(f"soak-{n}")
            assert envelope is not None
            messages = envelope.conversation_obj().messages
            users = [m.item.text for m in messages if m.item.kind == "user"]
            assert users == [message(n, t, SIZE) for t in range(TURNS)]  # every acknowledged turn, once
            assert sum(1 for m in messages if m.item.kind == "tool_result") == TURNS // 3
    finally:
        await again.close()
        reopened.close()
    # what is stored grows by the same amount each round: linear in the turns, not quadratic
    steps = [b - a for a, b in itertools.pairwise(growth)]
    assert max(steps) <= 1.25 * min(steps), (growth, steps)
    # the superseded revisions of heads and values are pruned now and then: they never pile up
    assert max(superseded) <= 2 * PRUNE_CHARS, superseded
    # and so does the recording: each round stores the entries its turns added, not the conversation again
    recorded_steps = [b - a for a, b in itertools.pairwise(recorded)]
    assert max(recorded_steps) <= 1.25 * min(recorded_steps), (recorded, recorded_steps)

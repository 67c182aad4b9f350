"""Crash leftovers are finished: runs a dead process left running are ended, and no edge ever
points at a stage that was not written."""

from __future__ import annotations

import json
from pathlib import Path

from hosting import InMemorySessions, standing_agent
from tests.hosting.hostkit import make_agent
from tracer import EdgeKind, Recorder, StageKind, Store
from tracer._recorder import Durability


def _dangling_edges(store: Store) -> list[tuple[str, str]]:
    store.flush()
    return [(r[0], r[1]) for r in store.query(
        "SELECT e.run_id, e.src FROM edges e LEFT JOIN stages s ON s.id = e.src WHERE s.id IS NULL")]


def test_a_tool_stage_waits_for_its_batch_so_a_crash_mid_batch_leaves_no_dangling_edge(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "fp.duckdb")
    recorder = Recorder(store, durability=Durability.SYNC)
    run = recorder.start_run(agent="a", input="go")
    with run.stage(StageKind.INFERENCE, "model") as inference:
        pass
    batch = run.stage(StageKind.TOOL_BATCH, "2 tool call(s)", after=[inference])
    tools = [run.stage(StageKind.TOOL, n, after=[batch], edge=EdgeKind.FORK, parent=batch) for n in ("a", "b")]
    tools[0].close()  # finished before the crash; the batch has not closed (the process dies here)
    assert _dangling_edges(store) == []
    assert [r[0] for r in store.query("SELECT name FROM stages ORDER BY seq")] == ["model"]
    tools[1].close()
    batch.close()  # once the batch is written, its tools follow it
    assert [r[0] for r in store.query("SELECT name FROM stages ORDER BY seq")] == ["model", "2 tool call(s)", "a", "b"]
    assert _dangling_edges(store) == []
    store.close()


async def test_runs_a_dead_process_left_running_are_ended_unless_a_stored_turn_continues_them(tmp_path: Path) -> None:
    path = tmp_path / "fp.duckdb"
    store = Store.open(path)
    sessions = InMemorySessions()
    recorder = Recorder(store)
    host = standing_agent(agent_factory=lambda: make_agent(recorder=recorder), sessions=sessions, recordings=store)
    await host.handle("hello", session_id="alice")
    # the dead process: one run started and never stored as a turn (killed between the two), one
    # whose running turn marker will be continued by recovery
    orphan = recorder.start_run(agent="assistant", input="lost", session_id="alice").id
    envelope = await sessions.load("alice")
    assert envelope is not None and envelope.turn is not None
    continued = recorder.start_run(agent="assistant", input="mid-turn", session_id="bob").id
    await sessions.save(envelope.replace(session_id="bob", version=0, stored=None, turn={
        **envelope.turn, "state": "running", "run_id": continued, "kind": "run", "text": "mid-turn",
        "base": envelope.message_count}))
    store.flush()
    await host.close()

    restarted = standing_agent(agent_factory=lambda: make_agent(recorder=recorder), sessions=sessions,
                               recordings=store)
    assert await restarted.start() == [orphan]
    assert await restarted.start() == [orphan]  # once
    status = dict(store.query("SELECT id, status FROM runs"))
    assert status[orphan] == "failed" and status[continued] == "running"
    error, attributes = store.query("SELECT error, attributes FROM runs WHERE id = ?", [orphan])[0]
    assert error.startswith("interrupted") and json.loads(attributes)["stop_reason"] == "interrupted"
    reply = await restarted.handle("and now?", session_id="bob")  # recovery ends the continued run
    assert reply.status == "answered"
    store.flush()
    assert dict(store.query("SELECT id, status FROM runs"))[continued] != "running"
    assert not store.query("SELECT id FROM runs WHERE status = 'running'")
    await restarted.close()
    store.close()

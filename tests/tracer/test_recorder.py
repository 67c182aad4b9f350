"""The recorder: concurrent stages, durability (sync survives SIGKILL, exit flushes at exit), misuse."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tracer import (
    ContextItem,
    EdgeKind,
    Item,
    NullRecorder,
    Origin,
    Recorder,
    RecordingError,
    RedactionPolicy,
    Store,
)

ROOT = Path(__file__).resolve().parents[2]


def _child(code: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=ROOT,
    )


def _stage_ids(path: Path) -> set[str]:
    with Store.open(path, read_only=True) as store:
        return {row[0] for row in store.query("SELECT id FROM stages")}


# ------------------------------------------------------------------ concurrency


async def test_stages_from_concurrent_tasks_are_all_recorded(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.duckdb")
    recorder = Recorder(store)
    run = recorder.start_run(agent="a", input="go")
    batch = run.stage("tool_batch", "8 tool calls")

    async def tool(n: int) -> str:
        stage = run.stage("tool", f"tool {n}", after=[batch], edge=EdgeKind.FORK, parent=batch)
        stage.inputs([ContextItem(Item.of_text("tool_call", f"call {n}"), Origin("stage", run.id, batch.id))])
        for _ in range(3):
            await asyncio.sleep(0)  # let the other tools interleave
        stage.output(Item("tool_result", {"call_id": str(n), "content": f"result {n}"}))
        stage.close()
        return stage.id

    ids = await asyncio.gather(*(tool(n) for n in range(8)))
    batch.close()
    run.end("answered", output="done")
    store.close()
    with Store.open(tmp_path / "s.duckdb", read_only=True) as reader:
        data = reader.load_run(run.id)
    assert {s.id for s in data.stages} == {batch.id, *ids}
    assert sorted(s.seq for s in data.stages) == list(range(9))  # distinct sequence numbers
    assert {e.dst for e in data.edges if e.kind == "fork" and e.src == batch.id} == set(ids)
    for n, stage_id in enumerate(ids):
        assert data.items[data.outputs[stage_id][0]].text == f"result {n}"
        assert data.stage(stage_id).parent_id == batch.id


def test_a_stage_closed_inside_another_waits_for_the_stages_its_edges_start_at(tmp_path: Path) -> None:
    """No edge is stored before the stage it starts at: a tool closed inside its open batch (one
    edge, or two with one source closed) is written once every source is."""
    store = Store.open(tmp_path / "s.duckdb")
    run = Recorder(store).start_run(agent="a", input="go")
    inference = run.stage("inference", "turn 1")
    inference.close()
    batch = run.stage("tool_batch", "2 tool calls", after=[inference])
    one = run.stage("tool", "one edge", after=[batch], edge=EdgeKind.FORK, parent=batch)
    one.close()
    two = run.stage("tool", "two edges", parent=batch)
    two.edges = [(inference.id, "next"), (batch.id, "fork")]
    two.close()
    store.flush()
    assert {r[0] for r in store.query("SELECT id FROM stages")} == {inference.id}
    assert store.query("SELECT count(*) FROM edges")[0][0] == 0
    batch.close()
    store.flush()
    assert {r[0] for r in store.query("SELECT id FROM stages")} == {inference.id, batch.id, one.id, two.id}
    run.end("answered", output="done")
    store.close()


def test_loop_iterations_are_distinct_stages(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.duckdb")
    run = Recorder(store).start_run(agent="a", input="go")
    previous = None
    for _ in range(3):
        with run.stage("inference", "turn", after=[previous] if previous else [], edge=EdgeKind.LOOP) as stage:
            pass  # empty stages: only their edges matter here
        previous = stage
    run.end("answered")
    store.flush()
    data = store.load_run(run.id)
    assert [(s.kind, s.seq) for s in data.stages] == [("inference", 0), ("inference", 1), ("inference", 2)]
    assert len({s.id for s in data.stages}) == 3
    assert [e.kind for e in data.edges] == ["loop", "loop"]
    store.close()


# ------------------------------------------------------------------ misuse


def test_misuse_is_a_recording_error(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.duckdb")
    run = Recorder(store).start_run(agent="a", input="go")
    stage = run.stage("input")
    stage.close()
    with pytest.raises(RecordingError, match="already closed"):
        stage.output(Item.of_text("user", "late"))
    with pytest.raises(RecordingError, match="already closed"):
        stage.close()
    run.end("answered")
    with pytest.raises(RecordingError, match="has ended"):
        run.stage("inference")
    with pytest.raises(RecordingError, match="already ended"):
        run.end("failed")
    store.close()


def test_a_stage_left_by_an_exception_is_closed_as_an_error(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.duckdb")
    run = Recorder(store).start_run(agent="a", input="go")
    with pytest.raises(ValueError), run.stage("tool", "lookup"):
        raise ValueError("no such order")
    run.end("failed")
    store.flush()
    (stage,) = store.load_run(run.id).stages
    assert (stage.status, stage.error) == ("error", "ValueError: no such order")
    store.close()


def test_null_recorder_writes_nothing() -> None:
    recorder = NullRecorder()
    run = recorder.start_run(agent="a", input="go")
    with run.stage("inference") as stage:
        stage.inputs([ContextItem(Item.of_text("user", "x"), Origin("user"))])
        out = stage.output(Item.of_text("assistant", "y"))
    run.end("answered")
    assert not recorder.enabled and out.origin.stage_id == stage.id and run.ended


def test_a_paused_run_continues_with_later_sequence_numbers(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.duckdb")
    recorder = Recorder(store)
    run = recorder.start_run(agent="a", input="book it")
    with run.stage("pause", "awaiting a person") as pause:
        pass  # an empty stage: only its place in the flowchart matters here
    run.end("awaiting")
    resumed = recorder.continue_run(run.id, agent="a", next_seq=run.next_seq)
    with resumed.stage("resume", after=[pause.id], edge=EdgeKind.RESUME):
        pass  # an empty stage: only its resume edge matters here
    resumed.end("answered", output="booked")
    store.flush()
    data = store.load_run(run.id)
    assert (data.run.status, data.run.output) == ("answered", "booked")
    assert [(s.kind, s.seq) for s in data.stages] == [("pause", 0), ("resume", 1)]
    store.close()


# ------------------------------------------------------------------ durability (subprocesses)


def test_sync_keeps_every_closed_stage_when_the_process_is_killed(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    child = _child(f"""
        from tracer import ContextItem, Item, Origin, Recorder, Store
        store = Store.open({str(path)!r})
        recorder = Recorder(store, durability="sync")
        run = recorder.start_run(agent="a", input="long job")
        n = 0
        while True:  # records until killed; each id is printed only once its stage is closed
            stage = run.stage("tool", f"step {{n}}")
            stage.inputs([ContextItem(Item.of_text("user", f"input {{n}}"), Origin("user"))])
            stage.output(Item.of_text("text", f"output {{n}}"))
            stage.close()
            print(stage.id, flush=True)
            n += 1
    """)
    assert child.stdout is not None
    closed = [child.stdout.readline().strip() for _ in range(25)]
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    closed += [line.strip() for line in child.stdout if line.strip()]
    stored = _stage_ids(path)
    assert set(closed) <= stored
    with Store.open(path, read_only=True) as store:
        data = store.load_run(store.resolve_run_id("last"))
    for stage in data.stages:
        if stage.id in closed:  # a closed stage is whole: its snapshot and output are there too
            assert data.items[data.outputs[stage.id][0]].text == f"output {stage.name.split()[1]}"
            assert len(data.inputs[stage.id]) == 1


@pytest.mark.parametrize("ending", ["return", "raise"])
def test_exit_durability_flushes_at_interpreter_exit(tmp_path: Path, ending: str) -> None:
    path = tmp_path / "s.duckdb"
    child = _child(f"""
        from tracer import Item, Recorder, Store
        store = Store.open({str(path)!r})
        run = Recorder(store).start_run(agent="a", input="job")
        for n in range(200):
            with run.stage("tool", f"step {{n}}") as stage:
                stage.output(Item.of_text("text", f"output {{n}}"))
            print(stage.id, flush=True)
        run.end("answered", output="all done")
        if {ending == "raise"}:
            raise RuntimeError("the program crashed after the run")
    """)
    out, err = child.communicate(timeout=60)
    if ending == "raise":
        assert child.returncode == 1 and "the program crashed" in err
    else:
        assert child.returncode == 0, err
    printed = set(out.split())
    assert len(printed) == 200 and printed <= _stage_ids(path)
    with Store.open(path, read_only=True) as store:
        assert store.get_run(store.resolve_run_id("last")).output == "all done"


def test_redaction_policy_is_stored_on_the_run(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.duckdb")
    policy = RedactionPolicy.with_extra(keys=["ssn"], patterns=[r"\d{3}-\d{2}-\d{4}"])
    run = Recorder(store, redaction=policy).start_run(agent="a", input="x")
    run.end("answered")
    store.flush()
    stored = store.get_run(run.id).redaction
    assert "ssn" in stored["keys"] and r"\d{3}-\d{2}-\d{4}" in stored["patterns"]
    store.close()


def test_context_items_shared_by_two_recorders_reach_both_stores(tmp_path: Path) -> None:
    """A snapshot entry is packed once per recorder: another recorder (store) still gets the item rows."""
    shared = [ContextItem(Item.of_text("user", f"message {n}"), Origin("user", source="input")) for n in range(3)]
    for name in ("one", "two", "one-again"):
        store = Store.open(tmp_path / f"{name}.duckdb")
        recorder = Recorder(store)
        for _ in range(2):  # the second snapshot uses the entries packed for the first
            run = recorder.start_run(agent="a", input="x")
            with run.stage("inference") as stage:
                stage.inputs(shared)
            run.end("answered")
        store.flush()
        data = store.load_run(run.id)
        assert [e.item_hash for e in data.inputs[stage.id]] == [ci.item.hash for ci in shared]
        assert set(data.items) == {ci.item.hash for ci in shared}
        store.close()


def test_a_recorder_past_its_bound_of_items_sends_only_items_it_never_packed(tmp_path: Path) -> None:
    """Its memory of items sent is cleared past a bound; entries packed on context items stay (their
    rows were sent), so a long conversation is not sent again at every call, and a new item is."""
    store = Store.open(tmp_path / "s.duckdb")
    recorder = Recorder(store)
    shared = [ContextItem(Item.of_text("user", "hello"), Origin("user"))]
    with recorder.start_run(agent="a", input="x").stage("inference") as stage:
        stage.inputs(shared)
    store.flush()
    recorder._sent.clear()  # (what passing the bound does)
    items_sent: list[tuple[Any, ...]] = []
    original = store.submit

    def spy(bundle: Any) -> None:
        items_sent.extend(getattr(bundle, "items", None) or ())  # a closed stage's rows (StageRows)
        original(bundle)

    store.submit = spy  # type: ignore[method-assign]
    again = ContextItem(Item.of_text("user", "hello"), Origin("user", source="again"))  # not packed yet
    with recorder.start_run(agent="a", input="x").stage("inference") as stage:
        stage.inputs([*shared, again])
    assert [row[0] for row in items_sent] == [again.item.hash]  # only the item no entry stood for
    store.flush()
    assert [e.item_hash for e in store.load_run(stage.run.id).inputs[stage.id]] == [shared[0].item.hash] * 2
    store.close()


# ------------------------------------------------------------------ recorders sharing what was stored


def test_a_recorder_sharing_its_bases_caches_stores_each_item_once_and_masked(tmp_path: Path) -> None:
    secret = Item.of_text("user", "my password=hunter2-prod, please")
    plain = Item.of_text("user", "nothing to hide")
    with Store.open(tmp_path / "fp.duckdb") as store, Store.open(tmp_path / "other.duckdb") as other:
        base = Recorder(store)
        forks = [Recorder(store, caches_of=base) for _ in range(3)]
        for recorder in (base, *forks):
            run = recorder.start_run(agent="a", input="hi")
            with run.stage("inference", "call") as stage:
                stage.inputs([ContextItem(secret, Origin("user")), ContextItem(plain, Origin("user"))])
            run.end("answered", output="ok")
        store.flush()
        texts = [row[0] for row in store.query("SELECT text FROM fp_item ORDER BY 1")]
        assert texts == ["my [REDACTED], please", "nothing to hide"]
        assert store.query("SELECT count(*) FROM fp_run")[0][0] == 4
        # the snapshots of every run name the stored (masked) item
        assert not any("hunter2" in str(row) for row in store.query("SELECT * FROM fp_snapshot"))
        with pytest.raises(ValueError, match="same store"):
            Recorder(other, caches_of=base)
        with pytest.raises(ValueError, match="same redaction policy"):
            Recorder(store, caches_of=base, redaction=RedactionPolicy.none())


def test_policies_of_the_same_keys_and_patterns_mask_alike_whatever_they_were_given_as() -> None:
    made = RedactionPolicy(keys=("password",), patterns=(r"sk-\w+",))
    again = RedactionPolicy(keys=["password"], patterns=[r"sk-\w+"])  # type: ignore[arg-type]
    value = {"password": "x", "note": "key sk-abc123 here", "other": "kept"}
    assert made.value(value) == again.value(value) == {"password": "[REDACTED]", "note": "key [REDACTED] here",
                                                       "other": "kept"}
    assert RedactionPolicy.none().value(value) == value

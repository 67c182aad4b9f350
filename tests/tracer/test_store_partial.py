"""Reading a run a stage at a time: ``Store.load_run(snapshots=...)`` and ``Store.load_snapshots``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tracer import ContextItem, EdgeKind, Item, NotFoundError, Origin, Recorder, RunData, SnapshotEntry, Store


def _record(store: Store, run_id: str, turns: int) -> None:
    """A run of ``turns`` inferences, each seeing the conversation so far (the oldest line left out)."""
    recorder = Recorder(store)
    run = recorder.start_run(agent="a", input=f"question of {run_id}", session_id="s", run_id=run_id)
    with run.stage("input", "user message") as first:
        history = [first.output(Item.of_text("user", f"question of {run_id}"), origin_kind="user")]
    after = [first]
    for turn in range(turns):
        with run.stage("inference", f"turn {turn}", after=after) as inference:
            seen = [ContextItem(Item.of_text("system", "be brief"), Origin("config")), *history]
            inference.inputs(seen, dropped=[(ContextItem(Item.of_text("user", "an old line"), Origin("memory")),
                                             "memory window")])
            call = inference.output(Item("tool_call", {"id": f"c{turn}", "name": "look", "arguments": "{}"}))
        with run.stage("tool", "look", after=[inference], edge=EdgeKind.FORK) as tool:
            tool.inputs([call])
            result = tool.output(Item("tool_result", {"call_id": f"c{turn}", "name": "look",
                                                      "content": f"{run_id} result {turn}", "is_error": False}))
        history += [call, result]
        after = [tool]
    with run.stage("answer", "answer", after=after) as last:
        answer = last.output(Item.of_text("assistant", f"the answer of {run_id}"))
        last.inputs([answer])
    run.end("answered", output=f"the answer of {run_id}")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = Store.open(tmp_path / "s.duckdb")
    # ids that are prefixes of each other, and a run recorded between them
    for run_id, turns in (("r-1", 3), ("r-10", 2), ("r-1a", 1), ("r-0", 2)):
        _record(store, run_id, turns)
    store.flush()
    yield store


def _merged(outline: RunData, *reads: tuple[dict[str, list[SnapshotEntry]], dict[str, Item]]) -> RunData:
    for inputs, items in reads:
        outline.inputs.update(inputs)
        outline.items.update(items)
    return outline


def test_an_outline_has_every_stage_edge_and_output_but_no_snapshot(store: Store) -> None:
    for run_id in ("r-1", "r-10", "r-1a", "r-0"):
        whole, outline = store.load_run(run_id), store.load_run(run_id, snapshots=[])
        assert (outline.run, outline.stages, outline.edges, outline.outputs) == (
            whole.run, whole.stages, whole.edges, whole.outputs)
        assert outline.inputs == {} and outline.items == {}
        assert {s.run_id for s in outline.stages} == {run_id}


def test_the_stages_named_come_whole_and_the_rest_reads_back_to_the_whole_run(store: Store) -> None:
    whole = store.load_run("r-1")
    inference = whole.inferences()[-1]
    answer = whole.stages[-1]
    some = store.load_run("r-1", snapshots=[inference.id, answer.id, inference.id])
    assert some.inputs == {inference.id: whole.inputs[inference.id], answer.id: whole.inputs[answer.id]}
    assert any(not e.included for e in some.inputs[inference.id]), "entries left out of the context come too"
    named = {e.item_hash for s in (inference, answer) for e in whole.inputs[s.id]}
    named |= {h for s in (inference, answer) for h in whole.outputs.get(s.id, [])}
    assert some.items == {h: whole.items[h] for h in named}

    rest = [s.id for s in whole.stages if s.id not in (inference.id, answer.id)]
    inputs, items = store.load_snapshots("r-1", rest)
    assert set(inputs) == {s for s in rest if s in whole.inputs}, "a stage that saw nothing is absent"
    assert _merged(some, (inputs, items)) == whole


def test_a_run_read_a_stage_at_a_time_equals_the_whole_run(store: Store) -> None:
    for run_id in ("r-10", "r-1a"):
        whole = store.load_run(run_id)
        reads = [store.load_snapshots(run_id, [stage.id]) for stage in whole.stages]
        assert _merged(store.load_run(run_id, snapshots=()), *reads) == whole


def test_stages_of_another_run_or_unknown_are_named_and_none_read_nothing(store: Store) -> None:
    other = store.load_run("r-10").stages[1].id
    known = store.load_run("r-1").stages[0].id
    with pytest.raises(NotFoundError, match=f"run 'r-1' has no stage {other} "):
        store.load_snapshots("r-1", [known, other])
    with pytest.raises(NotFoundError, match="no stage s-nope, s-typo"):
        store.load_snapshots("r-1", ["s-typo", known, "s-nope"])
    assert store.load_snapshots("r-1", []) == ({}, {})
    with pytest.raises(NotFoundError, match=f"run 'r-1' has no stage {other}, s-typo "):
        store.load_run("r-1", snapshots=[known, "s-typo", other])
    with pytest.raises(NotFoundError, match="no run r-2"):
        store.load_run("r-2", snapshots=[])


def test_a_read_only_store_reads_stages_the_same(store: Store, tmp_path: Path) -> None:
    whole = store.load_run("r-1")
    store.close()
    with Store.open(tmp_path / "s.duckdb", read_only=True) as again:
        stage = whole.inferences()[0].id
        inputs, _ = again.load_snapshots("r-1", [stage])
        assert inputs == {stage: whole.inputs[stage]}

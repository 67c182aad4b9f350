"""`diff`: between two snapshots (what changed, tokens per origin kind) and two runs (first divergence)."""

from __future__ import annotations

from pathlib import Path

from tracer import (
    ContextItem,
    Item,
    Origin,
    Recorder,
    SnapshotEntry,
    Store,
    diff_runs,
    diff_snapshots,
    estimate_tokens,
)


def _entries(*cis: ContextItem) -> tuple[list[SnapshotEntry], dict[str, Item]]:
    return ([SnapshotEntry(i, ci.hash, ci.origin) for i, ci in enumerate(cis)], {ci.hash: ci.item for ci in cis})


def _ci(kind: str, text: str, origin: Origin) -> ContextItem:
    return ContextItem(Item.of_text(kind, text), origin)


def test_snapshot_diff_names_each_kind_of_change() -> None:
    persona = Origin("prompt_section", source="base")
    system_a = _ci("system", "You are a helpful assistant. Answer in full sentences, always.", Origin("config"))
    system_b = _ci("system", "You are a helpful assistant.", Origin("config"))
    old_turn = _ci("user", "hello there", Origin("stage", "r1", "s1"))
    kept = _ci("user", "what is on tomorrow?", Origin("stage", "r1", "s2"))
    section_a = _ci("prompt_section", "Speak English.", persona)
    section_b = _ci("prompt_section", "Speak German.", persona)
    memory = _ci("memory", "The user lives in Berlin.", Origin("memory", "r1", "s0", "profile.city"))
    summary = _ci("summary", "Earlier: the user greeted us.", Origin("stage", "r1", "s9"))
    reply = _ci("assistant", "Let me check.", Origin("stage", "r1", "s3"))
    before, items_a = _entries(system_a, section_a, old_turn, kept)
    after, items_b = _entries(system_b, section_b, memory, summary, kept, reply)
    diff = diff_snapshots(before, after, {**items_a, **items_b})
    changes = {(e.change, e.text) for e in diff.entries}
    assert changes == {
        ("truncated", system_b.text),
        ("edited", section_b.text),
        ("injected", memory.text),
        ("summarized", summary.text),
        ("added", reply.text),
        ("dropped", old_turn.text),
    }
    edited = next(e for e in diff.entries if e.change == "edited")
    assert edited.before_text == "Speak English." and edited.origin_source == "base"
    assert diff.kept == 1 and diff.changed
    assert diff.tokens_before == {
        "config": estimate_tokens(system_a.text), "prompt_section": estimate_tokens(section_a.text),
        "stage": estimate_tokens(old_turn.text) + estimate_tokens(kept.text),
    }
    assert diff.tokens_after["memory"] == estimate_tokens(memory.text)
    assert diff.tokens_after["stage"] == sum(estimate_tokens(c.text) for c in (summary, kept, reply))


def test_items_left_out_do_not_count_as_context() -> None:
    a = _ci("user", "one", Origin("user"))
    b = _ci("user", "two", Origin("user"))
    before = [SnapshotEntry(0, a.hash, a.origin), SnapshotEntry(1, b.hash, b.origin, False, "memory_window")]
    after = [SnapshotEntry(0, a.hash, a.origin)]
    diff = diff_snapshots(before, after, {a.hash: a.item, b.hash: b.item})
    assert not diff.changed and diff.kept == 1


def _record(store: Store, *, answer: str, context: str, extra_stage: bool = False, kind: str = "inference") -> str:
    recorder = Recorder(store)
    run = recorder.start_run(agent="a", input="q")
    with run.stage("input", "user message") as s_input:
        question = s_input.output(Item.of_text("user", "q"), origin_kind="user")
    with run.stage(kind, "turn 1", after=[s_input]) as s_inf:
        s_inf.inputs([_ci("system", context, Origin("config", source="persona")), question])
        s_inf.output(Item.of_text("assistant", answer))
    if extra_stage:
        with run.stage("answer", after=[s_inf]):
            pass  # an empty stage: only its place in the flowchart matters here
    run.end("answered", output=answer)
    store.flush()
    return run.id


def test_run_diff_finds_the_first_divergent_stage(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.duckdb") as store:
        base = store.load_run(_record(store, answer="yes", context="be kind"))
        same = store.load_run(_record(store, answer="yes", context="be kind"))
        other_context = store.load_run(_record(store, answer="no", context="be rude"))
        other_output = store.load_run(_record(store, answer="no", context="be kind"))
        longer = store.load_run(_record(store, answer="yes", context="be kind", extra_stage=True))
        other_kind = store.load_run(_record(store, answer="yes", context="be kind", kind="tool"))

    assert diff_runs(base, same).index is None
    by_context = diff_runs(base, other_context)
    assert (by_context.index, by_context.stage_a, by_context.stage_b) == (1, base.stages[1].id,
                                                                         other_context.stages[1].id)
    assert by_context.snapshot is not None
    assert {(e.change, e.text) for e in by_context.snapshot.entries} == {("edited", "be rude")}
    assert "saw different context" in by_context.reason
    by_output = diff_runs(base, other_output)
    assert by_output.index == 1 and "different output" in by_output.reason and by_output.snapshot is None
    by_length = diff_runs(base, longer)
    assert by_length.index == 2 and "run B goes on for 1 more stage" in by_length.reason
    by_kind = diff_runs(base, other_kind)
    assert by_kind.index == 1 and "inference" in by_kind.reason and "tool" in by_kind.reason

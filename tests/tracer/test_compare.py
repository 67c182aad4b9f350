"""compare_runs: two recorded runs aligned stage by stage."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tracer import ContextItem, Item, Origin, Recorder, Store, compare_runs


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path / "compare.duckdb") as opened:
        yield opened


def record(store: Store, *, city: str, day: str, call_id: str, answer: str, tokens: int = 100) -> str:
    """A run like the demo's: a memory fact, one tool call, an answer that depends on both."""
    run = Recorder(store).start_run(agent="assistant", input="when am I free?", session_id=f"s-{call_id}")
    with run.stage("input", "user message") as first:
        user = first.output(Item.of_text("user", "when am I free?"), origin_kind="user", source="input")
    with run.stage("memory", "memory load", after=[first]) as memory:
        fact = memory.output(Item("memory", {"text": f"Maya lives in {city}.", "key": "profile.home_city"}),
                             origin_kind="memory", source="profile.home_city")
    with run.stage("prompt", "prompt composition", after=[memory]) as prompt:
        prompt.inputs([fact])
        base = prompt.output(Item.of_text("prompt_section", "You are an assistant."), origin_kind="prompt_section",
                             source="base")
    static = [ContextItem(Item("tool_definition", {"name": "cal", "description": "calendar", "parameters": {}}),
                          Origin("config", source="tool:cal")),
              ContextItem(Item("settings", {"model": "m"}), Origin("config", source="settings"))]
    old = ContextItem(Item.of_text("user", "an old message"), Origin("user", "r-old", "s-old", "input"))
    with run.stage("inference", "turn 1", after=[prompt]) as turn1:
        turn1.inputs([base, fact, user, *static], dropped=[(old, "memory_window")] if city == "Berlin" else [])
        call = turn1.output(Item("tool_call", {"id": call_id, "name": "cal", "arguments": json.dumps({"day": day})}))
        turn1.set(input_tokens=tokens, output_tokens=5)
    with run.stage("tool_batch", "1 tool call(s)", after=[turn1]) as batch:
        pass  # a batch stage records no content of its own
    with run.stage("tool", "cal", after=[batch], edge="fork") as tool:
        tool.inputs([call])
        tool.set(arguments=json.dumps({"day": day}), call_id=call_id)
        result = tool.output(Item("tool_result", {"call_id": call_id, "name": "cal", "content": "10:00",
                                                  "is_error": False}))
    with run.stage("inference", "turn 2", after=[tool], edge="join") as turn2:
        turn2.inputs([base, fact, user, call, result, *static])
        reply = turn2.output(Item.of_text("assistant", answer))
        turn2.set(input_tokens=tokens + 20, output_tokens=10)
    with run.stage("answer", "answer", after=[turn2]) as done:
        done.inputs([reply])
        done.output(reply.item)
    run.end("answered", output=answer, tokens_in=2 * tokens + 20, tokens_out=15, cost=0.001 * tokens)
    store.flush()
    return run.id


def test_the_first_divergence_names_the_stage_and_the_context_that_differs(store: Store) -> None:
    right = record(store, city="Lisbon", day="tomorrow", call_id="a1", answer="Meet in Lisbon.")
    wrong = record(store, city="Berlin", day="tomorrow", call_id="b7", answer="Meet in Berlin.", tokens=110)
    comparison = compare_runs(store, right, wrong)
    assert not comparison.same_answer
    first = comparison.first_divergence
    assert first is not None and first.label == "memory 'memory load'"
    assert first.outputs is not None
    (edited,) = first.outputs.entries
    assert (edited.change, edited.before_text, edited.text) == ("edited", "Maya lives in Lisbon.", "Maya lives in Berlin.")
    by_label = {p.label: p for p in comparison.stages}
    turn1 = by_label["inference 'turn 1'"]
    assert turn1.change == "differs" and turn1.context is not None
    assert [e.origin_source for e in turn1.context.entries] == ["profile.home_city"]
    assert [(d.side, d.dropped_by) for d in turn1.dropped] == [("b", "memory_window")]
    # the tool calls have different ids but the same name, arguments and result: they agree
    assert by_label["tool 'cal'"].change == "same"
    assert [c.change for c in comparison.tool_calls] == ["same"]
    assert comparison.usage.tokens_in == (220, 240)
    assert comparison.usage.per_inference_b == [(110, 5), (130, 10)]
    assert comparison.divergence.stage_a == first.a.id if first.a else False
    assert comparison.to_dict()["first_divergence"]["label"] == "memory 'memory load'"


def test_tool_calls_that_differ_in_arguments(store: Store) -> None:
    a = record(store, city="Lisbon", day="tomorrow", call_id="a1", answer="ok")
    b = record(store, city="Lisbon", day="monday", call_id="a1", answer="ok")
    comparison = compare_runs(store, a, b)
    assert comparison.same_answer
    assert comparison.first_divergence is not None
    assert comparison.first_divergence.label == "inference 'turn 1'"
    assert "produced different output" in comparison.first_divergence.reasons
    (call,) = comparison.tool_calls
    assert call.change == "arguments" and call.arguments_a == '{"day": "tomorrow"}' and call.arguments_b == '{"day": "monday"}'


def test_identical_runs_do_not_diverge_and_extra_stages_are_aligned(store: Store) -> None:
    a = record(store, city="Lisbon", day="tomorrow", call_id="x", answer="ok")
    b = record(store, city="Lisbon", day="tomorrow", call_id="y", answer="ok")
    comparison = compare_runs(store, a, b)
    assert comparison.first_divergence is None and comparison.divergence.index is None
    short = Recorder(store).start_run(agent="assistant", input="when am I free?")
    with short.stage("input", "user message") as first:
        first.output(Item.of_text("user", "when am I free?"), origin_kind="user", source="input")
    short.end("failed", error="stopped")
    store.flush()
    partial = compare_runs(store, a, short.id)
    changes = [p.change for p in partial.stages]
    assert changes[0] == "same" and set(changes[1:]) == {"only_a"}
    assert [c.change for c in partial.tool_calls] == ["only_a"]

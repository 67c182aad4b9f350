"""`why`: the backward walk finds the culprit however far back, and across runs of a session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tracer import ContextItem, EdgeKind, EvidenceNode, Item, NotFoundError, Origin, Recorder, Store, why

CULPRIT = "The user lives in Berlin."


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path / "s.duckdb") as opened:
        yield opened


def _session(store: Store) -> tuple[str, str, ContextItem]:
    """Two runs of one session; the second answers wrongly because of a fact loaded in the first.

    run 1: input -> memory load (the culprit fact) -> inference 1 (tool call) -> tool (result) ->
           inference 2 (answer: "It is sunny in Berlin.")
    run 2: input -> inference (history from run 1, one old message dropped by the window) -> answer
    """
    recorder = Recorder(store)
    system = ContextItem(Item.of_text("system", "You are a weather bot."), Origin("config", source="persona"))
    run1 = recorder.start_run(agent="weather", input="weather?", session_id="maya")
    with run1.stage("input", "user message") as s_input:
        question = s_input.output(Item.of_text("user", "What's the weather?"), origin_kind="user", source="input")
    with run1.stage("memory", "memory load", after=[s_input]) as s_memory:
        fact = ContextItem(Item(
            "memory", {"text": CULPRIT, "key": "profile.home_city"}), s_memory.origin("memory", "profile.home_city"))
    with run1.stage("inference", "turn 1", after=[s_memory]) as s_inf1:
        s_inf1.inputs([system, fact, question])
        call = s_inf1.output(Item("tool_call", {"id": "c1", "name": "weather", "arguments": {"city": "Berlin"}}))
    with run1.stage("tool", "weather", after=[s_inf1], edge=EdgeKind.FORK) as s_tool:
        s_tool.inputs([call])
        result = s_tool.output(Item("tool_result", {"call_id": "c1", "content": "sunny, 24 C"}))
    with run1.stage("inference", "turn 2", after=[s_tool], edge=EdgeKind.JOIN) as s_inf2:
        s_inf2.inputs([system, question, result])  # the fact reaches it only through the tool call
        answer1 = s_inf2.output(Item.of_text("assistant", "It is sunny in Berlin."))
    run1.end("answered", output="It is sunny in Berlin.")

    run2 = recorder.start_run(agent="weather", input="and tomorrow?", session_id="maya")
    with run2.stage("input", "user message") as t_input:
        follow_up = t_input.output(Item.of_text("user", "And tomorrow?"), origin_kind="user", source="input")
    with run2.stage("inference", "turn 1", after=[t_input]) as t_inf:
        # history items keep the origin they were born with: run 1's stages
        t_inf.inputs([system, call, result, answer1, follow_up], dropped=[(question, "memory_window")])
        t_inf.output(Item.of_text("assistant", "Tomorrow Berlin will be rainy."))
    with run2.stage("answer", after=[t_inf]):
        pass  # an empty stage: only its place in the flowchart matters here
    run2.end("answered", output="Tomorrow Berlin will be rainy.")
    store.flush()
    return run1.id, run2.id, fact


def _find(node: EvidenceNode, text: str) -> list[tuple[int, EvidenceNode]]:
    return [(d, n) for d, n in node.walk() if n.node == "item" and n.text == text]


def test_the_culprit_three_hops_back(store: Store) -> None:
    run1, _, fact = _session(store)
    evidence = why(store, run1)
    assert evidence.root.text == "It is sunny in Berlin."
    # answer -> inference 2 -> tool result -> tool -> tool call -> inference 1 -> memory fact
    chain = [n for _, n in evidence.root.walk() if n.node == "item"]
    result = next(n for n in chain if n.item_kind == "tool_result")
    tool_stage = result.children[0]
    call = next(n for n in tool_stage.children if n.item_kind == "tool_call")
    inference1 = call.children[0]
    culprit = next(n for n in inference1.children if n.item_kind == "memory")
    assert (tool_stage.stage_kind, inference1.stage_name) == ("tool", "turn 1")
    assert culprit.text == CULPRIT
    assert culprit.origin == fact.origin and culprit.origin.source == "profile.home_city"
    assert evidence.runs == [run1]


def test_the_culprit_across_two_runs_of_the_session(store: Store) -> None:
    run1, run2, _ = _session(store)
    evidence = why(store, run2)
    assert evidence.root.text == "Tomorrow Berlin will be rainy."
    assert evidence.runs == [run2, run1]
    hits = _find(evidence.root, CULPRIT)
    assert hits, "the memory fact of run 1 was not found"
    first = next(n for _, n in hits if not n.children or not n.children[0].seen)
    assert first.origin is not None and first.origin.run_id == run1
    assert first.children[0].stage_name == "memory load"
    # the message the window dropped is listed as "not in context", with what dropped it
    assert [(d.text, d.dropped_by, d.run_id) for d in evidence.not_in_context] == [
        ("What's the weather?", "memory_window", run2)]


def test_shared_stages_are_walked_once(store: Store) -> None:
    run1, _, _ = _session(store)
    evidence = why(store, run1)
    stages = [n for _, n in evidence.root.walk() if n.node == "stage"]
    expanded = [n.stage_id for n in stages if not n.seen]
    assert len(expanded) == len(set(expanded))
    items = [n for _, n in evidence.root.walk() if n.node == "item"]
    shown = [n.item_hash for n in items if not n.seen]
    assert len(shown) == len(set(shown))  # each item once in the tree
    assert any(n.seen for n in items)  # the user's message is sent to both inferences: shown once


def test_why_of_a_given_item_and_depth(store: Store) -> None:
    run1, _, _ = _session(store)
    data = store.load_run(run1)
    result_hash = next(h for h, i in data.items.items() if i.kind == "tool_result")
    evidence = why(store, run1, result_hash[:10])
    assert evidence.root.item_kind == "tool_result"
    shallow = why(store, run1, depth=1)  # one origin: the answer, its inference, that inference's inputs
    assert max(d for d, _ in shallow.root.walk()) == 2
    with pytest.raises(NotFoundError, match="no item"):
        why(store, run1, "ffffffffffff")


def test_a_run_without_an_answer(store: Store) -> None:
    run = Recorder(store).start_run(agent="a", input="x")
    run.end("failed", error="boom")
    store.flush()
    with pytest.raises(NotFoundError, match="no answer"):
        why(store, run.id)


def test_evidence_to_dict_is_json_ready(store: Store) -> None:
    import json

    _, run2, _ = _session(store)
    data = why(store, run2).to_dict()
    assert json.loads(json.dumps(data))["runs"][1] != run2


def test_an_item_a_window_left_out_of_many_turns_is_listed_once(tmp_path: Path) -> None:
    """A window leaves an early message out of every later turn's context: it is listed once
    (a long session listed it once per turn: 600 turns of 30 KB gave 74,800 entries of 586 items)."""
    import asyncio

    from agent import Agent, ConversationMemory
    from agent.providers import FunctionModel

    store = Store.open(tmp_path / "s.duckdb")
    agent = Agent("a", provider=FunctionModel(lambda request: "ok"), recorder=Recorder(store),
                  memory=ConversationMemory(max_tokens=60), session_id="long")

    async def talk() -> None:
        for n in range(12):
            await agent.run(f"message number {n} " + "words " * 8)

    asyncio.run(talk())
    store.flush()
    last = store.list_runs(limit=1)[0].id
    evidence = why(store, last)
    keys = [(d.item_hash, d.dropped_by) for d in evidence.not_in_context]
    assert len(keys) >= 10 and len(keys) == len(set(keys)), "each left-out item once"
    assert any(d.text.startswith("message number 0 ") for d in evidence.not_in_context)
    for d in evidence.not_in_context:  # each at a stage whose context did leave it out
        entries = store.load_run(d.run_id).inputs[d.stage_id]
        assert any(e.item_hash == d.item_hash and not e.included for e in entries)
    store.close()


def test_an_item_this_run_was_sent_is_not_ranked_as_sent_only_to_an_earlier_run(store: Store) -> None:
    """A tool definition sent to every run's model comes last in the context, after the history that
    leads back to the earlier run: the walk meets it there first, but this run was sent it too."""
    from tracer import rank

    recorder = Recorder(store)
    tool = ContextItem(Item.of_text("tool_definition", "weather: the forecast of a city."), Origin("config"))
    run1 = recorder.start_run(agent="weather", input="weather?", session_id="maya")
    with run1.stage("input", "user message") as s_input:
        question = s_input.output(Item.of_text("user", "What's the weather?"), origin_kind="user", source="input")
    with run1.stage("inference", "turn 1", after=[s_input]) as s_inf:
        s_inf.inputs([question, tool])
        answer1 = s_inf.output(Item.of_text("assistant", "It is sunny."))
    run1.end("answered", output="It is sunny.")
    run2 = recorder.start_run(agent="weather", input="and tomorrow?", session_id="maya")
    with run2.stage("input", "user message") as t_input:
        follow_up = t_input.output(Item.of_text("user", "And tomorrow?"), origin_kind="user", source="input")
    with run2.stage("inference", "turn 1", after=[t_input]) as t_inf:
        t_inf.inputs([question, answer1, follow_up, tool])
        t_inf.output(Item.of_text("assistant", "Tomorrow the forecast is rain."))
    run2.end("answered", output="Tomorrow the forecast is rain.")
    store.flush()
    ranked = {r.kind: r for r in rank(why(store, run2.id))}
    assert ranked["tool_definition"].run_id == run2.id
    assert not any("earlier run" in reason for reason in ranked["tool_definition"].reasons)
    assert ranked["assistant"].run_id == run2.id  # the earlier answer is history this run was sent

"""compact(): through the provider, after the active turn, one shared compaction, atomic, safe on failure."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agent.durable import InMemoryPersistence
from agent.durable.errors import CompactionError
from agent.errors import ProviderServerError
from agent.providers import FunctionModel, ModelRequest
from tests.agent.durable.durablekit import FlakyPersistence, Gate, echo_model, records, session, texts
from tracer import Recorder, Store, why


async def chat(agent: Any, *messages: str) -> None:
    for m in messages:
        await agent.send(m)
    await agent.wait_for_idle()


async def test_compaction_replaces_the_history_atomically_and_later_records_append() -> None:
    persistence = InMemoryPersistence()
    agent = session(persistence)
    await chat(agent, "my name is Ada", "I like tea")
    await agent.compact()
    assert texts(agent) == [("summary", "summary: my name is Ada | I like tea")]
    stored = await records(persistence)
    assert [r.kind for r in stored] == ["compaction"]
    assert [ref["kind"] for ref in stored[0].body["replaced"]] == ["user", "assistant", "user", "assistant"]
    await chat(agent, "what do I like?")
    assert [r.kind for r in await records(persistence)] == ["compaction", "user", "assistant"]
    again = session(persistence)
    again.start()
    await again.wait_for_idle()
    assert texts(again) == texts(agent)


async def test_concurrent_callers_share_one_compaction() -> None:
    model = echo_model()
    agent = session(llm=model)
    await chat(agent, "a", "b")
    before = model.calls_made
    await asyncio.gather(*(agent.compact() for _ in range(5)))
    assert model.calls_made == before + 1


async def test_compaction_waits_for_the_active_turn() -> None:
    gate = Gate()

    async def answer(request: ModelRequest) -> str:
        if "Summarise" in request.system_text():
            return "summary of " + str(sum(1 for ci in request.context if ci.item.kind in ("user", "assistant")))
        await gate.wait()
        return "slow answer"

    agent = session(llm=FunctionModel(answer))
    await agent.send("question")
    await gate.entered.wait()
    compaction = asyncio.ensure_future(agent.compact())
    await asyncio.sleep(0.01)
    assert not compaction.done()
    gate.opened.set()
    await compaction
    assert texts(agent) == [("summary", "summary of 2")]  # the turn's answer was in the snapshot


async def test_a_failed_compaction_leaves_the_history_untouched() -> None:
    persistence = InMemoryPersistence()

    def answer(request: ModelRequest) -> str:
        if "Summarise" in request.system_text():
            raise ProviderServerError("no summary today", provider="m")
        return "fine"

    agent = session(persistence, FunctionModel(answer))
    await chat(agent, "keep me")
    before = (texts(agent), await records(persistence))
    with pytest.raises(CompactionError, match="no summary today"):
        await agent.compact()
    assert (texts(agent), await records(persistence)) == before
    await chat(agent, "still works")
    assert texts(agent)[-1] == ("assistant", "fine")


async def test_a_storage_failure_during_compaction_leaves_the_history_untouched() -> None:
    persistence = FlakyPersistence()
    agent = session(persistence)
    await chat(agent, "keep me")
    before = (texts(agent), await records(persistence.inner))
    persistence.fail = {"append"}
    with pytest.raises(CompactionError, match="the history is unchanged"):
        await agent.compact()
    persistence.fail = set()
    assert (texts(agent), await records(persistence.inner)) == before


async def test_compacting_an_empty_session_is_a_no_op() -> None:
    persistence = InMemoryPersistence()
    agent = session(persistence)
    await agent.compact()
    assert await records(persistence) == []


async def test_why_walks_through_a_compaction_to_the_message_it_replaced(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.duckdb")
    try:
        def answer(request: ModelRequest) -> str:
            system = request.system_text()
            if "Summarise" in system:
                return "The user's name is Ada."
            if "name is Ada" in system and "name?" in request.last_user_text():
                return "Your name is Ada."
            return "noted"

        agent = session(llm=FunctionModel(answer), recorder=Recorder(store))
        await chat(agent, "Call me Ada, please.")
        await agent.compact()
        done: list[Any] = []
        agent.listeners.append(done.append)
        await chat(agent, "what is my name?")
        run_id = next(e.run_id for e in done if type(e).__name__ == "TurnDone")
        store.flush()
        evidence = why(store, run_id)
        nodes = [n for _, n in evidence.root.walk()]
        compaction = [n for n in nodes if n.node == "stage" and n.stage_kind == "compaction"]
        assert compaction, "the walk did not reach the compaction stage"
        reached = [n.text for n in nodes if n.node == "item" and n.item_kind == "user"]
        assert "Call me Ada, please." in reached
        summary = [n for n in nodes if n.node == "item" and n.item_kind == "summary"]
        assert summary and summary[0].origin.stage_id == compaction[0].stage_id
        assert len(evidence.runs) >= 3  # the answer's run, the compaction's run, the replaced message's run
    finally:
        store.close()


async def test_a_summary_item_can_be_tested_by_a_counterfactual(tmp_path: Path) -> None:
    from agent.evidence import Edit, counterfactual

    store = Store.open(tmp_path / "s.duckdb")
    try:
        def answer(request: ModelRequest) -> str:
            if "Summarise" in request.system_text():
                return "The user's name is Ada."
            if "name?" in request.last_user_text():
                return "Your name is Ada." if "name is Ada" in request.system_text() else "I do not know."
            return "noted"

        model = FunctionModel(answer)
        agent = session(llm=model, recorder=Recorder(store))
        await chat(agent, "Call me Ada, please.")
        await agent.compact()
        done: list[Any] = []
        agent.listeners.append(done.append)
        await chat(agent, "what is my name?")
        run_id = next(e.run_id for e in done if type(e).__name__ == "TurnDone")
        summary = next(ci for ci in agent.history if ci.item.kind == "summary")
        result = await counterfactual(store, run_id, edits=Edit.remove(summary.item.hash), provider=model, repeats=2)
        assert result.verdict == "flips"  # without the summary the answer changes: the summary carried it
    finally:
        store.close()

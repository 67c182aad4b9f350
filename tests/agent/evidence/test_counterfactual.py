"""Counterfactuals: the snapshot of a stage edited, the rest of the run again against a live provider."""

from __future__ import annotations

from typing import Any

import pytest

from agent.demo import demo_registry
from agent.evidence import Edit, EditError, counterfactual, exact, verdict_of
from agent.providers._demo import OfflineDemoModel
from tracer import NotFoundError, Store


def _hash(store: Store, run_id: str, text: str) -> str:
    store.flush()
    data = store.load_run(run_id)
    return next(h for h, item in data.items.items() if item.text == text)


async def test_removing_the_stale_fact_flips_the_demo_answer_and_each_re_run_is_a_fork(store: Store, demo: Any) -> None:
    wrong = demo.results[1]
    fact = _hash(store, wrong.run_id, "Maya lives in Berlin.")
    result = await counterfactual(store, wrong.run_id, edits=Edit.remove(fact[:10]), stage=1,
                                  provider=OfflineDemoModel(), tools=demo_registry())
    assert result.verdict == "flips" and result.changed == 3
    assert all("Lisbon" in o.answer for o in result.outcomes)
    first = store.load_run(wrong.run_id).inferences()[0]
    for outcome in result.outcomes:
        fork = store.get_run(outcome.run_id)
        assert fork.forked_from_run == wrong.run_id and fork.forked_from_stage == first.id
        assert fork.fork_edit is not None and fork.fork_edit["edits"][0]["item"] == fact
        assert "counterfactual" in fork.labels
        sent = store.load_run(outcome.run_id).snapshot(store.load_run(outcome.run_id).inferences()[0].id)
        assert fact not in {e.item_hash for e in sent}
        assert outcome.frozen_calls == 1 and outcome.new_calls == 0  # the same call: the recorded result


async def test_a_benign_item_holds_and_a_replacement_is_used(store: Store, demo: Any) -> None:
    wrong = demo.results[1]
    coffee = _hash(store, wrong.run_id, "Maya takes her coffee black.")
    holds = await counterfactual(store, wrong.run_id, edits=Edit.remove(coffee), provider=OfflineDemoModel(),
                                 tools=demo_registry(), repeats=2)
    assert holds.verdict == "holds" and [o.result for o in holds.outcomes] == ["same", "same"]
    fact = _hash(store, wrong.run_id, "Maya lives in Berlin.")
    moved = await counterfactual(store, wrong.run_id, edits=Edit.replace(fact, "Maya lives in Porto."),
                                 provider=OfflineDemoModel(), tools=demo_registry(), repeats=1)
    assert moved.verdict == "flips" and "Porto" in moved.outcomes[0].answer


async def test_counterfactual_on_a_run_with_parallel_calls_and_a_later_stage(store: Store, demo: Any) -> None:
    third = demo.results[2]  # two check_availability calls in one batch
    data = store.load_run(third.run_id)
    result_hash = next(h for h, i in data.items.items() if i.kind == "tool_result" and "Thursday" in i.text)
    result = await counterfactual(store, third.run_id, edits=Edit.remove(result_hash), stage=2,
                                  provider=OfflineDemoModel(), tools=demo_registry(), repeats=1)
    # the model sees no Thursday result at turn 2; turn 1 was served from the recording
    assert result.stage_name == "turn 2"
    assert "Thursday" not in result.outcomes[0].answer and result.verdict == "flips"
    fork = store.load_run(result.outcomes[0].run_id)
    turn1 = fork.inferences()[0]
    assert turn1.attributes["provider"] == "recording"


async def test_history_items_from_an_earlier_run_can_be_removed(store: Store, make_agent: Any, live: Any) -> None:
    agent = make_agent(facts=[])
    await agent.run("I moved to Lisbon")
    second = await agent.run("Weather at home?")
    assert second.answer == "Lisbon: sun."
    said = _hash(store, second.run_id, "I moved to Lisbon")
    result = await counterfactual(store, second.run_id, edits=Edit.remove(said), provider=live(),
                                  tools=list(agent.tools.values()))
    assert result.verdict == "flips"
    assert [o.answer for o in result.outcomes] == ["nowhere: sun."] * 3


async def test_a_non_durable_tool_never_runs_twice_for_the_same_call(
    store: Store, make_agent: Any, counter: Any, live: Any
) -> None:
    original = await make_agent(durable=False).run("Weather at home?")
    assert counter.runs == [("weather", {"city": "Berlin"})]
    fact = _hash(store, original.run_id, "The user lives in Berlin.")
    tools = make_agent(durable=False).tools.values()  # the real (non-durable) weather tool
    # default policy: a new call to a non-durable tool is refused, never executed
    refused = await counterfactual(store, original.run_id, edits=Edit.replace(fact, "The user lives in Oslo."),
                                   provider=live(), tools=list(tools))
    assert counter.runs == [("weather", {"city": "Berlin"})]
    assert all("not durable" in o.answer for o in refused.outcomes)
    # "all": the new call runs once, and the three re-runs share its result
    allowed = await counterfactual(store, original.run_id, edits=Edit.replace(fact, "The user lives in Oslo."),
                                   provider=live(), tools=list(tools), new_calls="all", repeats=3)
    assert counter.runs == [("weather", {"city": "Berlin"}), ("weather", {"city": "Oslo"})]
    assert [o.answer for o in allowed.outcomes] == ["Oslo: sun."] * 3
    # the recorded call (Berlin) is frozen, never executed again
    same = await counterfactual(store, original.run_id, edits=Edit.replace(fact, "The user lives in Berlin!"),
                                provider=live(), tools=list(tools), new_calls="all")
    assert same.verdict == "holds" and len(counter.runs) == 2


async def test_bad_edits_and_stages_are_named(store: Store, demo: Any) -> None:
    wrong = demo.results[1].run_id
    with pytest.raises(EditError, match="no item named 'zzz'"):
        await counterfactual(store, wrong, edits=Edit.remove("zzz"), stage=1, provider=OfflineDemoModel())
    with pytest.raises(NotFoundError, match="no inference"):
        await counterfactual(store, wrong, edits=Edit.remove("a"), stage="s-nope", provider=OfflineDemoModel())
    settings = next(h for h, i in store.load_run(wrong).items.items() if i.kind == "settings")
    with pytest.raises(EditError, match="settings cannot be removed"):
        await counterfactual(store, wrong, edits=Edit.remove(settings), provider=OfflineDemoModel())
    with pytest.raises(EditError, match="JSON object"):
        await counterfactual(store, wrong, edits=Edit.replace(settings, "not json"), provider=OfflineDemoModel())


async def test_removing_a_tool_definition_means_the_tool_is_not_offered(store: Store, demo: Any) -> None:
    wrong = demo.results[1].run_id
    definition = next(h for h, i in store.load_run(wrong).items.items() if i.kind == "tool_definition")
    result = await counterfactual(store, wrong, edits=Edit.remove(definition), provider=OfflineDemoModel(),
                                  repeats=1)
    assert result.verdict == "flips"
    fork = store.load_run(result.outcomes[0].run_id)
    assert not any(s.kind == "tool" for s in fork.stages)


def test_verdicts() -> None:
    assert verdict_of(["changed", "changed", "same"]) == "flips"
    assert verdict_of(["changed", "same", "same"]) == "inconclusive"
    assert verdict_of(["same", "same", "same"]) == "holds"
    assert verdict_of(["same", "error", "same"]) == "inconclusive"
    assert verdict_of(["changed"]) == "flips"
    assert exact("a", "a") and not exact("a", "b")

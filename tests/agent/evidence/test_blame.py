"""Blame: the items `why` names, tested with counterfactuals; the culprits ranked with their verdicts."""

from __future__ import annotations

from typing import Any

from agent.demo import demo_registry, load_scenario
from agent.evidence import blame
from agent.providers._demo import OfflineDemoModel
from tracer import Store


async def test_blame_finds_the_planted_stale_fact_in_the_demo(store: Store, demo: Any) -> None:
    lines: list[str] = []
    report = await blame(store, demo.wrong_run_id, provider=OfflineDemoModel(), tools=demo_registry(),
                         on_progress=lines.append)
    culprits = report.culprits
    # the stale fact first (it came from outside the run); the availability the tool returned is the
    # other thing the answer rests on (with no result, no slot), tested with its call kept
    assert [c.name for c in culprits] == [f"memory:{load_scenario().culprit}", "result:check_availability#1"]
    assert culprits[0].verdict == "flips" and culprits[0].changed == 3 and culprits[0].via == "alone"
    assert culprits[1].action == "nothing" and culprits[1].chain is not None
    assert culprits[1].chain.links[0].kind == "call" and "--replace call:check_availability#1" in culprits[1].chain.try_next
    coffee = next(s for s in report.tested if s.name == "memory:profile.coffee")
    assert coffee.verdict == "holds"
    said = next(s for s in report.tested if s.text.startswith("Quick update"))
    assert said.verdict == "holds"  # what Maya said was in context all along: it was outweighed
    skipped = {s.kind: s.reason for s in report.skipped}
    assert "tool_definition" in skipped and "alternative" in skipped["tool_call"]
    assert any("question" in s.reason for s in report.skipped)
    assert report.groups and lines  # ten suspects: bisected, with progress
    assert all(s.verdict in ("flips", "holds") for s in report.tested)
    assert report.reruns >= 3 * (len(report.groups) + 2) and report.seconds > 0


async def test_blame_tests_each_item_alone_when_there_are_few(store: Store, make_agent: Any, live: Any) -> None:
    agent = make_agent()
    original = await agent.run("Weather at home?")
    report = await blame(store, original.run_id, provider=live(), tools=list(agent.tools.values()), repeats=2,
                         bisect_above=20, include_tool_definitions=True)
    assert not report.groups
    assert all(s.via == "alone" for s in report.tested)
    assert report.culprits[0].name == "memory:profile.city"
    definition = next(s for s in report.tested if s.kind == "tool_definition")
    assert definition.verdict == "flips"  # without the tool, no weather
    assert report.to_dict()["culprits"][0] == report.culprits[0].item_hash


async def test_a_control_that_fails_for_every_suspect_is_said_once_and_not_bisected(tmp_path: Any) -> None:
    """A live model that is not the run's: the control fails where every suspect's re-run would start,
    so no test can conclude anything. Blame said "No single item's edit changes the answer", split
    every group down to single items (a 400-turn session: 830 group tests) and printed the same
    reason once per suspect."""
    from agent import Agent
    from agent.evidence._render import render_blame
    from agent.providers import FunctionModel
    from tracer import Recorder

    with Store.open(tmp_path / "s.duckdb") as store:
        agent = Agent("a", provider=FunctionModel(lambda request: "the recorded answer"), recorder=Recorder(store),
                      session_id="long")
        for n in range(12):
            await agent.run(f"message {n}")
        store.flush()
        last = store.list_runs(limit=1)[0].id
        report = await blame(store, last, provider=FunctionModel(lambda request: "another answer", name="other"))
    assert len(report.tested) > 8 and all(s.verdict == "inconclusive" for s in report.tested)
    assert all("does not give the recorded answer" in s.reason for s in report.tested)
    assert len(report.groups) == 1, "the group whose control failed is not split"
    text = render_blame(report)
    assert "No single item's edit changes the answer" not in text
    assert "Nothing can be concluded" in text
    assert text.count("does not give the recorded answer") == 1, text


async def test_an_item_left_out_and_restored_is_listed_once(tmp_path: Any) -> None:
    """What the window left out is tested by restoring it: it is listed under "Left out", not again
    under "Not tested" (a 400-turn session listed its 783 left-out items twice)."""
    from agent import Agent, ConversationMemory
    from agent.evidence._render import render_blame
    from agent.providers import FunctionModel
    from tracer import Recorder

    with Store.open(tmp_path / "s.duckdb") as store:
        model = FunctionModel(lambda request: "the same answer")
        agent = Agent("a", provider=model, recorder=Recorder(store), session_id="long",
                      memory=ConversationMemory(max_messages=4))
        for n in range(8):
            await agent.run(f"message number {n}")
        store.flush()
        report = await blame(store, store.list_runs(limit=1)[0].id, provider=model, repeats=1)
    assert {s.item_hash for s in report.left_out} & {s.item_hash for s in report.skipped}
    text = render_blame(report)
    assert text.count("'message number 0'") == 1, text

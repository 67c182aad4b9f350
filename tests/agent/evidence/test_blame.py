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

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
    assert [c.source for c in culprits] == [f"memory {load_scenario().culprit}"]
    assert culprits[0].verdict == "flips" and culprits[0].changed == 3 and culprits[0].via == "alone"
    coffee = next(s for s in report.tested if s.source == "memory profile.coffee")
    assert coffee.verdict == "holds"
    said = next(s for s in report.tested if s.text.startswith("Quick update"))
    assert said.verdict == "holds"  # what Maya said was in context all along: it was outweighed
    skipped = {s.kind: s.reason for s in report.skipped}
    assert "settings" in skipped and "tool_definition" in skipped and "tool_call" in skipped
    assert any("question" in s.reason for s in report.skipped)
    assert report.groups and lines  # ten suspects: bisected, with progress
    assert all(s.verdict in ("flips", "holds") for s in report.tested)


async def test_blame_tests_each_item_alone_when_there_are_few(store: Store, make_agent: Any, live: Any) -> None:
    agent = make_agent()
    original = await agent.run("Weather at home?")
    report = await blame(store, original.run_id, provider=live(), tools=list(agent.tools.values()), repeats=2,
                         bisect_above=20, include_tool_definitions=True)
    assert not report.groups
    assert all(s.via == "alone" for s in report.tested)
    assert report.culprits[0].source == "memory profile.city"
    definition = next(s for s in report.tested if s.kind == "tool_definition")
    assert definition.verdict == "flips"  # without the tool, no weather
    assert report.to_dict()["culprits"][0] == report.culprits[0].item_hash

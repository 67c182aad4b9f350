"""Snapshot tests: the demo session and a scripted agent, pinned as flowcharts.

The snapshots live in ``__snapshots__/test_demo_snapshots/`` and are reviewed like code: when the
loop, the prompt composer or the demo changes what an agent sees or does, the diff of these files
shows exactly which stage changed. Refresh them after an intended change with
``pytest tests/agent/test_demo_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

from typing import Any

from agent import Agent, tool
from agent.demo import DemoResult, run_demo
from agent.errors import ProviderError
from agent.providers import ScriptedModel, calls
from agent.providers._demo import OfflineDemoModel
from tracer import Recorder, Store


async def _demo(store: Store) -> DemoResult:
    result = await run_demo(store, provider=OfflineDemoModel(), echo=lambda _line: None, session_id="maya-snapshot")
    assert [r.status for r in result.results] == ["answered", "answered", "answered"]
    return result


async def test_the_demo_session(footprint_snapshot: Any, footprint_store: Store) -> None:
    """Maya's three turns: the move to Lisbon, the wrong "near your home in Berlin", the parallel batch."""
    result = await _demo(footprint_store)
    assert footprint_snapshot == [footprint_store.load_run(r.run_id) for r in result.results]


async def test_the_demo_blame_forks(footprint_snapshot: Any, footprint_store: Store) -> None:
    """The counterfactual runs the demo's blame forks from the wrong answer, each with its edit."""
    result = await _demo(footprint_store)
    turns = {r.run_id for r in result.results}
    forks = [r for r in footprint_store.list_runs(limit=1000) if r.id not in turns]
    assert forks and all(r.forked_from_run == result.wrong_run_id for r in forks)
    ordered = sorted(forks, key=lambda r: (r.started_at, r.id))
    assert footprint_snapshot == [footprint_store.load_run(r.id) for r in ordered]


@tool()
async def get_weather(city: str) -> dict[str, Any]:
    """The current weather in a city.

    Args:
        city: the city name
    """
    if city == "Atlantis":
        raise LookupError(f"no weather station in {city}")
    return {"city": city, "sky": "clear", "celsius": 21}


async def test_a_scripted_agent_with_a_parallel_batch_and_a_failing_tool(
    footprint_snapshot: Any, footprint_store: Store, footprint_recorder: Recorder
) -> None:
    model = ScriptedModel([
        calls(("get_weather", {"city": "Lisbon"}), ("get_weather", {"city": "Atlantis"})),
        "Lisbon is clear at 21 °C; there is no weather station in Atlantis.",
    ])
    agent = Agent("forecaster", provider=model, tools=[get_weather], recorder=footprint_recorder,
                  persona="You report the weather briefly.", session_id="forecast-1")
    result = await agent.run("Weather in Lisbon and Atlantis?")
    assert result.status == "answered"
    assert footprint_snapshot == footprint_store.load_run(result.run_id)


async def test_a_run_whose_provider_fails(footprint_snapshot: Any, footprint_store: Store,
                                          footprint_recorder: Recorder) -> None:
    model = ScriptedModel([ProviderError("the model server answered 503", provider="scripted")])
    agent = Agent("forecaster", provider=model, recorder=footprint_recorder, session_id="forecast-2")
    result = await agent.run("Weather in Lisbon?")
    assert result.status == "failed"
    assert footprint_snapshot == footprint_store.load_run(result.run_id)

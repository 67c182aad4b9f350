"""The demo scenario end to end with the offline demo model."""

from __future__ import annotations

from pathlib import Path

from agent.demo import load_scenario, run_demo
from agent.providers._demo import OfflineDemoModel
from tracer import Store


async def test_demo_records_a_wrong_answer_and_why_names_the_stale_fact(tmp_path: Path) -> None:
    lines: list[str] = []
    with Store.open(tmp_path / "demo.duckdb") as store:
        result = await run_demo(store, provider=OfflineDemoModel(), echo=lines.append, session_id="maya-test")
        assert [r.status for r in result.results] == ["answered", "answered", "answered"]
        assert "Lisbon" in result.results[0].answer
        assert "Berlin" in result.results[1].answer
        assert result.wrong_run_id == result.results[1].run_id
        assert result.evidence is not None
        assert [c[0] for c in result.culprits] == [load_scenario().culprit]
        # blame proves it: removing the stale fact flips the answer (it is named first: the cause; the
        # availability the tool returned is the other thing the answer rests on)
        assert result.proven[0] == (f"memory:{load_scenario().culprit}", "flips")
        # the evidence crosses into the session's first run: Maya's "moved to Lisbon" message
        assert result.results[0].run_id in result.evidence.runs
        runs = store.session_runs("maya-test")
        assert len(runs) == 3 and all("offline-demo" in r.labels for r in runs)
        third = store.load_run(result.results[2].run_id)
        assert sum(1 for s in third.stages if s.kind == "tool") == 2  # a parallel batch
    assert any("profile.home_city" in line for line in lines)


async def test_offline_demo_model_answers_from_context() -> None:
    """Removing the memory fact changes where it suggests meeting: it reads its context."""
    from agent import Agent, Fact, InMemoryFacts
    from agent.demo import check_availability

    async def city_answer(facts: list[Fact]) -> str:
        agent = Agent("a", provider=OfflineDemoModel(), tools=[check_availability],
                      facts=InMemoryFacts({"u": facts}), user_id="u")
        await agent.run("I moved to Lisbon")
        result = await agent.run("Find a free slot tomorrow to meet with Anna near home")
        return result.answer

    stale = [Fact("profile.home_city", "Maya lives in Berlin.")]
    assert "Berlin" in await city_answer(stale)
    assert "Lisbon" in await city_answer([])


async def test_the_context_list_cuts_no_text_without_an_ellipsis(tmp_path: Path) -> None:
    lines: list[str] = []
    with Store.open(tmp_path / "demo.duckdb") as store:
        await run_demo(store, provider=OfflineDemoModel(), echo=lines.append, session_id="maya-cut", prove=False)
    listed = [line for line in lines if " <- " in line]
    base = next(line for line in listed if "You are Maya's personal assistant" in line)
    assert "…" in base, base
    assert not any("manage her calendar and h\"" in line for line in listed)

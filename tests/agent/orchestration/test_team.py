"""MultiAgentOrchestrator: teams, routers, the default team, unknown names, and the recorded team run."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent.orchestration import AgentConfig, AgentOrchestrator, MultiAgentOrchestrator, Team, TeamError
from agent.providers import FunctionModel, ModelRequest
from tracer import Recorder, Store, child_run_ids, why


def member(name: str, recorder: Recorder | None = None) -> AgentOrchestrator:
    def answer(request: ModelRequest) -> str:
        shared = sorted(ci.item.text for ci in request.context if ci.item.kind == "memory")
        return f"{name} answers {request.last_user_text()!r} knowing {shared}"

    return AgentOrchestrator(AgentConfig(name=name, system_prompt=f"You are {name}.",
                                         provider=FunctionModel(answer), model="m", recorder=recorder))


def by_keyword(message: str, context: dict[str, Any]) -> str:
    return "billing" if "invoice" in message else "tech"


def support(recorder: Recorder | None = None, router: Any = by_keyword) -> Team:
    return Team("support", [member("billing", recorder), member("tech", recorder)], router,
                shared_context={"product": "footprint"})


async def test_execute_routes_to_the_agent_the_router_names_with_the_merged_context() -> None:
    teams = MultiAgentOrchestrator()
    teams.register_team(support())
    context = await teams.execute("Where is my invoice?", context={"plan": "pro"})
    assert context.agent == "billing" and context.status == "completed"
    assert context.response == ("billing answers 'Where is my invoice?' knowing "
                                "['plan: pro', 'product: footprint']")
    assert context.metadata["team"] == "support"
    assert (await teams.execute("The app crashes")).agent == "tech"


async def test_teams_agents_and_the_default_team() -> None:
    teams = MultiAgentOrchestrator()
    teams.register_team(support())
    teams.register_team(Team("sales", [member("closer")], lambda m, c: "closer"))
    assert teams.teams() == ["support", "sales"] and teams.agents("support") == ["billing", "tech"]
    assert (await teams.execute("hello")).agent == "tech"  # the first registered is the default
    teams.set_default_team("sales")
    assert (await teams.execute("hello")).agent == "closer"
    assert (await teams.execute("invoice", team="support")).agent == "billing"


async def test_an_unknown_team_or_agent_is_a_clear_error() -> None:
    teams = MultiAgentOrchestrator()
    with pytest.raises(TeamError, match="no team is registered"):
        await teams.execute("hi")
    teams.register_team(support(router=lambda m, c: "legal"))
    with pytest.raises(TeamError, match="no team named 'nope'; the teams: support"):
        await teams.execute("hi", team="nope")
    with pytest.raises(TeamError, match="named agent 'legal', which the team does not have; its agents: billing, tech"):
        await teams.execute("hi")
    with pytest.raises(TeamError, match="no team named"):
        teams.agents("nope")
    with pytest.raises(TeamError, match="two agents named tech"):
        Team("twins", [member("tech"), member("tech")], by_keyword)
    with pytest.raises(TeamError, match="has no agents"):
        Team("empty", [], by_keyword)


async def test_a_failing_router_names_the_team_and_an_async_router_works() -> None:
    def broken(message: str, context: dict[str, Any]) -> str:
        raise KeyError("route table")

    async def slow(message: str, context: dict[str, Any]) -> str:
        return "billing"

    teams = MultiAgentOrchestrator()
    teams.register_team(support(router=broken))
    with pytest.raises(TeamError, match="the router of team support failed: KeyError"):
        await teams.execute("hi")
    teams.register_team(support(router=slow))
    assert (await teams.execute("hi")).agent == "billing"


async def test_a_recorded_team_run_is_the_parent_of_the_routed_run(store: Store) -> None:
    recorder = Recorder(store)
    teams = MultiAgentOrchestrator(recorder=recorder, session_id="s-team")
    teams.register_team(support(recorder))
    context = await teams.execute("Where is my invoice?")
    store.flush()
    team_run = store.load_run(context.metadata["team_run"])
    assert team_run.run.agent == "support" and team_run.run.status == "answered"
    assert team_run.run.output == context.response
    [(stage_id, child_id)] = child_run_ids(team_run)
    assert child_id == context.run_id
    assert team_run.stage(stage_id).kind == "subagent" and team_run.stage(stage_id).name == "billing"
    child = store.load_run(child_id)
    assert child.run.attributes["parent_run"] == team_run.run.id
    assert child.run.attributes["parent_stage"] == stage_id and child.run.attributes["parent_agent"] == "support"
    # the shared context reached the child as items whose origin is the team run's input stage
    input_stage = next(s for s in team_run.stages if s.kind == "input")
    [inference] = child.inferences()
    shared = [e for e in child.snapshot(inference.id) if child.items[e.item_hash].kind == "memory"]
    assert [child.items[e.item_hash].text for e in shared] == ["product: footprint"]
    assert {(e.origin.run_id, e.origin.stage_id, e.origin.source) for e in shared} == {
        (team_run.run.id, input_stage.id, "shared.product")}
    # why walks from the team's answer into the routed agent's run
    evidence = why(store, team_run.run.id)
    assert evidence.runs == [team_run.run.id, child_id]
    assert any(n.item_kind == "memory" and n.origin and n.origin.run_id == team_run.run.id for n in evidence.items())


async def test_a_router_naming_an_unknown_agent_is_recorded_as_a_failed_team_run(store: Store) -> None:
    teams = MultiAgentOrchestrator(recorder=Recorder(store))
    teams.register_team(support(router=lambda m, c: "legal"))
    with pytest.raises(TeamError):
        await teams.execute("hi")
    store.flush()
    [run] = store.list_runs()
    data = store.load_run(run.id)
    assert run.status == "failed" and "legal" in (run.error or "")
    assert [s.kind for s in data.stages] == ["input", "error"]


class _Interrupt(BaseException):
    """Not an Exception: what a KeyboardInterrupt inside a router looks like."""


async def test_a_team_cancelled_while_its_router_runs_ends_its_run_cancelled(store: Store) -> None:
    started = asyncio.Event()

    async def slow_router(message: str, context: dict[str, Any]) -> str:
        started.set()
        await asyncio.sleep(100)
        return "tech"

    teams = MultiAgentOrchestrator(recorder=Recorder(store))
    teams.register_team(support(router=slow_router))
    task = asyncio.ensure_future(teams.execute("hi"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    store.flush()
    [run] = store.list_runs()
    assert run.status == "cancelled" and run.ended_at is not None
    assert run.attributes["stop_reason"] == "cancelled" and "support" in (run.error or "")
    assert [s.kind for s in store.load_run(run.id).stages] == ["input", "error"]


async def test_a_base_exception_in_the_router_ends_the_team_run_failed_and_is_raised(store: Store) -> None:
    def interrupting_router(message: str, context: dict[str, Any]) -> str:
        raise _Interrupt("stopped by hand")

    teams = MultiAgentOrchestrator(recorder=Recorder(store))
    teams.register_team(support(router=interrupting_router))
    with pytest.raises(_Interrupt):
        await teams.execute("hi")
    store.flush()
    [run] = store.list_runs()
    assert run.status == "failed" and run.ended_at is not None
    assert run.attributes["stop_reason"] == "interrupted" and "_Interrupt: stopped by hand" in (run.error or "")
    assert [s.kind for s in store.load_run(run.id).stages] == ["input", "error"]

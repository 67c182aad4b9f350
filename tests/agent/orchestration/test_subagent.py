"""Agents as tools of other agents: the sub-agent call, its recorded child run, `why` across the
boundary, and `footprint show` drawing the team as one flowchart (pinned by a snapshot)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from agent import Tool
from agent.orchestration import AgentConfig, AgentOrchestrator, agent_tool
from agent.providers import FunctionModel, ModelRequest, ScriptedModel, calls
from tracer import Recorder, RunData, Store, child_run_ids, child_runs, why
from tracer import cli as tracer_cli
from tracer._render import show_run

from .conftest import QUESTION, WRONG_FACT, team_of_three


async def test_a_sub_agent_call_returns_its_response_and_records_a_child_run(store: Store) -> None:
    team = team_of_three(Recorder(store))
    context = await team.lead.execute(QUESTION)
    assert context.response == f"Report. Notes: {WRONG_FACT}"
    assert [t.name for t in context.tool_calls] == ["ask_researcher", "ask_writer"]
    store.flush()
    lead = store.load_run(context.run_id or "")
    links = child_run_ids(lead)
    assert [store.get_run(child).agent for _, child in links] == ["researcher", "writer"]
    for stage_id, child in links:
        stage = lead.stage(stage_id)
        tool_stage = lead.stage(stage.parent_id or "")
        assert stage.kind == "subagent" and tool_stage.kind == "tool"
        assert stage.attributes["child_status"] == "completed"
        attrs = store.get_run(child).attributes
        assert (attrs["parent_run"], attrs["parent_stage"], attrs["parent_agent"]) == (lead.run.id, stage_id, "lead")
    assert set(child_runs(store, lead)) == {c for _, c in links}


async def test_why_walks_from_the_final_answer_into_the_child_runs(store: Store) -> None:
    team = team_of_three(Recorder(store))
    context = await team.lead.execute(QUESTION)
    store.flush()
    evidence = why(store, context.run_id or "")
    agents = [store.get_run(r).agent for r in evidence.runs]
    assert agents[0] == "lead" and set(agents) == {"lead", "researcher", "writer"}
    planted = [n for n in evidence.items() if n.item_kind == "tool_result" and n.text == WRONG_FACT]
    assert planted and planted[0].origin is not None
    research_run = store.load_run(planted[0].origin.run_id or "")
    assert research_run.run.agent == "researcher"
    assert research_run.stage(planted[0].origin.stage_id or "").name == "search"


async def test_a_failing_sub_agent_is_an_error_result_the_caller_sees(store: Store) -> None:
    helper = AgentOrchestrator(AgentConfig(name="helper", system_prompt="p", provider=ScriptedModel([]), model="m",
                                           recorder=Recorder(store)))

    def lead_model(request: ModelRequest) -> Any:
        results = [ci.item.body for ci in request.context if ci.item.kind == "tool_result"]
        return f"saw: {results[0]['content']}" if results else calls(("ask_helper", {"task": "help"}))

    lead = AgentOrchestrator(AgentConfig(name="lead", system_prompt="p", provider=FunctionModel(lead_model),
                                         model="m", tools=[agent_tool(helper)], recorder=Recorder(store)))
    context = await lead.execute("go")
    assert context.status == "completed" and context.tool_calls[0].success is False
    assert "agent helper failed" in context.response and "script has 0 responses" in context.response
    store.flush()
    lead_run = store.load_run(context.run_id or "")
    [(stage_id, child)] = child_run_ids(lead_run)
    assert lead_run.stage(stage_id).status == "error" and store.get_run(child).status == "failed"


class _Interrupt(BaseException):
    """Not an Exception: what a KeyboardInterrupt or a SystemExit inside a sub-agent looks like."""


async def test_a_base_exception_in_a_sub_agent_closes_the_stage_its_child_run_names(store: Store) -> None:
    def interrupt(arguments: dict[str, Any]) -> str:
        raise _Interrupt("stopped by hand")

    stop = Tool("stop", "Stop", {"type": "object", "properties": {}}, interrupt)
    helper = AgentOrchestrator(AgentConfig(name="helper", system_prompt="p", provider=ScriptedModel([calls(("stop", {}))]),
                                           model="m", tools=[stop], recorder=Recorder(store)))
    lead = AgentOrchestrator(AgentConfig(name="lead", system_prompt="p",
                                         provider=ScriptedModel([calls(("ask_helper", {"task": "help"}))]),
                                         model="m", tools=[agent_tool(helper)], recorder=Recorder(store)))
    with pytest.raises(_Interrupt):
        await lead.execute("go")
    store.flush()
    runs = {r.agent: r for r in store.list_runs()}
    child = runs["helper"]
    lead_run = store.load_run(runs["lead"].id)
    stage = lead_run.stage(child.attributes["parent_stage"])
    assert stage.kind == "subagent" and stage.status == "error"
    assert "_Interrupt: stopped by hand" in (stage.error or "")


async def test_sub_agents_work_unrecorded() -> None:
    team = team_of_three(None)
    context = await team.lead.execute(QUESTION)
    assert context.response == f"Report. Notes: {WRONG_FACT}" and context.run_id
    assert team.search_calls == [QUESTION]


def test_agent_tool_is_durable_only_when_the_sub_agents_tools_are() -> None:
    team = team_of_three(None)
    assert agent_tool(team.writer).durable is True  # no tools
    assert agent_tool(team.researcher).durable is True  # search is durable
    team.researcher.update_config(tools=[t for t in team.researcher.config.tools] + [
        agent_tool(AgentOrchestrator(AgentConfig(name="x", system_prompt="p", provider=ScriptedModel([]), model="m",
                                                 tools=[_side_effect()])))])
    assert agent_tool(team.researcher).durable is False
    assert agent_tool(team.writer, name="write", description="Writes").name == "write"


def _side_effect() -> Any:
    from agent import Tool

    return Tool("send", "Send mail", {"type": "object", "properties": {}}, lambda a: "sent")


def timeless(data: RunData) -> RunData:
    """The run with every time fixed (each stage 1 ms), so its rendering is the same on every test run."""
    run = dataclasses.replace(data.run, started_at=0.0, ended_at=0.001 * len(data.stages))
    stages = [dataclasses.replace(s, started_at=0.0, ended_at=0.001) for s in data.stages]
    return dataclasses.replace(data, run=run, stages=stages)


def normalized(text: str) -> str:
    """Ids (generated per run) replaced by R1, S1, ... in order of appearance, the local time by <time>."""
    names: dict[str, str] = {}

    def name(match: re.Match[str]) -> str:
        value = match.group(0)
        if value not in names:
            prefix = value[0].upper()
            names[value] = f"{prefix}{sum(1 for v in names if v[0] == value[0]) + 1}"
        return names[value]

    text = re.sub(r"\b[rs]-[0-9a-f]{12}-[0-9a-f]{10}\b", name, text)
    return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", "<time>", text) + "\n"


async def test_footprint_show_draws_the_team_as_one_flowchart(tmp_path: Path, footprint_snapshot: Any) -> None:
    path = tmp_path / "show.duckdb"
    with Store.open(path) as store:
        context = await team_of_three(Recorder(store)).lead.execute(QUESTION)
    group = click.Group()
    tracer_cli.register(group)
    result = CliRunner().invoke(group, ["show", context.run_id or "", "--db", str(path)])
    assert result.exit_code == 0, result.output
    assert "team     3 agents: lead, researcher, writer" in result.output
    with Store.open(path, read_only=True) as store:  # what the command printed, with the times fixed
        data = store.load_run(context.run_id or "")
        children = {r: timeless(d) for r, d in child_runs(store, data).items()}
    drawn = show_run(timeless(data), children)
    def outline(lines: list[str]) -> list[list[str]]:
        return [line.split()[:3] for line in lines if not line.startswith("started")]

    assert outline(drawn) == outline(result.output.splitlines())
    assert footprint_snapshot == normalized("\n".join(drawn))
    alone = CliRunner().invoke(group, ["show", context.run_id or "", "--db", str(path), "--no-team"])
    assert "╭─ agent" not in alone.output and "subagent" in alone.output

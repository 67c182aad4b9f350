"""A team's runs in the explorer: Enter on a ``subagent`` stage opens the run that agent made."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.orchestration import AgentConfig, AgentOrchestrator, agent_tool
from agent.providers import FunctionModel, ModelRequest, ModelResponse, calls
from explorer import ExplorerApp
from explorer.components.flowchart import Flowchart
from explorer.components.runs_table import RunsTable
from explorer.components.snapshot_view import SnapshotView
from explorer.components.stage_detail import StageDetail
from explorer.screens.run import RunScreen
from tracer import Recorder, Store


def lead_model(request: ModelRequest) -> ModelResponse | str:
    results = [ci.item.body["content"] for ci in request.context if ci.item.kind == "tool_result"]
    return f"lead: {results[0]}" if results else calls(("ask_helper", {"task": "help"}))


async def test_enter_on_a_subagent_stage_opens_the_child_run(
    open_app: Callable[..., ExplorerApp], tmp_path: Path, settle: Any
) -> None:
    path = tmp_path / "team.duckdb"
    with Store.open(path) as store:
        recorder = Recorder(store)
        helper = AgentOrchestrator(AgentConfig(name="helper", system_prompt="p", model="m", recorder=recorder,
                                               provider=FunctionModel(lambda r: "helped")))
        lead = AgentOrchestrator(AgentConfig(name="lead", system_prompt="p", model="m", recorder=recorder,
                                             provider=FunctionModel(lead_model), tools=[agent_tool(helper)]))
        context = await lead.execute("go")
    child = helper.last_execution.run_id if helper.last_execution else None
    app = open_app(path, read_only=True, run_id=context.run_id)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen)
        flowchart = screen.query_one(Flowchart)
        assert flowchart.data is not None
        subagent = next(s for s in flowchart.data.stages if s.kind == "subagent")
        assert flowchart.select(subagent.id)
        flowchart.focus()
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, RunScreen) and app.screen.run_id == child
        await pilot.press("escape")
        assert app.screen is screen


async def test_a_team_run_draws_its_agents_runs_inside_its_flowchart(
    open_app: Callable[..., ExplorerApp], team_path: Path, settle: Any
) -> None:
    app = open_app(team_path, read_only=True, run_id="r-000001")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen)
        chart = screen.query_one(Flowchart)
        assert chart.flow is not None and set(screen.team) == {"r-000002", "r-000003", "r-000004"}
        text = chart.flow.text()
        assert text.count("╭─ agent researcher") == 2 and text.count("╭─ agent writer") == 1
        assert {s.run_id for s in chart.stages.values()} == {"r-000001", "r-000002", "r-000003", "r-000004"}
        assert len([s for s in chart.stages.values() if s.run_id == "r-000002"]) > 50
        # the researcher's long run is read a stage at a time: its tenth call is read when selected
        researcher = screen.team["r-000002"]
        assert "s-000038" not in researcher.read
        assert chart.select("s-000038")
        await settle(pilot)
        assert "s-000038" in researcher.read and researcher.snapshot("s-000038")
        view = screen.query_one(SnapshotView)  # the researcher's own snapshot, read from its run
        assert view.stage is not None and view.stage.id == "s-000038" and view.data is researcher
        assert not view.waiting and view.table.row_count == len(researcher.snapshot("s-000038"))
        # its items are named like a short run's (read whole once on a worker, only the names kept)
        task = next(e.item_hash for e in researcher.snapshot("s-000038") if researcher.items[e.item_hash].kind == "user")
        assert screen.query_one(StageDetail).names.get(task) == "input"
        title = str(screen.query_one("#run-title").render())
        assert "▸ researcher" in title and "Read: 3 pages" in title
        # out of the frame: the title is the lead's again
        chart.select("s-000088")
        await settle(pilot)
        assert "▸" not in str(screen.query_one("#run-title").render())


async def test_the_runs_table_lists_the_team_run_and_x_shows_its_agents_runs(
    open_app: Callable[..., ExplorerApp], team_path: Path, settle: Any
) -> None:
    app = open_app(team_path, read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(RunsTable)
        # the researcher's decision (r-000004) started last, but it is the lead's run a person made
        assert table.row_count == 1 and table.current_run is not None and table.current_run.id == "r-000001"
        await pilot.press("x")
        await settle(pilot)
        assert table.row_count == 4 and table.current_run is not None and table.current_run.id == "r-000004"
        await pilot.press("x")
        await settle(pilot)
        assert table.row_count == 1

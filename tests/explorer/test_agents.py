"""The agents panel: a host's stored agents, and the picked agent's recent runs (enter opens one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent import Agent
from agent.providers import FunctionModel
from explorer import ExplorerApp, StoreSource
from explorer.components.agents_table import AgentsTable
from explorer.components.runs_table import RunsTable
from explorer.screens.agents import AgentsScreen
from explorer.screens.run import RunScreen
from hosting import HostClientError
from tracer import Recorder, Store

AGENTS = [
    {"id": "coder", "name": "Code Agent", "systemPrompt": "You write code.", "provider": "default",
     "model": "default", "config": {"emoji": "💻"}, "updatedAt": 1767600000.0},
    {"id": "research", "name": "Research Agent", "systemPrompt": "You research things.", "provider": "other",
     "model": "big-2", "config": {}, "updatedAt": 1767600000.0},
]


class FakeHost:
    """The part of a host link the panel uses."""

    def __init__(self, agents: list[dict[str, Any]] | None) -> None:
        self._agents = agents

    def agents(self) -> list[dict[str, Any]]:
        if self._agents is None:
            raise HostClientError("this host serves no stored agents (HTTP 404)", status=404)
        return self._agents


async def _record(store: Store) -> None:
    model = FunctionModel(lambda r: f"echo: {r.last_user_text()}", name="echo")
    for agent_id, message in (("research", "first question"), ("coder", "fix it"), ("research", "second question")):
        agent = Agent(agent_id, provider=model, recorder=Recorder(store), labels=("gateway", f"agent:{agent_id}"))
        await agent.run(message)
    store.flush()


async def test_the_panel_lists_agents_and_opens_the_picked_ones_runs(tmp_path: Path, settle: Any) -> None:
    store = Store.open(tmp_path / "fp.duckdb")
    await _record(store)
    app = ExplorerApp(StoreSource(store), host=FakeHost(AGENTS), poll_interval=None)
    async with app.run_test(size=(110, 30)) as pilot:
        await settle(pilot)
        await pilot.press("g")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, AgentsScreen)
        assert list(screen.agents) == ["coder", "research"]
        runs = screen.query_one(RunsTable)
        assert screen.agent_id == "coder" and [r.input for r in runs.runs.values()] == ["fix it"]
        await pilot.press("down")
        await settle(pilot)
        assert screen.agent_id == "research"
        assert [r.input for r in runs.runs.values()] == ["second question", "first question"]
        runs.focus()
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, RunScreen)
    store.close()


async def test_a_host_without_a_gateway_is_said_so(tmp_path: Path, settle: Any) -> None:
    store = Store.open(tmp_path / "fp.duckdb")
    app = ExplorerApp(StoreSource(store), host=FakeHost(None), poll_interval=None)
    async with app.run_test(size=(110, 30)) as pilot:
        await settle(pilot)
        app.open_agents()
        await settle(pilot)
        title = str(app.screen.query_one("#agents-title").render())
        assert "no stored agents to show" in title and "404" in title
        assert app.screen.query_one(AgentsTable).row_count == 0
    store.close()

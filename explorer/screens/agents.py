"""The agents panel: the host's stored agents, and the recent runs of the one picked."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from tracer import RunFilter, one_line

from .._format import plain, visible
from ..components.agents_table import AgentsTable
from ..components.runs_table import RunsTable


class AgentsScreen(Screen[None]):
    """Stored agents on the left; the picked agent's prompt and its recent runs (enter opens one) on the right."""

    # its own layout here rather than in explorer.tcss: the panel is one file
    DEFAULT_CSS = """
    #agents-table { width: 64; border-right: solid $primary-darken-2; }
    #agents-title { height: auto; max-height: 6; padding: 0 1; background: $boost; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "refresh", "Refresh"),
        Binding("escape", "back", "Back"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.agent_id: str | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="agents-body"):
            yield AgentsTable(self.app.host, id="agents-table")  # type: ignore[attr-defined]
            with Vertical(id="agents-right"):
                yield Static(Text("no agent picked", style="dim"), id="agents-title")
                yield RunsTable(self.app.source, hide=("agent", "cost"), id="agent-runs")  # type: ignore[attr-defined]
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(RunsTable).where = RunFilter(label="\0none")  # nothing until an agent is picked
        self.query_one(AgentsTable).focus()

    def on_agents_table_agent_highlighted(self, message: AgentsTable.AgentHighlighted) -> None:
        agent = message.agent
        if agent["id"] == self.agent_id:
            return
        self.agent_id = agent["id"]
        title = Text()
        title.append(visible(str(agent["name"])), style="bold")
        title.append(visible(f"  {agent['id']} · {agent.get('provider')}/{agent.get('model')}") + "\n", style="dim")
        title.append(one_line(agent.get("systemPrompt") or "(no system prompt)", 300))
        self.query_one("#agents-title", Static).update(title)
        self.query_one(RunsTable).reload(RunFilter(label=f"agent:{agent['id']}"), keep_cursor=False)

    def on_agents_table_load_failed(self, message: AgentsTable.LoadFailed) -> None:
        self.query_one("#agents-title", Static).update(plain(f"no stored agents to show: {message.error}", "red"))

    def on_runs_table_counted(self, message: RunsTable.Counted) -> None:
        message.stop()

    def on_runs_table_run_chosen(self, message: RunsTable.RunChosen) -> None:
        message.stop()
        self.app.open_run(message.run_id)  # type: ignore[attr-defined]

    def action_refresh(self) -> None:
        """Ask the host for its agents again, and check the picked agent's runs."""
        self.query_one(AgentsTable).refresh_agents()
        if self.agent_id is not None:
            self.query_one(RunsTable).check_for_new()

    def action_back(self) -> None:
        """Back to where the panel was opened from."""
        self.app.pop_screen()

    @property
    def agents(self) -> dict[str, Any]:
        """The agents shown, by id."""
        return self.query_one(AgentsTable).agents

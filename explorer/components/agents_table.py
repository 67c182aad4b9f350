"""The host's stored agents (the gateway's ``/api/agents``): name, id, model, last change."""

from __future__ import annotations

from typing import Any

from textual import work
from textual.message import Message
from textual.widgets import DataTable

from .._format import clock, failure, head
from ._keys import MovableTable


class AgentsTable(MovableTable):
    """One row per stored agent, by name; reads them from the host in a worker thread."""

    DEFAULT_CSS = """
    AgentsTable { height: 1fr; }
    """

    class Loaded(Message):
        """The agents were read from the host."""

        def __init__(self, agents: list[dict[str, Any]]) -> None:
            super().__init__()
            self.agents = agents

    class LoadFailed(Message):
        """The host could not be asked (or serves no stored agents)."""

        def __init__(self, error: str) -> None:
            super().__init__()
            self.error = error

    class AgentHighlighted(Message):
        """The cursor moved to the agent ``agent`` (its JSON form)."""

        def __init__(self, agent: dict[str, Any]) -> None:
            super().__init__()
            self.agent = agent

    def __init__(self, host: Any, *, id: str | None = None) -> None:
        super().__init__(cursor_type="row", id=id)
        self.host = host
        self.agents: dict[str, dict[str, Any]] = {}

    def on_mount(self) -> None:
        self.add_column("agent", width=22)
        self.add_column("id", width=14)
        self.add_column("model", width=12)
        self.add_column("changed", width=8)
        self.refresh_agents()

    @work(thread=True, exclusive=True, group="host-agents", exit_on_error=False)
    def refresh_agents(self) -> None:
        """Ask the host for its stored agents."""
        try:
            agents = self.host.agents()
        except Exception as exc:  # no gateway, or the host went away: said in the panel
            self.post_message(self.LoadFailed(failure(exc)))
            return
        self.post_message(self.Loaded(agents))

    def on_agents_table_loaded(self, message: Loaded) -> None:
        message.stop()
        fresh = {a["id"]: a for a in message.agents}
        if fresh == self.agents:
            return
        keep = self.current_agent
        self.agents = fresh
        self.clear()
        for agent in message.agents:
            emoji = (agent.get("config") or {}).get("emoji") or ""
            model = agent.get("model", "")
            if agent.get("provider") not in (None, "default"):
                model = f"{agent['provider']}/{model}"
            self.add_row(head(f"{emoji} {agent['name']}".strip(), 22), head(agent["id"], 14), head(model, 12),
                         clock(agent.get("updatedAt") or 0)[-8:], key=agent["id"])
        ids = list(fresh)
        if keep in ids:
            self.move_cursor(row=ids.index(keep), animate=False)
        elif ids:
            self.post_message(self.AgentHighlighted(fresh[ids[0]]))

    @property
    def current_agent(self) -> str | None:
        """The id of the agent under the cursor."""
        if self.row_count == 0:
            return None
        row_key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        return str(row_key.value)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        agent = self.agents.get(str(event.row_key.value))
        if agent is not None:
            self.post_message(self.AgentHighlighted(agent))

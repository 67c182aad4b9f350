"""The host's live sessions: which are active, which are running a turn, when they were last used,
and for a durable session the messages waiting in its steering and send queues."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import work
from textual.message import Message
from textual.widgets import DataTable

from .._format import clock, failure, head
from ._keys import MovableTable


class SessionsTable(MovableTable):
    """One row per session of the host, latest first; reads them in a worker thread."""

    DEFAULT_CSS = """
    SessionsTable { height: 1fr; }
    """

    class Loaded(Message):
        """The sessions were read from the host."""

        def __init__(self, sessions: list[dict[str, Any]]) -> None:
            super().__init__()
            self.sessions = sessions

    class LoadFailed(Message):
        """The host could not be asked."""

        def __init__(self, error: str) -> None:
            super().__init__()
            self.error = error

    class SessionHighlighted(Message):
        """The cursor moved to ``session_id``."""

        def __init__(self, session_id: str) -> None:
            super().__init__()
            self.session_id = session_id

    def __init__(self, host: Any, *, id: str | None = None) -> None:
        super().__init__(cursor_type="row", id=id)
        self.host = host
        self.sessions: list[dict[str, Any]] = []
        self._keep: str | None = None

    def on_mount(self) -> None:
        self.add_column("session", width=12)
        self.add_column("state", width=8)
        self.add_column("last", width=8)
        self.add_column("queued", width=7)
        self.refresh_sessions()

    @work(thread=True, exclusive=True, group="host-sessions", exit_on_error=False)
    def refresh_sessions(self, select: str | None = None) -> None:
        """Ask the host for its sessions (then select ``select``, or keep the cursor's)."""
        self._keep = select
        try:
            sessions = with_queues(self.host.sessions(), getattr(self.host, "durable_sessions", list)())
        except Exception as exc:  # the host went away: say so, try again at the next refresh
            self.post_message(self.LoadFailed(failure(exc)))
            return
        self.post_message(self.Loaded(sessions))

    def on_sessions_table_loaded(self, message: Loaded) -> None:
        keep = self._keep or self.current_session
        if [s["session_id"] for s in message.sessions] == [s["session_id"] for s in self.sessions] and \
                message.sessions == self.sessions:
            return
        self.sessions = message.sessions
        self.clear()
        for s in self.sessions:
            state = "running" if s.get("running") else ("active" if s.get("active") else s.get("status") or "idle")
            style = {"running": "cyan", "awaiting": "yellow", "failed": "red"}.get(state, "")
            last = s.get("last_activity")
            queued = f"{s['steering']}s {s['send']}q" if "steering" in s else "-"
            self.add_row(head(s["session_id"], 12), Text(state, style=style),
                         clock(last)[-8:] if last else "-", queued, key=s["session_id"])
        ids = [s["session_id"] for s in self.sessions]
        if keep in ids:
            self.move_cursor(row=ids.index(keep), animate=False)

    @property
    def current_session(self) -> str | None:
        """The session under the cursor."""
        if self.row_count == 0:
            return None
        row_key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        return str(row_key.value)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.SessionHighlighted(str(event.row_key.value)))


def with_queues(sessions: list[dict[str, Any]], durable: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The standing sessions with each durable session's queue lengths merged in (durable-only ones added)."""
    by_id = {d["session_id"]: d for d in durable}
    merged = [{**s, **_queues(by_id.pop(s["session_id"]))} if s["session_id"] in by_id else s for s in sessions]
    merged += [{"session_id": d["session_id"], "running": d.get("busy", False), **_queues(d)} for d in by_id.values()]
    return merged


def _queues(d: dict[str, Any]) -> dict[str, Any]:
    return {"steering": d.get("steering", 0), "send": d.get("send", 0), "pending_calls": d.get("pending_calls", 0)}

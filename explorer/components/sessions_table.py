"""The host's live sessions: which are active, which are running a turn, when they were last used,
and for a durable session the messages waiting in its steering and send queues.

A host started with durable sessions (``footprint serve --durable``) serves two kinds: standing
sessions (``/v1/sessions``, a turn through ``/v1/turns``) and durable ones (``/v1/durable``, a
message through its send queue). They are two conversations even under the same id, so each is a
row of its own, its kind in the ``kind`` column (:class:`SessionRef` names one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from rich.text import Text
from textual import work
from textual.message import Message
from textual.widgets import DataTable

from tracer import RunFilter

from .._format import clock, failure, head, plain
from ._keys import MovableTable

STANDING, DURABLE = "standing", "durable"


class SessionRef(NamedTuple):
    """A session of the host: its id, and whether it is a durable session or a standing one."""

    id: str
    durable: bool = False

    @property
    def kind(self) -> str:
        """``durable`` or ``standing``, as the table shows it."""
        return DURABLE if self.durable else STANDING

    @property
    def key(self) -> str:
        """The session's row key (a space is in no session id: a durable ``a`` and a standing ``a`` differ)."""
        return f"{self.id} {DURABLE}" if self.durable else self.id


class SessionsTable(MovableTable):
    """One row per session of the host (standing ones latest first, then durable ones); reads them in a
    worker thread."""

    DEFAULT_CSS = """
    SessionsTable { height: 1fr; }
    """

    class Loaded(Message):
        """The sessions were read from the host (each a row: see :func:`session_rows`)."""

        def __init__(self, sessions: list[dict[str, Any]]) -> None:
            super().__init__()
            self.sessions = sessions

    class LoadFailed(Message):
        """The host could not be asked."""

        def __init__(self, error: str) -> None:
            super().__init__()
            self.error = error

    class SessionHighlighted(Message):
        """The cursor moved to the session ``ref``."""

        def __init__(self, ref: SessionRef) -> None:
            super().__init__()
            self.ref = ref

        @property
        def session_id(self) -> str:
            """The session's id."""
            return self.ref.id

    def __init__(self, host: Any, *, id: str | None = None) -> None:
        super().__init__(cursor_type="row", id=id)
        self.host = host
        self.sessions: list[dict[str, Any]] = []
        self._keep: SessionRef | None = None
        # a durable session's last recorded run (the host does not say when it was last used), read
        # again only when its state changed since the last refresh: {id: (its overview entry, the time)}
        self._last_runs: dict[str, tuple[dict[str, Any], float | None]] = {}

    def on_mount(self) -> None:
        # (43 columns in all, explorer.tcss: the last use to the minute leaves the id room beside the kind)
        self.add_column("session", width=14)
        self.add_column("kind", width=8)
        self.add_column("state", width=8)
        self.add_column("last", width=5)
        self.refresh_sessions()

    @work(thread=True, exclusive=True, group="host-sessions", exit_on_error=False)
    def refresh_sessions(self, select: SessionRef | None = None) -> None:
        """Ask the host for its sessions (then select ``select``, or keep the cursor's)."""
        self._keep = select
        try:
            standing = self.host.sessions()
            durable: list[dict[str, Any]] = getattr(self.host, "durable_sessions", list)()
        except Exception as exc:  # the host went away: say so, try again at the next refresh
            self.post_message(self.LoadFailed(failure(exc)))
            return
        self.post_message(self.Loaded(session_rows(standing, durable, self._durable_last(durable))))

    def _durable_last(self, durable: list[dict[str, Any]]) -> dict[str, float | None]:
        """When each durable session last ran a turn: its newest recorded run's end (or start)."""
        source = getattr(self.app, "source", None)
        known: dict[str, float | None] = {}
        for entry in durable:
            session_id = entry["session_id"]
            seen = self._last_runs.get(session_id)
            if seen is None or seen[0] != entry or entry.get("busy"):
                try:
                    runs = source.list_runs(RunFilter(session_id=session_id), limit=1) if source else []
                except Exception:  # the recordings are unreadable for now: the time stays unknown
                    runs = []
                last = (runs[0].ended_at or runs[0].started_at) if runs else None
                seen = (entry, last)
                self._last_runs[session_id] = seen
            known[session_id] = seen[1]
        return known

    def on_sessions_table_loaded(self, message: Loaded) -> None:
        keep = self._keep or self.current_ref
        if message.sessions == self.sessions:
            return
        self.sessions = message.sessions
        self.clear()
        for s in self.sessions:
            ref = row_ref(s)
            state = s["state"]
            style = {"running": "cyan", "awaiting": "yellow", "failed": "red"}.get(state, "")
            last = s.get("last_activity")
            self.add_row(head(ref.id, 14), Text(ref.kind, style="magenta" if ref.durable else "dim"),
                         plain(state, style), clock(last, seconds=False)[-5:] if last else "-", key=ref.key)
        keys = [row_ref(s).key for s in self.sessions]
        if keep is not None and keep.key in keys:
            self.move_cursor(row=keys.index(keep.key), animate=False)

    @property
    def current_ref(self) -> SessionRef | None:
        """The session under the cursor."""
        if self.row_count == 0 or not self.sessions:
            return None
        return row_ref(self.sessions[min(self.cursor_row, len(self.sessions) - 1)])

    @property
    def current_session(self) -> str | None:
        """The id of the session under the cursor."""
        ref = self.current_ref
        return ref.id if ref is not None else None

    def row(self, ref: SessionRef) -> dict[str, Any] | None:
        """What the table knows of the session ``ref`` (its row), if it lists it."""
        return next((s for s in self.sessions if row_ref(s) == ref), None)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if 0 <= event.cursor_row < len(self.sessions):
            self.post_message(self.SessionHighlighted(row_ref(self.sessions[event.cursor_row])))


def row_ref(row: Mapping[str, Any]) -> SessionRef:
    """The session a row of :func:`session_rows` is."""
    return SessionRef(row["session_id"], bool(row.get("durable")))


def session_rows(standing: list[dict[str, Any]], durable: list[dict[str, Any]],
                 durable_last: Mapping[str, float | None] | None = None) -> list[dict[str, Any]]:
    """The table's rows: the standing sessions as the host lists them, then each durable session as a
    row of its own (never merged into a standing session of the same id: they are two
    conversations), with its queue lengths and ``last_activity`` from ``durable_last``."""
    rows = [{**s, "durable": False, "state": _standing_state(s)} for s in standing]
    for d in durable:
        queued = int(d.get("steering", 0)) + int(d.get("send", 0))
        owed = int(d.get("pending_calls", 0))
        waiting = f"{queued} queued" if queued < 10 else "queued"  # (the title says how many, and in which queue)
        state = "running" if d.get("busy") else waiting if queued else "owes" if owed else "idle"
        rows.append({"session_id": d["session_id"], "durable": True, "state": state, "running": bool(d.get("busy")),
                     "last_activity": (durable_last or {}).get(d["session_id"]), "steering": int(d.get("steering", 0)),
                     "send": int(d.get("send", 0)), "pending_calls": owed})
    return rows


def _standing_state(s: Mapping[str, Any]) -> str:
    return "running" if s.get("running") else ("active" if s.get("active") else str(s.get("status") or "idle"))

"""The host panel: the host's live sessions beside their recordings, and a chat to talk to a session."""

from __future__ import annotations

import uuid
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, RichLog, Static

from tracer import RunFilter

from .._format import failure
from ..components.runs_table import RunsTable
from ..components.sessions_table import SessionsTable


class HostScreen(Screen[None]):
    """Sessions on the left; the selected session's runs, the chat log and the chat input on the right."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+n", "new_session", "New session", priority=True),
        Binding("ctrl+r", "refresh", "Refresh"),
        Binding("ctrl+o", "open_run", "Open last run"),
        Binding("escape", "back", "Recordings"),
    ]

    class Replied(Message):
        """The host answered a turn (``reply`` is its JSON form: status, run_id, answer, ...)."""

        def __init__(self, session_id: str, reply: dict[str, Any]) -> None:
            super().__init__()
            self.session_id = session_id
            self.reply = reply

    class HistoryRead(Message):
        """The earlier turns of a session, read from its recorded runs (oldest first)."""

        def __init__(self, session_id: str, lines: list[Text]) -> None:
            super().__init__()
            self.session_id = session_id
            self.lines = lines

    class SendFailed(Message):
        """The turn could not be sent, or the host refused it."""

        def __init__(self, session_id: str, error: str) -> None:
            super().__init__()
            self.session_id = session_id
            self.error = error

    def __init__(self) -> None:
        super().__init__()
        self.session: str | None = None
        self.awaiting: str | None = None  # the session paused on a question: the next line is the decision
        self.last_run: str | None = None
        self._sending = False
        # each session's transcript (what the log shows when it is picked): its earlier turns, read
        # from its runs, then what was said here; a reply lands in its own session's transcript
        self.transcripts: dict[str, list[Text]] = {}

    @property
    def host(self) -> Any:
        """The host link of the app."""
        return self.app.host  # type: ignore[attr-defined]

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="host-body"):
            yield SessionsTable(self.host, id="host-sessions")
            with Vertical(id="host-right"):
                yield Static("", id="host-session-title")
                yield RunsTable(self.app.source, hide=("session", "agent", "cost"), id="session-runs")  # type: ignore[attr-defined]
                yield RichLog(id="host-log", wrap=True, markup=False, min_width=20)
                yield Input(placeholder="Message (ctrl+n: new session)", id="host-input")
        yield Footer()

    def on_mount(self) -> None:
        self._title()
        self.query_one(RunsTable).where = RunFilter(session_id="\0none")  # nothing until a session is picked
        self.query_one("#host-input", Input).focus()
        interval = getattr(self.app, "poll_interval", None)
        if interval:
            self.set_interval(interval, self.action_refresh)

    def _title(self) -> None:
        text = Text()
        if self.session is None:
            text.append("a message starts a new session", style="dim")
        else:
            text.append("session ", style="dim")
            text.append(self.session, style="bold")
            if self.awaiting:
                text.append("  awaiting your decision", style="yellow")
        self.query_one("#host-session-title", Static).update(text)

    def _pick(self, session_id: str, *, new: bool = False) -> None:
        if session_id == self.session:
            return
        self.session = session_id
        self.awaiting = None
        self._title()
        self.query_one(RunsTable).reload(RunFilter(session_id=session_id), keep_cursor=False)
        log = self.query_one("#host-log", RichLog)
        log.clear()
        if session_id in self.transcripts:
            for line in self.transcripts[session_id]:
                log.write(line)
            return
        self.transcripts[session_id] = []
        if not new:
            self.read_history(session_id)

    def _say(self, session_id: str, line: Text) -> None:
        """Add ``line`` to the session's transcript, and to the log when that session is shown."""
        self.transcripts.setdefault(session_id, []).append(line)
        if session_id == self.session:
            self.query_one("#host-log", RichLog).write(line)

    @work(thread=True, group="host-history", exit_on_error=False)
    def read_history(self, session_id: str) -> None:
        """Read the session's earlier turns from its recorded runs, in a worker thread."""
        try:
            runs = [r for r in self.app.source.session_runs(session_id)  # type: ignore[attr-defined]
                    if not r.forked_from_run]
        except Exception as exc:  # the chat still works; only the earlier turns are missing
            self.post_message(self.HistoryRead(session_id, [Text(f"earlier turns unreadable: {exc}", style="red")]))
            return
        lines: list[Text] = []
        for run in runs:
            lines.append(Text.assemble(("you: ", "bold green"), run.input))
            if run.status == "answered":
                lines.append(Text.assemble(("agent: ", "bold yellow"), run.output or "", (f"  run {run.id}", "dim")))
            else:
                lines.append(Text.assemble((f"turn {run.status}: ", "bold red"), run.error or "", (f"  run {run.id}", "dim")))
        if lines:
            lines.insert(0, Text(f"{len(runs)} earlier turn(s) of {session_id}", style="dim"))
        self.post_message(self.HistoryRead(session_id, lines))

    def on_host_screen_history_read(self, message: HistoryRead) -> None:
        said_here = self.transcripts.get(message.session_id, [])
        self.transcripts[message.session_id] = message.lines + said_here
        if message.session_id == self.session:
            log = self.query_one("#host-log", RichLog)
            log.clear()
            for line in self.transcripts[message.session_id]:
                log.write(line)

    def on_sessions_table_session_highlighted(self, message: SessionsTable.SessionHighlighted) -> None:
        self._pick(message.session_id)

    def on_sessions_table_load_failed(self, message: SessionsTable.LoadFailed) -> None:
        self.query_one("#host-session-title", Static).update(Text(f"host unreachable: {message.error}", style="red"))

    def on_runs_table_counted(self, message: RunsTable.Counted) -> None:
        message.stop()

    def on_runs_table_run_chosen(self, message: RunsTable.RunChosen) -> None:
        message.stop()
        self.app.open_run(message.run_id)  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ chatting

    @on(Input.Submitted, "#host-input")
    def _said(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        event.input.value = ""
        if not text:
            return
        if self._sending:
            self.notify("wait for the reply to the last message", timeout=2)
            return
        if self.session is None:
            self.action_new_session()
        assert self.session is not None
        line = Text()
        line.append("decision: " if self.awaiting else "you: ", style="bold green")
        line.append(text)
        self._say(self.session, line)
        self._sending = True
        self.send(self.session, text, self.awaiting == self.session)

    @work(thread=True, group="host-send", exit_on_error=False)
    def send(self, session_id: str, text: str, as_decision: bool) -> None:
        """Send the turn in a worker thread (the host may take a while) and post its reply."""
        try:
            if as_decision:
                reply = self.host.send("", session_id=session_id, decision=text)
            else:
                reply = self.host.send(text, session_id=session_id)
            self.app.source.flush()  # type: ignore[attr-defined]  # a host in this process: its run, readable now
        except Exception as exc:  # refused (busy, draining), unreachable: shown in the log
            self.post_message(self.SendFailed(session_id, failure(exc)))
            return
        self.post_message(self.Replied(session_id, reply))

    def on_host_screen_replied(self, message: Replied) -> None:
        self._sending = False
        reply = message.reply
        status = reply.get("status", "?")
        self.last_run = reply.get("run_id") or self.last_run
        line = Text()
        if status == "answered":
            line.append("agent: ", style="bold yellow")
            line.append(reply.get("answer", ""))
            self.awaiting = None
        elif status == "awaiting":
            line.append("agent asks: ", style="bold yellow")
            line.append(reply.get("question") or "")
            line.append("  (your next line is the decision)", style="dim")
            self.awaiting = message.session_id if message.session_id == self.session else self.awaiting
        else:
            line.append(f"turn {status}: ", style="bold red")
            line.append(reply.get("error") or "")
            self.awaiting = None
        if self.last_run:
            line.append(f"  run {self.last_run}", style="dim")
        self._say(message.session_id, line)
        self._title()
        if message.session_id != self.session:  # the reader moved on: the reply waits in its session
            self.notify(f"{message.session_id} replied", timeout=3)
            self.query_one(SessionsTable).refresh_sessions()
            return
        self.query_one(SessionsTable).refresh_sessions(select=message.session_id)
        self.query_one(RunsTable).reload(RunFilter(session_id=message.session_id))

    def on_host_screen_send_failed(self, message: SendFailed) -> None:
        self._sending = False
        self._say(message.session_id, Text(message.error, style="red"))

    # ------------------------------------------------------------------ actions

    def action_new_session(self) -> None:
        """Start a new session (its id is made up here; the host creates it on the first message)."""
        session_id = f"chat-{uuid.uuid4().hex[:6]}"
        self.session = None
        self._pick(session_id, new=True)
        self._say(session_id, Text(f"new session {session_id}", style="dim"))
        self.query_one("#host-input", Input).focus()

    def action_refresh(self) -> None:
        """Ask the host for its sessions again, and check the session's runs."""
        self.query_one(SessionsTable).refresh_sessions()
        if self.session is not None:
            self.query_one(RunsTable).check_for_new()

    def action_open_run(self) -> None:
        """Open the run of the last reply."""
        if self.last_run is None:
            self.notify("no reply yet in this panel", timeout=2)
            return
        self.app.open_run(self.last_run)  # type: ignore[attr-defined]

    def action_back(self) -> None:
        """Back to all recordings."""
        self.app.pop_screen()

"""The host panel: the host's live sessions beside their recordings, and a chat to talk to a session.

A standing session is talked to through ``/v1/turns``; a durable one (a host started with
``--durable``) through its send queue, even when a standing session has the same id: each is a
conversation of its own, with its own row and its own transcript (:class:`SessionRef`).
"""

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

from .._format import failure, plain, visible
from ..components.runs_table import RunsTable
from ..components.sessions_table import SessionRef, SessionsTable


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

        def __init__(self, ref: SessionRef, reply: dict[str, Any]) -> None:
            super().__init__()
            self.ref = ref
            self.reply = reply

    class HistoryRead(Message):
        """The earlier turns of a session, read from its recorded runs (oldest first)."""

        def __init__(self, ref: SessionRef, lines: list[Text]) -> None:
            super().__init__()
            self.ref = ref
            self.lines = lines

    class SendFailed(Message):
        """The turn could not be sent, or the host refused it."""

        def __init__(self, ref: SessionRef, error: str) -> None:
            super().__init__()
            self.ref = ref
            self.error = error

    def __init__(self) -> None:
        super().__init__()
        self.picked: SessionRef | None = None  # the session shown and talked to
        self.awaiting: SessionRef | None = None  # the session paused on a question: the next line is the decision
        self.last_run: str | None = None
        self._sending = False
        # each session's transcript (what the log shows when it is picked): its earlier turns, read
        # from its runs, then what was said here; a reply lands in its own session's transcript
        self.transcripts: dict[SessionRef, list[Text]] = {}

    @property
    def session(self) -> str | None:
        """The id of the session shown."""
        return self.picked.id if self.picked is not None else None

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
        ref = self.picked
        if ref is None:
            text.append("a message starts a new session", style="dim")
        else:
            text.append("durable " if ref.durable else "session ", style="magenta" if ref.durable else "dim")
            text.append(visible(ref.id), style="bold")
            row = self.query_one(SessionsTable).row(ref) if ref.durable else None
            if row is not None and (row["steering"] or row["send"] or row["pending_calls"]):
                # (what waits in its queues: the table's state column has room for the sum only)
                owed = f", {row['pending_calls']} calls owed" if row["pending_calls"] else ""
                text.append(f"  {row['steering']} steer, {row['send']} send{owed}", style="dim")
            if self.awaiting == ref:
                text.append("  awaiting your decision", style="yellow")
        self.query_one("#host-session-title", Static).update(text)

    def _pick(self, ref: SessionRef, *, new: bool = False) -> None:
        if ref == self.picked:
            return
        self.picked = ref
        self.awaiting = None
        self._title()
        self.query_one(RunsTable).reload(RunFilter(session_id=ref.id), keep_cursor=False)
        log = self.query_one("#host-log", RichLog)
        log.clear()
        if ref in self.transcripts:
            for line in self.transcripts[ref]:
                log.write(line)
            return
        self.transcripts[ref] = []
        if not new:
            self.read_history(ref)

    def _say(self, ref: SessionRef, line: Text) -> None:
        """Add ``line`` to the session's transcript, and to the log when that session is shown."""
        self.transcripts.setdefault(ref, []).append(line)
        if ref == self.picked:
            self.query_one("#host-log", RichLog).write(line)

    @work(thread=True, group="host-history", exit_on_error=False)
    def read_history(self, ref: SessionRef) -> None:
        """Read the session's earlier turns from its recorded runs, in a worker thread.

        (The recordings name a run's session by its id alone: a durable and a standing session of the same
        id show each other's recorded turns here and in the runs above.)
        """
        try:
            runs = [r for r in self.app.source.session_runs(ref.id)  # type: ignore[attr-defined]
                    if not r.forked_from_run]
        except Exception as exc:  # the chat still works; only the earlier turns are missing
            self.post_message(self.HistoryRead(ref, [plain(f"earlier turns unreadable: {failure(exc)}", "red")]))
            return
        lines: list[Text] = []
        for run in runs:
            lines.append(Text.assemble(("you: ", "bold green"), visible(run.input)))
            if run.status == "answered":
                lines.append(Text.assemble(("agent: ", "bold yellow"), visible(run.output),
                                           (f"  run {visible(run.id)}", "dim")))
            else:
                lines.append(Text.assemble((f"turn {visible(run.status)}: ", "bold red"), visible(run.error),
                                           (f"  run {visible(run.id)}", "dim")))
        if lines:
            lines.insert(0, plain(f"{len(runs)} earlier turn(s) of {ref.id}", "dim"))
        self.post_message(self.HistoryRead(ref, lines))

    def on_host_screen_history_read(self, message: HistoryRead) -> None:
        said_here = self.transcripts.get(message.ref, [])
        self.transcripts[message.ref] = message.lines + said_here
        if message.ref == self.picked:
            log = self.query_one("#host-log", RichLog)
            log.clear()
            for line in self.transcripts[message.ref]:
                log.write(line)

    def on_sessions_table_session_highlighted(self, message: SessionsTable.SessionHighlighted) -> None:
        self._pick(message.ref)

    def on_sessions_table_loaded(self, message: SessionsTable.Loaded) -> None:
        if self.picked is not None and self.picked.durable:  # its queues, in the title
            self.call_after_refresh(self._title)

    def on_sessions_table_load_failed(self, message: SessionsTable.LoadFailed) -> None:
        self.query_one("#host-session-title", Static).update(plain(f"host unreachable: {message.error}", "red"))

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
        if self.picked is None:
            self.action_new_session()
        assert self.picked is not None
        ref = self.picked
        line = Text()
        line.append("decision: " if self.awaiting == ref else "you: ", style="bold green")
        line.append(visible(text))
        self._say(ref, line)
        self._sending = True
        self.send(ref, text, self.awaiting == ref)

    @work(thread=True, group="host-send", exit_on_error=False)
    def send(self, ref: SessionRef, text: str, as_decision: bool) -> None:
        """Send the turn in a worker thread (the host may take a while) and post its reply: through
        ``/v1/turns`` to a standing session, through its send queue to a durable one."""
        try:
            if ref.durable:
                durable_send = getattr(self.host, "durable_send", None)
                if durable_send is None:
                    raise TypeError(f"this host link cannot send to durable session {ref.id}")
                reply = durable_send(ref.id, text)
            elif as_decision:
                reply = self.host.send("", session_id=ref.id, decision=text)
            else:
                reply = self.host.send(text, session_id=ref.id)
            self.app.source.flush()  # type: ignore[attr-defined]  # a host in this process: its run, readable now
        except Exception as exc:  # refused (busy, draining), unreachable: shown in the log
            self.post_message(self.SendFailed(ref, failure(exc)))
            return
        self.post_message(self.Replied(ref, reply))

    def on_host_screen_replied(self, message: Replied) -> None:
        self._sending = False
        reply, ref = message.reply, message.ref
        status = str(reply.get("status", "?"))
        self.last_run = reply.get("run_id") or self.last_run
        line = Text()
        if status == "answered":
            line.append("agent: ", style="bold yellow")
            line.append(visible(reply.get("answer")))
            self.awaiting = None
        elif status == "awaiting" and not ref.durable:  # (a durable session takes no decision here)
            line.append("agent asks: ", style="bold yellow")
            line.append(visible(reply.get("question")))
            line.append("  (your next line is the decision)", style="dim")
            self.awaiting = ref if ref == self.picked else self.awaiting
        else:
            line.append(f"turn {visible(status)}: ", style="bold red")
            line.append(visible(reply.get("error")))
            self.awaiting = None
        if self.last_run:
            line.append(f"  run {visible(self.last_run)}", style="dim")
        self._say(ref, line)
        self._title()
        if ref != self.picked:  # the reader moved on: the reply waits in its session
            self.notify(f"{'durable session ' if ref.durable else ''}{ref.id} replied", timeout=3)
            self.query_one(SessionsTable).refresh_sessions()
            return
        self.query_one(SessionsTable).refresh_sessions(select=ref)
        self.query_one(RunsTable).reload(RunFilter(session_id=ref.id))

    def on_host_screen_send_failed(self, message: SendFailed) -> None:
        self._sending = False
        self._say(message.ref, plain(message.error, "red"))

    # ------------------------------------------------------------------ actions

    def action_new_session(self) -> None:
        """Start a new (standing) session (its id is made up here; the host creates it on the first message)."""
        ref = SessionRef(f"chat-{uuid.uuid4().hex[:6]}")
        self.picked = None
        self._pick(ref, new=True)
        self._say(ref, plain(f"new session {ref.id}", "dim"))
        self.query_one("#host-input", Input).focus()

    def action_refresh(self) -> None:
        """Ask the host for its sessions again, and check the session's runs."""
        self.query_one(SessionsTable).refresh_sessions()
        if self.picked is not None:
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

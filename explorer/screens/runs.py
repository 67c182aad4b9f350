"""The first screen: every recorded run, newest first, with search and filters."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Header, Input, Static

from tracer import RunFilter

from .._format import head, plain, visible
from ..components.runs_table import RunsTable

STATUSES = (None, "answered", "failed", "awaiting", "cancelled", "running")
# Re-runs made by replay, counterfactual and blame are forks of a recorded run, and a sub-agent's run
# is drawn inside the run it was made for: both hidden until asked for, so the runs people made stay
# in view and the newest row is a run a person started (x shows them).
DEFAULT_FILTER = RunFilter(forks=False, children=False)


class RunsScreen(Screen[None]):
    """The runs table, a search box and the filters in force."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Open", show=False),
        Binding("slash", "search", "Search"),
        Binding("s", "status", "Status"),
        Binding("f", "session", "Session"),
        Binding("x", "forks", "Re-runs"),
        Binding("c", "clear", "Clear filters", show=False),
        Binding("w", "why", "Why"),
        Binding("r", "refresh", "Refresh", show=False),
        Binding("p", "sandbox", "Personas"),
        Binding("o", "host", "Host"),
        Binding("g", "agents", "Agents", show=False),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._search_timer: Timer | None = None
        self.where = DEFAULT_FILTER

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="runs-bar"):
            yield Input(placeholder="/ search input, answer or id", id="runs-search")
            yield Static("", id="runs-filters")
        yield RunsTable(self.app.source, where=self.where, id="runs-table")  # type: ignore[attr-defined]
        yield Static("reading runs…", id="runs-status")
        yield Footer()

    @property
    def table(self) -> RunsTable:
        """The runs table."""
        return self.query_one(RunsTable)

    def on_mount(self) -> None:
        self.table.focus()
        self._show_filters()
        interval = getattr(self.app, "poll_interval", None)
        if interval and self.app.source.live:  # type: ignore[attr-defined]
            self.set_interval(interval, self._poll)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "sandbox":
            return getattr(self.app, "personas", None) is not None
        if action == "host":
            return getattr(self.app, "host", None) is not None
        return True

    # ------------------------------------------------------------------ filters

    def _apply(self, **changes: Any) -> None:  # RunFilter fields
        self.where = replace(self.where, **changes)
        self._show_filters()
        self.table.reload(self.where, keep_cursor=False)

    def _show_filters(self) -> None:
        # a Text, not the str: a Static reads a str as markup (a session `chat-[x]` showed as `chat-`,
        # and one named `bad [/b] sess` stopped the app with a MarkupError)
        self.query_one("#runs-filters", Static).update(plain(filters_label(self.where)))

    def action_search(self) -> None:
        """Focus the search box."""
        self.query_one("#runs-search", Input).focus()

    @on(Input.Changed, "#runs-search")
    def _typed(self, event: Input.Changed) -> None:
        if self._search_timer is not None:
            self._search_timer.stop()
        value = event.value.strip() or None
        self._search_timer = self.set_timer(0.3, lambda: self._apply(search=value))

    @on(Input.Submitted, "#runs-search")
    def _submitted(self, event: Input.Submitted) -> None:
        if self._search_timer is not None:
            self._search_timer.stop()
        self._apply(search=event.value.strip() or None)
        self.table.focus()

    def key_escape(self) -> None:
        search = self.query_one("#runs-search", Input)
        if search.has_focus:
            if search.value:
                search.value = ""
            self.table.focus()

    def action_status(self) -> None:
        """Show only runs of the next status (all, answered, failed, awaiting, ...)."""
        index = STATUSES.index(self.where.status) if self.where.status in STATUSES else 0
        self._apply(status=STATUSES[(index + 1) % len(STATUSES)])

    def action_session(self) -> None:
        """Show only the runs of the session under the cursor (again: all sessions)."""
        if self.where.session_id is not None:
            self._apply(session_id=None)
            return
        run = self.table.current_run
        if run is None or not run.session_id:
            self.notify("this run has no session", timeout=3)
            return
        self._apply(session_id=run.session_id)

    def action_forks(self) -> None:
        """Show or hide the re-runs (runs forked from another by replay, counterfactual or blame) and the
        sub-agents' runs (drawn inside the runs they were made for)."""
        self._apply(forks=not self.where.forks, children=not self.where.forks)

    def action_clear(self) -> None:
        """Drop every filter and the search (re-runs stay as they were)."""
        self.query_one("#runs-search", Input).value = ""
        self.where = replace(DEFAULT_FILTER, forks=self.where.forks, children=self.where.children)
        self._show_filters()
        self.table.reload(self.where, keep_cursor=False)

    def action_refresh(self) -> None:
        """Read the runs again."""
        self.table.reload()

    def _poll(self) -> None:
        self.table.check_for_new()

    # ------------------------------------------------------------------ moving on

    def action_open(self) -> None:
        """Open the run under the cursor."""
        run_id = self.table.current_run_id
        if run_id:
            self.app.open_run(run_id)  # type: ignore[attr-defined]

    def on_runs_table_run_chosen(self, message: RunsTable.RunChosen) -> None:
        self.app.open_run(message.run_id)  # type: ignore[attr-defined]

    def action_why(self) -> None:
        """Explain the answer of the run under the cursor."""
        run = self.table.current_run
        if run is None:
            return
        if run.output is None:
            self.notify(f"run {run.id} has no answer to explain ({run.status})", timeout=3)
            return
        self.app.open_why(run.id)  # type: ignore[attr-defined]

    def action_sandbox(self) -> None:
        """Open the persona sandbox."""
        self.app.open_sandbox()  # type: ignore[attr-defined]

    def action_host(self) -> None:
        """Open the host's live sessions."""
        self.app.open_host()  # type: ignore[attr-defined]

    def action_agents(self) -> None:
        """Open the host's stored agents."""
        self.app.open_agents()  # type: ignore[attr-defined]

    def on_runs_table_counted(self, message: RunsTable.Counted) -> None:
        unfiltered = replace(message.where, forks=True, children=True) == RunFilter()  # hiding them is no filter
        what = "runs" if unfiltered else "matching runs"
        if message.total == 0:
            # p opens the sandbox only where it can write personas (footprint explore opens read-only)
            chat = "chat in the sandbox (p)" if self.check_action("sandbox", ()) else "chat in footprint sandbox"
            text = f"no runs yet: record some (footprint demo), or {chat}" if unfiltered \
                else "no run matches; c clears the filters"
        else:
            text = f"{message.loaded:,} of {message.total:,} {what} loaded · enter opens · ? keys"
        self.query_one("#runs-status", Static).update(plain(text))

    def on_runs_table_load_failed(self, message: RunsTable.LoadFailed) -> None:
        self.query_one("#runs-status", Static).update(plain(f"could not read runs: {message.error}"))
        self.notify(message.error, severity="error", timeout=6)


#: The filters label's room: #runs-filters' max-width (explorer.tcss) less its padding.
FILTERS_WIDTH = 50


def filters_label(where: RunFilter, width: int = FILTERS_WIDTH) -> str:
    """The filters in force (``answered · session=maya-1 · re-runs hidden``) in ``width`` characters:
    a long session id or agent name is cut with an ellipsis, so the label never wraps onto a line the
    bar does not show ("re-runs hidden" was lost whenever a session was picked). Plain text (not
    markup), its control characters visible."""
    values = {name: visible(value) for name, value in (("status", where.status), ("session", where.session_id),
                                                        ("agent", where.agent)) if value}
    suffix = "" if where.forks else " · re-runs hidden"

    def label() -> str:
        shown = [value if name == "status" else f"{name}={value}" for name, value in values.items()]
        return (" · ".join(shown) or "all runs") + suffix

    while len(label()) > width:
        cuttable = [name for name in ("session", "agent") if len(values.get(name, "")) > 6]
        longest = max(cuttable, key=lambda name: len(values[name]), default=None)
        if longest is None:
            return head(label(), width)
        values[longest] = head(values[longest], len(values[longest]) - 1)
    return label()

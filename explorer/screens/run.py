"""One run: its flowchart above, the selected stage's details below.

A team's run is drawn with the runs its sub-agents made framed inside it (read after the run
itself, on a worker); selecting a stage of one of them shows that stage as its own run recorded it.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from tracer import Item, RunData, SnapshotEntry, Stage, child_run_ids, item_names, one_line, started_run

from .._format import (
    ORIGIN_COLOURS,
    STAGE_COLOURS,
    STATUS_COLOURS,
    clock,
    cost,
    failure,
    plain,
    tokens,
    visible,
)
from .._prefetch import OpenedRun, RunLoad, missing_snapshots, read_team
from ..components._snapshots import SnapshotsWanted
from ..components.flowchart import Flowchart
from ..components.snapshot_view import SnapshotView
from ..components.stage_detail import StageDetail
from .item import ItemScreen


class RunScreen(Screen[None]):
    """A run's flowchart and the details of the selected stage."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        Binding("w", "why", "Why answer"),
        Binding("d", "diff", "Diff", show=False),
        Binding("left_square_bracket", "sibling(-1)", "Prev run", show=False),  # (in the help: ?)
        Binding("right_square_bracket", "sibling(1)", "Next run", show=False),
        Binding("tab", "app.focus_next", "Chart/details", show=False),
    ]

    class Loaded(Message):
        """The run's opening was read (posted by the loading worker): its outline and first snapshot."""

        def __init__(self, data: OpenedRun) -> None:
            super().__init__()
            self.data = data

    class SessionLoaded(Message):
        """The ids of the runs of the run's session, oldest first (for the title and ``[``/``]``)."""

        def __init__(self, session: list[str]) -> None:
            super().__init__()
            self.session = session

    class TeamLoaded(Message):
        """The runs the run's sub-agents made, at any depth, by id (posted by the team worker)."""

        def __init__(self, runs: dict[str, OpenedRun]) -> None:
            super().__init__()
            self.runs = runs

    class SnapshotsLoaded(Message):
        """Some stages' snapshots were read (posted by a snapshot worker), of the run ``run_id``."""

        def __init__(self, run_id: str, stage_ids: list[str], inputs: dict[str, list[SnapshotEntry]],
                     items: dict[str, Item]) -> None:
            super().__init__()
            self.run_id = run_id
            self.stage_ids = stage_ids
            self.inputs = inputs
            self.items = items

    class SnapshotsFailed(Message):
        """Some stages' snapshots could not be read."""

        def __init__(self, stage_ids: list[str], error: str) -> None:
            super().__init__()
            self.stage_ids = stage_ids
            self.error = error

    class NamesRead(Message):
        """The run's item names (hash -> ``memory:profile.home_city``), made from the whole run."""

        def __init__(self, names: dict[str, str]) -> None:
            super().__init__()
            self.names = names

    class LoadFailed(Message):
        """The run could not be read."""

        def __init__(self, error: str) -> None:
            super().__init__()
            self.error = error

    def __init__(self, run_id: str, stage_id: str | None = None, *, prefetch: RunLoad | None = None) -> None:
        super().__init__()
        self.prefetch = prefetch  # the run, already being read (see ExplorerApp.prefetch)
        self.run_id = run_id
        self.stage_id = stage_id
        self.data: OpenedRun | None = None
        self.team: dict[str, OpenedRun] = {}  # the runs of its sub-agents, drawn inside its flowchart
        self.session: list[str] = []
        self._reading: set[str] = set()  # stages whose snapshots a worker is reading

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(plain(f"reading run {self.run_id}…"), id="run-title")
        yield Flowchart(id="flowchart")
        yield StageDetail(id="stage-detail")
        yield Footer()

    def on_mount(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, group="run-load", exit_on_error=False)
    def load(self) -> None:
        """Wait, in a worker thread, for the run's opening: its outline and the first stage's snapshot."""
        load = self.prefetch or self.app.prefetch(self.run_id, self.stage_id)  # type: ignore[attr-defined]
        self.prefetch = load
        try:
            opened = load.opening.result()
        except Exception as exc:  # shown to the reader; the screen closes
            self.post_message(self.LoadFailed(failure(exc)))
            return
        self.post_message(self.Loaded(opened))

    @work(thread=True, exclusive=True, group="run-session", exit_on_error=False)
    def load_session(self, session_id: str) -> None:
        """Read the ids of the session's runs in a worker thread."""
        try:
            session = [r.id for r in self.app.source.session_runs(session_id)]  # type: ignore[attr-defined]
        except Exception as exc:  # the run is shown; only the session's navigation is missing
            self.app.call_from_thread(self.notify, f"could not read session {session_id}: {exc}", severity="warning")
            return
        self.post_message(self.SessionLoaded(session))

    @work(thread=True, group="run-names", exit_on_error=False)
    def read_names(self, run_ids: list[str]) -> None:
        """Name long runs' items in a worker thread: it reads each run whole once, keeping only the names."""
        for run_id in run_ids:
            try:
                names = item_names(self.app.source.load_run(run_id))  # type: ignore[attr-defined]
            except Exception as exc:  # the run is shown; its items keep their hashes
                self.app.call_from_thread(self.notify, f"could not name the items of {run_id}: {exc}",
                                          severity="warning")
                continue
            self.post_message(self.NamesRead(names))

    def _name_items(self, runs: list[OpenedRun]) -> None:
        """Name the items of ``runs`` (this run, or its sub-agents'): now for a run read whole, on a worker for
        a longer one — names count through every snapshot of a run, so they need it whole."""
        whole = [r for r in runs if r.read >= {s.id for s in r.stages}]
        names = {h: n for r in whole for h, n in item_names(r).items()}
        if names:
            self.post_message(self.NamesRead(names))
        longer = [r.run.id for r in runs if all(r is not w for w in whole)]
        if longer:  # read a stage at a time: it shows hashes until its names are read
            self.read_names(longer)

    def on_run_screen_names_read(self, message: NamesRead) -> None:
        detail = self.query_one(StageDetail)  # a team's runs are named one by one: keep the names so far
        detail.show_names({**detail.names, **message.names})

    @work(thread=True, group="run-snapshots", exit_on_error=False)
    def read_snapshots(self, run_id: str, stage_ids: list[str]) -> None:
        """Read some stages' snapshots of ``run_id`` (this run or a sub-agent's) in a worker thread."""
        try:
            inputs, items = self.app.source.load_snapshots(run_id, stage_ids)  # type: ignore[attr-defined]
        except Exception as exc:  # shown to the reader; selecting the stage again retries
            self.post_message(self.SnapshotsFailed(stage_ids, failure(exc)))
            return
        self.post_message(self.SnapshotsLoaded(run_id, stage_ids, inputs, items))

    @work(thread=True, exclusive=True, group="run-team", exit_on_error=False)
    def load_team(self, data: RunData) -> None:
        """Read the runs the run's sub-agents made, in a worker thread."""
        try:
            runs = read_team(self.app.source, data)  # type: ignore[attr-defined]
        except Exception as exc:  # the run is shown; only its sub-agents' runs are missing
            self.app.call_from_thread(self.notify, f"could not read the sub-agents' runs: {exc}", severity="warning")
            return
        self.post_message(self.TeamLoaded(runs))

    def run_data(self, run_id: str) -> OpenedRun | None:
        """The data of this run or of one of its sub-agents' runs drawn inside it."""
        return self.data if run_id == self.run_id else self.team.get(run_id)

    def on_run_screen_loaded(self, message: Loaded) -> None:
        self.data = message.data
        chart = self.query_one(Flowchart)
        self._show_title()
        chart.show(message.data, self.stage_id)
        chart.focus()
        self._name_items([message.data])
        if message.data.run.session_id:
            self.call_after_refresh(self.load_session, message.data.run.session_id)
        if child_run_ids(message.data):
            self.call_after_refresh(self.load_team, message.data)

    def on_run_screen_team_loaded(self, message: TeamLoaded) -> None:
        if self.data is None or not message.runs:
            return
        self.team = message.runs
        chart = self.query_one(Flowchart)
        chart.show(self.data, chart.selected, self.team)
        self._name_items(list(message.runs.values()))

    def on_run_screen_session_loaded(self, message: SessionLoaded) -> None:
        self.session = message.session
        if self.data is not None:
            self._show_title()

    def on_snapshots_wanted(self, message: SnapshotsWanted) -> None:
        message.stop()
        stages = self.query_one(Flowchart).stages
        by_run: dict[str, list[str]] = {}
        for stage_id in message.stage_ids:
            by_run.setdefault(stages[stage_id].run_id if stage_id in stages else self.run_id, []).append(stage_id)
        for run_id, stage_ids in by_run.items():
            data = self.run_data(run_id)
            if data is None:
                continue
            wanted = [s for s in missing_snapshots(data, stage_ids) if s not in self._reading]
            if wanted:
                self._reading.update(wanted)
                self.read_snapshots(run_id, wanted)

    def on_run_screen_snapshots_loaded(self, message: SnapshotsLoaded) -> None:
        self._reading.difference_update(message.stage_ids)
        data = self.run_data(message.run_id)
        if data is not None:
            data.add_snapshots(message.stage_ids, message.inputs, message.items)
            self.query_one(StageDetail).snapshots_read(data)

    def on_run_screen_snapshots_failed(self, message: SnapshotsFailed) -> None:
        self._reading.difference_update(message.stage_ids)
        self.notify(message.error, severity="error", timeout=6)

    def on_run_screen_load_failed(self, message: LoadFailed) -> None:
        self.notify(message.error, severity="error", timeout=6)
        self.app.pop_screen()

    def _show_title(self) -> None:
        if self.data is None:
            return
        stage = self.query_one(Flowchart).selected_stage
        inner = self.run_data(stage.run_id) if stage is not None and stage.run_id != self.run_id else None
        self.query_one("#run-title", Static).update(self._title(self.data, inner))

    def _title(self, data: RunData, inner: RunData | None = None) -> Text:
        """Two lines: the run (agent, status, time, tokens, cost, session) and its question and answer.

        The question and the answer take the screen's width each; what does not fit ends in an
        ellipsis (the answer stage shows it whole). With a stage of a sub-agent's run selected
        (``inner``), the second line is that agent's: its name, its task and its answer.
        """
        run = data.run
        width = max(20, (self.size.width or self.app.size.width) - 2)
        head = Text()
        head.append(f"{visible(run.agent)} ", style="bold")
        head.append(visible(run.status), style=STATUS_COLOURS.get(run.status, ""))
        calls = [s for s in data.stages if s.kind == "inference"]
        per_call = [int(s.attributes.get("input_tokens", 0) or 0) + int(s.attributes.get("output_tokens", 0) or 0)
                    for s in calls]
        split = ""
        if len(calls) > 1 and any(per_call):
            split = f" ({' + '.join(tokens(n) for n in per_call)} in {len(calls)} model calls)"
        head.append(f" · {clock(run.started_at)} · {tokens(run.tokens_in + run.tokens_out)} tok")
        tail = Text(f" · {cost(run.cost)}" if run.cost else "")  # nothing charged: no bare '-'
        if run.session_id:
            position = self.session.index(run.id) + 1 if run.id in self.session else 0
            tail.append(f" · {visible(run.session_id)}", style="dim")
            if position:
                tail.append(f" {position}/{len(self.session)}", style="dim")
        # the per-call split is the first to give way: the cost and the session ([ ] moves in it) stay
        if head.cell_len + len(split) + tail.cell_len <= width:
            head.append(split)
        head.append_text(tail)
        head.truncate(width, overflow="ellipsis")
        qa = Text()
        full = width
        if inner is not None:  # the selection is inside a sub-agent's frame: say whose
            qa.append(f"▸ {visible(inner.run.agent)} ", style="bold " + STAGE_COLOURS["subagent"])
            run = inner.run
            width -= len(qa)
        answer = run.output if run.output is not None else (run.error or "")
        question, reply = " ".join(run.input.split()), " ".join(answer.split())
        half = (width - 6) // 2
        # the question gets what the answer leaves, and the other way round; both fit when they can
        q_room = max(half, width - 6 - len(reply)) if len(question) > half else len(question)
        qa.append("Q ", style="bold " + ORIGIN_COLOURS["user"])
        qa.append(one_line(question, q_room))
        qa.append("  A ", style="bold " + ORIGIN_COLOURS["stage"])
        qa.append(one_line(reply, max(10, width - 6 - min(len(question), q_room))))
        qa.truncate(full, overflow="ellipsis")
        return Text("\n").join([head, qa])

    def on_resize(self) -> None:
        if self.data is not None:
            self._show_title()

    # ------------------------------------------------------------------ selection

    def select_stage(self, stage_id: str) -> None:
        """Select ``stage_id`` in the flowchart (when the run is loaded; else once it is)."""
        self.stage_id = stage_id
        chart = self.query_one(Flowchart)
        if self.data is not None and chart.select(stage_id):
            chart.focus()

    @property
    def selected_stage(self) -> Stage | None:
        """The stage selected in the flowchart."""
        return self.query_one(Flowchart).selected_stage

    async def on_flowchart_stage_selected(self, message: Flowchart.StageSelected) -> None:
        data = self.run_data(message.stage.run_id)
        if data is not None:
            self.stage_id = message.stage.id
            self._show_title()
            await self.query_one(StageDetail).show(data, message.stage)

    def on_flowchart_stage_opened(self, message: Flowchart.StageOpened) -> None:
        child = started_run(message.stage)
        if child is not None:  # a hand-over to another agent: open the run it started
            self.app.open_run(child)  # type: ignore[attr-defined]
            return
        detail = self.query_one(StageDetail)
        if detail.current == "snapshot":
            detail.query_one(SnapshotView).table.focus()
        elif detail.current:
            detail.query_one(f"#{detail.current}").focus()

    def on_snapshot_view_item_chosen(self, message: SnapshotView.ItemChosen) -> None:
        data = self.run_data(message.run_id)
        if data is None:
            return
        item = data.items.get(message.item_hash)  # ItemChosen comes from a shown snapshot: read
        origin = message.origin

        def after(choice: str | None) -> None:
            if choice == "why":
                self.app.open_why(message.run_id, message.item_hash)  # type: ignore[attr-defined]
            elif choice == "origin":
                if origin is not None and origin.run_id and origin.stage_id:
                    self.app.go_to_stage(origin.run_id, origin.stage_id)  # type: ignore[attr-defined]
                else:
                    self.notify("this item came from outside any recorded stage", timeout=3)

        name = self.query_one(StageDetail).names.get(message.item_hash)
        self.app.push_screen(ItemScreen(item, message.item_hash, origin, name), after)

    def on_snapshot_view_why_requested(self, message: SnapshotView.WhyRequested) -> None:
        self.app.open_why(message.run_id, message.item_hash)  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ actions

    def action_back(self) -> None:
        """Back to the previous screen."""
        self.app.pop_screen()

    def action_why(self) -> None:
        """Explain the run's answer."""
        if self.data is None:
            return
        if self.data.answer_hash() is None:
            self.notify(f"run {self.run_id} has no answer to explain ({self.data.run.status})", timeout=3)
            return
        self.app.open_why(self.run_id)  # type: ignore[attr-defined]

    def action_diff(self) -> None:
        """Switch the selected inference between its snapshot and its diff to the previous inference."""
        detail = self.query_one(StageDetail)
        if detail.current != "snapshot":
            self.notify("select an inference to diff its snapshot", timeout=3)
            return
        detail.query_one(SnapshotView).action_toggle_diff()

    def action_sibling(self, step: int) -> None:
        """Open the previous or next run of the same session in place of this one."""
        if self.run_id not in self.session:
            self.notify("this run has no session", timeout=3)
            return
        index = self.session.index(self.run_id) + step
        if not 0 <= index < len(self.session):
            self.notify("no run before this one" if step < 0 else "this is the session's latest run", timeout=3)
            return
        target = self.session[index]
        self.app.switch_screen(RunScreen(target, prefetch=self.app.prefetch(target)))  # type: ignore[attr-defined]

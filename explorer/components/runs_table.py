"""The table of runs: pages in lazily from the source, newest first, filtered and searched.

Only the first page is read when the table opens; the next page is read (in a worker thread) when
the cursor or the scroll position comes near the end of what is loaded. So a store of any size
opens as fast as one page can be read, and memory grows only with what the reader looks at.
``end`` goes to the last run that matches, not the last one loaded: it reads the rest first, in
pages of :data:`END_PAGE` (the status line counts them in).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import events, work
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable

from tracer import Run, RunFilter, one_line

from .._format import clock, cost_short, failure, head, status_text, tokens
from .._source import ALL_RUNS, RecordingSource
from ._keys import TABLE_MOVES, PlainTable

PAGE = 100
END_PAGE = 1000  # the page size while `end` reads the runs down to the last one
_AHEAD = 25  # read the next page when the cursor is this close to the end of what is loaded

_FIXED = (("time", 11), ("session", 10), ("agent", 9), ("status", 9), ("tok", 5), ("cost", 6))


@dataclass(frozen=True)
class RunsPage:
    """One page read from the source: the runs at ``offset`` and the total that match."""

    generation: int
    offset: int
    runs: list[Run]
    total: int


class RunsTable(PlainTable):
    """Runs as rows (time, session, agent, status, answer, tokens, cost), keyed by run id."""

    DEFAULT_CSS = """
    RunsTable { height: 1fr; }
    """

    # home and end move the cursor to the first and the last run (not sideways, as in a DataTable)
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("home", "scroll_top", "First run", show=False),
        Binding("end", "last_run", "Last run", show=False),
        *TABLE_MOVES,
        Binding("y", "copy_id", "Copy run id", show=False),
    ]

    class PageLoaded(Message):
        """A page of runs arrived from the worker (handled by the table itself)."""

        def __init__(self, page: RunsPage) -> None:
            super().__init__()
            self.page = page

    class Counted(Message):
        """How many runs are loaded and how many match: for the screen's status line."""

        def __init__(self, loaded: int, total: int, where: RunFilter) -> None:
            super().__init__()
            self.loaded = loaded
            self.total = total
            self.where = where

    class RunChosen(Message):
        """Enter on a run: open it."""

        def __init__(self, run_id: str) -> None:
            super().__init__()
            self.run_id = run_id

    class LoadFailed(Message):
        """Reading from the source failed; ``error`` says why."""

        def __init__(self, error: str) -> None:
            super().__init__()
            self.error = error

    def __init__(
        self, source: RecordingSource, *, where: RunFilter = ALL_RUNS, hide: tuple[str, ...] = (), id: str | None = None
    ) -> None:
        super().__init__(cursor_type="row", id=id)
        self.source = source
        self.hide = hide  # columns left out (the session column, in a table of one session's runs)
        self.where = where
        self.total = 0
        self.runs: dict[str, Run] = {}
        self._generation = 0
        self._loading = False
        self._keep: str | None = None
        self._to_end = False  # `end` was pressed: read on to the last run, then move there

    def on_mount(self) -> None:
        self._columns(self.size.width or self.app.size.width)
        self.reload()

    def _columns(self, width: int) -> None:
        """(Re)make the columns: session and agent widen with the terminal (up to what their names
        need), and the answer takes the width the others leave."""
        extra = max(0, width - 100) // 3
        wide = {"session": min(10 + extra, 24), "agent": min(9 + extra, 20)}
        # narrower, the answer needs the room more: the cost goes at 80 columns, the tokens and then the
        # agent at 60 (a horizontal scrollbar and a 10-column answer were left there)
        narrow = tuple(label for label, below in (("cost", 90), ("tok", 75), ("agent", 66)) if width < below)
        fixed = [(label, wide.get(label, w)) for label, w in _FIXED if label not in self.hide + narrow]
        answer = max(10, width - sum(w for _, w in fixed) - 2 * (len(fixed) + 1) - 2)
        shown = {str(k.value): c for k, c in self.columns.items()}
        if "answer" in shown and shown["answer"].width == answer and [
                (str(k.value), c.width) for k, c in self.columns.items() if str(k.value) != "answer"] == fixed:
            return
        cursor = self.cursor_row
        self.clear(columns=True)
        for label, w in fixed:
            self.add_column(label, width=w, key=label)
            if label == "status":
                self.add_column("answer", width=answer, key="answer")
        for run in self.runs.values():
            self.add_row(*self._cells(run), key=run.id)
        if self.row_count:
            self.move_cursor(row=min(cursor, self.row_count - 1), animate=False)

    def on_resize(self, event: events.Resize) -> None:
        self._columns(event.size.width)

    # ------------------------------------------------------------------ loading

    def reload(self, where: RunFilter | None = None, *, keep_cursor: bool = True) -> None:
        """Read the first page again (with a new filter, when given), keeping the cursor's run."""
        if where is not None:
            self.where = where
        self._keep = self.current_run_id if keep_cursor else None
        self._to_end = False
        self._generation += 1
        self._loading = True
        # keep what was paged in (up to ten pages), so the cursor's run is still there after a refresh
        size = min(max(PAGE, len(self.runs)), 10 * PAGE) if keep_cursor else PAGE
        self._read_page(self._generation, self.where, 0, size)

    @work(thread=True, group="runs-page", exit_on_error=False)
    def _read_page(self, generation: int, where: RunFilter, offset: int, limit: int) -> None:
        try:
            runs = self.source.list_runs(where, limit=limit, offset=offset)
            total = self.source.count_runs(where) if offset == 0 else -1
        except Exception as exc:  # the source is another process or a file: tell the reader, keep going
            self.post_message(self.LoadFailed(failure(exc)))
            return
        self.post_message(self.PageLoaded(RunsPage(generation, offset, runs, total)))

    def on_runs_table_page_loaded(self, message: PageLoaded) -> None:
        message.stop()
        page = message.page
        if page.generation != self._generation:
            return  # a newer filter or refresh has been asked for since
        self._loading = False
        if page.offset == 0:
            self.clear()
            self.runs.clear()
            self.total = page.total
        for run in page.runs:
            if run.id not in self.runs:
                self.runs[run.id] = run
                self.add_row(*self._cells(run), key=run.id)
        if page.offset == 0 and self._keep in self.runs:
            self.move_cursor(row=self.get_row_index(self._keep), animate=False)
        self._keep = None
        self.post_message(self.Counted(len(self.runs), self.total, self.where))
        if self._to_end:
            if page.runs and len(self.runs) < self.total:
                self._maybe_more(END_PAGE)
            else:
                self._to_end = False
                self.action_scroll_bottom()

    def on_runs_table_load_failed(self, message: LoadFailed) -> None:
        self._loading = False
        self._to_end = False

    @work(thread=True, group="runs-poll", exclusive=True, exit_on_error=False)
    def check_for_new(self) -> None:
        """Reload when the newest runs differ from what is shown (a new run, or one that ended)."""
        if self._loading:
            return
        shown = [(r.id, r.status, r.output) for r in list(self.runs.values())[:PAGE]]
        try:
            fresh = self.source.list_runs(self.where, limit=max(1, len(shown)), offset=0)
        except Exception:  # a host that went away: the next poll tries again
            return
        if [(r.id, r.status, r.output) for r in fresh] != shown[: len(fresh)] or len(fresh) > len(shown):
            self.app.call_from_thread(self.reload)

    def _cells(self, run: Run) -> tuple[str | Text, ...]:
        answer_width = self.columns["answer"].width if "answer" in self.columns else 30  # type: ignore[index]
        preview = run.output if run.output is not None else (run.error or run.input)
        style = "" if run.output is not None else "dim"
        cells: dict[str, str | Text] = {
            "time": clock(run.started_at, seconds=False), "session": head(run.session_id, self._width("session")),
            "agent": one_line(run.agent, self._width("agent")), "status": status_text(run.status),
            "answer": Text(one_line(preview, answer_width), style=style),
            "tok": tokens(run.tokens_in + run.tokens_out), "cost": cost_short(run.cost),
        }
        return tuple(cells[str(key.value)] for key in self.columns)

    def _width(self, column: str) -> int:
        return self.columns[column].width if column in self.columns else dict(_FIXED)[column]  # type: ignore[index]

    def _maybe_more(self, size: int = PAGE) -> None:
        if self._loading or len(self.runs) >= self.total:
            return
        self._loading = True
        self._read_page(self._generation, self.where, len(self.runs), size)

    def action_last_run(self) -> None:
        """Move to the last run that matches (the oldest): the runs not loaded yet are read first."""
        if len(self.runs) >= self.total:
            self.action_scroll_bottom()
            return
        self._to_end = True  # read page after page (each landing reads the next), then move
        self._maybe_more(END_PAGE)  # (a page already being read reads on when it lands)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.cursor_row >= self.row_count - _AHEAD:
            self._maybe_more()

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if new >= self.max_scroll_y - _AHEAD:
            self._maybe_more()

    # ------------------------------------------------------------------ choosing

    @property
    def current_run_id(self) -> str | None:
        """The run under the cursor."""
        if self.row_count == 0:
            return None
        row_key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        return str(row_key.value)

    @property
    def current_run(self) -> Run | None:
        """The run record under the cursor."""
        run_id = self.current_run_id
        return self.runs.get(run_id) if run_id else None

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.post_message(self.RunChosen(str(event.row_key.value)))

    def action_copy_id(self) -> None:
        """Copy the id of the run under the cursor to the clipboard."""
        run_id = self.current_run_id
        if run_id:
            self.app.copy_to_clipboard(run_id)
            self.notify(f"copied {run_id}", timeout=2)

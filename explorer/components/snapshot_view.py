"""The snapshot of an inference: every item it sent the model, or the diff to the previous one."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Static

from tracer import Origin, RunData, SnapshotDiff, SnapshotEntry, Stage, diff_snapshots, estimate_tokens

from .._format import ORIGIN_COLOURS, kind_label, one_line, origin_text, short_id, tokens
from .._prefetch import missing_snapshots
from ._snapshots import SnapshotsWanted

_CHANGE_COLOURS = {
    "added": "green", "injected": "magenta", "dropped": "red", "edited": "yellow",
    "truncated": "yellow", "summarized": "blue",
}


class SnapshotView(Vertical):
    """The items an inference stage sent, each with its role, tokens, origin and text.

    ``d`` switches to the diff against the previous inference of the run and back.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "toggle_diff", "Diff"),
        Binding("w", "why_item", "Why item"),
    ]

    DEFAULT_CSS = """
    SnapshotView { height: 1fr; }
    SnapshotView > .snapshot--header { height: auto; max-height: 2; color: $text-muted; }
    SnapshotView > DataTable { height: 1fr; }
    """

    class ItemChosen(Message):
        """Enter on an item: show it whole (``entry`` is its position in the snapshot)."""

        def __init__(self, run_id: str, stage_id: str, item_hash: str, origin: Origin | None) -> None:
            super().__init__()
            self.run_id = run_id
            self.stage_id = stage_id
            self.item_hash = item_hash
            self.origin = origin

    class WhyRequested(Message):
        """``w`` on an item: explain where it came from."""

        def __init__(self, run_id: str, item_hash: str) -> None:
            super().__init__()
            self.run_id = run_id
            self.item_hash = item_hash

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.data: RunData | None = None
        self.stage: Stage | None = None
        self.previous: Stage | None = None
        self.showing_diff = False
        self.waiting = False  # for the snapshots it shows: the stage's, and the previous inference's for a diff
        self._rows: dict[str, tuple[str, Origin | None]] = {}

    def compose(self) -> ComposeResult:
        yield Static("", classes="snapshot--header")
        table: DataTable[str | Text] = DataTable(cursor_type="row", zebra_stripes=False)
        yield table

    @property
    def table(self) -> DataTable[str | Text]:
        """The item table."""
        return self.query_one(DataTable)

    def show(self, data: RunData, stage: Stage, *, diff: bool = False) -> None:
        """Show ``stage``'s snapshot (or, with ``diff``, what changed since the previous inference).

        A snapshot ``data`` does not hold yet is asked for (:class:`SnapshotsWanted`); until it is
        read, the view says so, and :meth:`snapshots_read` shows it.
        """
        self.data = data
        self.stage = stage
        inferences = data.inferences()
        index = next((i for i, s in enumerate(inferences) if s.id == stage.id), -1)
        self.previous = inferences[index - 1] if index > 0 else None
        self.showing_diff = diff and self.previous is not None
        needed = [stage.id, self.previous.id] if self.showing_diff and self.previous is not None else [stage.id]
        missing = missing_snapshots(data, needed)
        self.waiting = bool(missing)
        if missing:
            reading = f"diff {self.previous.name} → {stage.name}" if self.showing_diff and self.previous else stage.name
            self.query_one(".snapshot--header", Static).update(f"{reading}: reading the snapshot…")
            self.table.clear(columns=True)
            self._rows.clear()
            self.post_message(SnapshotsWanted(missing))
            return
        if self.showing_diff:
            self._show_diff()
        else:
            self._show_snapshot()

    def _text_width(self, fixed: int) -> int:
        # a hidden pane has no size yet: it will be as wide as the screen, less the padding
        width = self.size.width or (self.app.size.width - 2)
        return max(16, width - fixed)

    def _show_snapshot(self) -> None:
        assert self.data is not None and self.stage is not None
        data, stage = self.data, self.stage
        entries = data.snapshot(stage.id, include_dropped=True)
        sent = [e for e in entries if e.included]
        total = sum(estimate_tokens(data.items[e.item_hash].text) for e in sent if e.item_hash in data.items)
        left_out = len(entries) - len(sent)
        hint = f" · d: diff to {self.previous.name}" if self.previous is not None else " · first inference"
        header = f"{stage.name}: {len(sent)} items, ~{tokens(total)} tokens"
        if left_out:
            header += f", {left_out} not in context"
        self.query_one(".snapshot--header", Static).update(header + hint)
        table = self.table
        table.clear(columns=True)
        table.add_column("#", width=2)
        table.add_column("role", width=9)
        table.add_column("tok", width=4)
        table.add_column("origin", width=16)
        table.add_column("text", width=self._text_width(2 + 9 + 4 + 16 + 12))
        self._rows.clear()
        for entry in entries:
            self._add_entry(table, entry)

    def _add_entry(self, table: DataTable[str | Text], entry: SnapshotEntry) -> None:
        assert self.data is not None
        item = self.data.items.get(entry.item_hash)
        kind = item.kind if item else "?"
        text = item.text if item else "(item not stored)"
        colour = ORIGIN_COLOURS.get(entry.origin.kind, "")
        style = colour if entry.included else f"{colour} dim strike"
        origin = origin_text(entry.origin.kind, entry.origin.source)
        if entry.origin.kind == "stage":
            producer = self._producer(entry.origin.run_id, entry.origin.stage_id)
            origin = Text(producer or "stage", style=ORIGIN_COLOURS["stage"])
        if not entry.included:
            origin = Text(f"✗ {entry.dropped_by or 'left out'}", style="red dim")
        key = f"{entry.position}:{entry.item_hash}"
        self._rows[key] = (entry.item_hash, entry.origin)
        table.add_row(
            str(entry.position), Text(kind_label(kind), style=style), tokens(estimate_tokens(text)), origin,
            Text(one_line(text, 200), style=style), key=key,
        )

    def _producer(self, run_id: str | None, stage_id: str | None) -> str | None:
        """Which stage produced an item: its kind and name in this run, or the other run's id."""
        assert self.data is not None
        if run_id != self.data.run.id:
            return f"run {short_id(run_id)}" if run_id else None
        if stage_id is None or not self.data.has_stage(stage_id):
            return None
        stage = self.data.stage(stage_id)
        return stage.kind if stage.name in ("", stage.kind) else f"{stage.kind} {stage.name}"

    def _show_diff(self) -> None:
        assert self.data is not None and self.stage is not None and self.previous is not None
        data = self.data
        diff: SnapshotDiff = diff_snapshots(data.snapshot(self.previous.id), data.snapshot(self.stage.id), data.items)
        counts: dict[str, int] = {}
        for e in diff.entries:
            counts[e.change] = counts.get(e.change, 0) + 1
        summary = ", ".join(f"{n} {change}" for change, n in sorted(counts.items())) or "no change"
        before, after = sum(diff.tokens_before.values()), sum(diff.tokens_after.values())
        self.query_one(".snapshot--header", Static).update(
            f"diff {self.previous.name} → {self.stage.name}: {summary}; {diff.kept} kept; "
            f"~{tokens(before)} → ~{tokens(after)} tokens · d: snapshot"
        )
        table = self.table
        table.clear(columns=True)
        table.add_column("change", width=10)
        table.add_column("role", width=9)
        table.add_column("tok", width=4)
        table.add_column("origin", width=16)
        table.add_column("text", width=self._text_width(10 + 9 + 4 + 16 + 12))
        self._rows.clear()
        for number, entry in enumerate(diff.entries):
            colour = _CHANGE_COLOURS.get(entry.change, "")
            key = f"d{number}:{entry.item_hash}"
            self._rows[key] = (entry.item_hash, None)
            text = entry.text if entry.before_text is None else f"{entry.text}  (was: {entry.before_text})"
            table.add_row(
                Text(entry.change, style=colour), kind_label(entry.item_kind), tokens(entry.tokens),
                origin_text(entry.origin_kind, entry.origin_source), Text(one_line(text, 200), style=colour), key=key,
            )
        if not diff.entries:
            table.add_row("", "", "", "", Text("the two snapshots hold the same items", style="dim"))

    def snapshots_read(self, data: RunData) -> None:
        """More snapshots were read: show what was awaited (the snapshot, or the diff)."""
        if self.waiting and self.stage is not None:
            self.show(data, self.stage, diff=self.showing_diff)

    def action_toggle_diff(self) -> None:
        """Switch between the snapshot and the diff to the previous inference."""
        if self.data is None or self.stage is None:
            return
        if self.previous is None:
            self.notify("this is the run's first inference: there is nothing before it to diff", timeout=3)
            return
        self.show(self.data, self.stage, diff=not self.showing_diff)

    def _current(self) -> tuple[str, Origin | None] | None:
        table = self.table
        if table.row_count == 0:
            return None
        row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return self._rows.get(str(row_key.value))

    def action_why_item(self) -> None:
        """Explain the item under the cursor."""
        current = self._current()
        if current is not None and self.data is not None:
            self.post_message(self.WhyRequested(self.data.run.id, current[0]))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        current = self._rows.get(str(event.row_key.value))
        if current is not None and self.data is not None and self.stage is not None:
            self.post_message(self.ItemChosen(self.data.run.id, self.stage.id, current[0], current[1]))

"""The snapshot of an inference: every item it sent the model, or the diff to the previous one."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Input, Static

from tracer import (
    Origin,
    RunData,
    SnapshotDiff,
    SnapshotEntry,
    Stage,
    diff_snapshots,
    estimate_tokens,
    one_line,
)

from .._format import ORIGIN_COLOURS, kind_label, origin_text, plain, tokens
from .._prefetch import missing_snapshots
from ._columns import fit_columns
from ._keys import MovableTable
from ._snapshots import SnapshotsWanted

#: What gives way for the text in a narrow pane, in order (see :func:`~._columns.fit_columns`): the
#: token estimate, then the name or the origin narrows, then the role.
SNAPSHOT_GIVES_WAY = (("tok", 0), ("name", 10), ("origin", 10), ("role", 0))

_CHANGE_COLOURS = {
    "added": "green", "injected": "magenta", "dropped": "red", "edited": "yellow",
    "truncated": "yellow", "summarized": "blue",
}


class SnapshotView(Vertical):
    """The items an inference stage sent, each with its role, tokens, name and text.

    ``d`` switches to the diff against the previous inference of the run and back; ``/`` searches
    the items (text and name), ``o`` keeps the items of one origin kind (pressed again: the next).
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "toggle_diff", "Diff"),
        Binding("w", "why_item", "Why item"),
        # short in the footer, whole in the help (the tooltip): at 80 columns the screen's keys fit beside
        Binding("slash", "search", "Search", tooltip="Search items"),
        Binding("o", "origin_filter", "Origin", tooltip="Origin filter"),
        Binding("y", "copy_item", "Copy text", show=False),
    ]

    DEFAULT_CSS = """
    SnapshotView { height: 1fr; }
    SnapshotView > .snapshot--header { height: auto; max-height: 2; color: $text-muted; }
    SnapshotView > Input { display: none; height: 1; border: none; padding: 0 1; }
    SnapshotView > Input.-shown { display: block; }
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
        self.search = ""  # shown: only the items whose text or name holds it (any case)
        self.origin_kind: str | None = None  # shown: only the items of this origin kind
        self.names: dict[str, str] = {}  # the run's item names, once read whole (see :meth:`show_names`)
        self._drawn_width = 0  # the width the columns were fitted to

    def compose(self) -> ComposeResult:
        yield Static("", classes="snapshot--header")
        yield Input(placeholder="search the items (text or name); enter keeps it, escape clears it",
                    id="snapshot-search")
        table: DataTable[str | Text] = MovableTable(cursor_type="row", zebra_stripes=False)
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
            self.query_one(".snapshot--header", Static).update(plain(f"{reading}: reading the snapshot…"))
            self.table.clear(columns=True)
            self._rows.clear()
            self.post_message(SnapshotsWanted(missing))
            return
        if self.showing_diff:
            self._show_diff()
        else:
            self._show_snapshot()

    def _width(self) -> int:
        # a hidden pane has no size yet: it will be as wide as the screen, less the padding
        return self.size.width or (self.app.size.width - 2)

    def _set_columns(self, columns: list[tuple[str, int]]) -> None:
        """Make the table's columns: ``columns`` and the text, fitted to the pane (:func:`fit_columns`)."""
        table = self.table
        table.clear(columns=True)
        self._drawn_width = self._width()
        for label, width in fit_columns(self._drawn_width, columns, SNAPSHOT_GIVES_WAY):
            table.add_column(label, width=width, key=label)

    def _add_row(self, cells: dict[str, str | Text], key: str | None = None) -> None:
        """A row of the cells of the columns shown (a column given way to leaves its cell out)."""
        table = self.table
        table.add_row(*(cells.get(str(k.value), "") for k in table.columns), key=key)

    @property
    def _text_column(self) -> int:
        return self.table.columns["text"].width  # type: ignore[index]

    def show_names(self, names: dict[str, str]) -> None:
        """The run's item names arrived (they need the whole run: :meth:`RunScreen.read_names`)."""
        self.names = names
        if self.data is not None and self.stage is not None and not self.waiting and not self.showing_diff:
            self._show_snapshot()

    def _item_name(self, item_hash: str) -> str:
        return self.names.get(item_hash) or f"#{item_hash[:8]}"

    def _shown(self, entry: SnapshotEntry) -> bool:
        assert self.data is not None
        if self.origin_kind is not None and entry.origin.kind != self.origin_kind:
            return False
        if not self.search:
            return True
        item = self.data.items.get(entry.item_hash)
        needle = self.search.lower()
        return needle in (item.text.lower() if item else "") or needle in self._item_name(entry.item_hash).lower()

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
        shown = [e for e in entries if self._shown(e)]
        if len(shown) != len(entries):
            narrowed = [f"origin {self.origin_kind}" if self.origin_kind else "", f"“{self.search}”" if self.search else ""]
            header += f" · showing {len(shown)} ({', '.join(n for n in narrowed if n)})"
        self.query_one(".snapshot--header", Static).update(plain(header + hint))  # (stage names are recorded)
        # the name column is as wide as the longest name shown, within a third of the pane
        name_width = min(max([len(self._item_name(e.item_hash)) for e in shown] + [6]) + 2, max(12, self._width() // 3))
        self._set_columns([("#", max(2, len(str(len(entries))))), ("role", 9), ("tok", 4), ("name", name_width)])
        self._rows.clear()
        for entry in shown:
            self._add_entry(entry)
        if not shown:
            self._add_row({"text": Text("no item matches: / or o changes the filter", style="dim")})

    def _add_entry(self, entry: SnapshotEntry) -> None:
        assert self.data is not None
        item = self.data.items.get(entry.item_hash)
        kind = item.kind if item else "?"
        text = item.text if item else "(item not stored)"
        colour = ORIGIN_COLOURS.get(entry.origin.kind, "")
        style = colour if entry.included else f"{colour} dim strike"
        name_width = self.table.columns["name"].width if "name" in self.table.columns else 0  # type: ignore[index]
        name = Text(one_line(self._item_name(entry.item_hash), name_width - 1), style=colour)
        if not entry.included:
            text = f"✗ left out by {entry.dropped_by or 'a window'}: {text}"  # (one_line makes it visible)
        key = f"{entry.position}:{entry.item_hash}"
        self._rows[key] = (entry.item_hash, entry.origin)
        self._add_row({  # the text is cut at its column's width, with an ellipsis
            "#": str(entry.position), "role": Text(kind_label(kind), style=style), "tok": tokens(estimate_tokens(text)),
            "name": name, "text": Text(one_line(text, max(8, self._text_column - 1)), style=style),
        }, key=key)

    def _show_diff(self) -> None:
        assert self.data is not None and self.stage is not None and self.previous is not None
        data = self.data
        diff: SnapshotDiff = diff_snapshots(data.snapshot(self.previous.id), data.snapshot(self.stage.id), data.items)
        counts: dict[str, int] = {}
        for e in diff.entries:
            counts[e.change] = counts.get(e.change, 0) + 1
        summary = ", ".join(f"{n} {change}" for change, n in sorted(counts.items())) or "no change"
        before, after = sum(diff.tokens_before.values()), sum(diff.tokens_after.values())
        self.query_one(".snapshot--header", Static).update(plain(
            f"diff {self.previous.name} → {self.stage.name}: {summary}; {diff.kept} kept; "
            f"~{tokens(before)} → ~{tokens(after)} tokens · d: snapshot"
        ))
        self._set_columns([("change", 10), ("role", 9), ("tok", 4), ("origin", 16)])
        self._rows.clear()
        for number, entry in enumerate(diff.entries):
            colour = _CHANGE_COLOURS.get(entry.change, "")
            key = f"d{number}:{entry.item_hash}"
            self._rows[key] = (entry.item_hash, None)
            text = entry.text if entry.before_text is None else f"{entry.text}  (was: {entry.before_text})"
            self._add_row({
                "change": plain(entry.change, colour), "role": kind_label(entry.item_kind), "tok": tokens(entry.tokens),
                "origin": origin_text(entry.origin_kind, entry.origin_source),
                "text": Text(one_line(text, max(8, self._text_column - 1)), style=colour),
            }, key=key)
        if not diff.entries:
            self._add_row({"text": Text("the two snapshots hold the same items", style="dim")})

    def on_resize(self, event: events.Resize) -> None:
        """Fit the columns to the new width (the cursor stays on its row)."""
        if self.data is None or self.stage is None or self.waiting or event.size.width == self._drawn_width:
            return
        row = self.table.cursor_row
        if self.showing_diff:
            self._show_diff()
        else:
            self._show_snapshot()
        if self.table.row_count:
            self.table.move_cursor(row=min(row, self.table.row_count - 1), animate=False)

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

    # ------------------------------------------------------------------ search and filter

    def action_search(self) -> None:
        """Show the search box: only the items whose text or name holds what is typed."""
        box = self.query_one("#snapshot-search", Input)
        box.add_class("-shown")
        box.value = self.search
        box.focus()

    @on(Input.Changed, "#snapshot-search")
    def _searched(self, event: Input.Changed) -> None:
        event.stop()
        self.search = event.value.strip()
        if self.data is not None and self.stage is not None and not self.showing_diff:
            self._show_snapshot()

    @on(Input.Submitted, "#snapshot-search")
    def _search_kept(self, event: Input.Submitted) -> None:
        event.stop()
        self.table.focus()

    def on_key(self, event: events.Key) -> None:
        box = self.query_one("#snapshot-search", Input)
        if event.key == "escape" and box.has_focus:
            event.stop()
            box.value = ""
            box.remove_class("-shown")
            self.table.focus()

    def action_origin_filter(self) -> None:
        """Keep the items of one origin kind; pressed again, the next kind present; then all again."""
        if self.data is None or self.stage is None:
            return
        kinds = sorted({e.origin.kind for e in self.data.snapshot(self.stage.id, include_dropped=True)})
        order: list[str | None] = [None, *kinds]
        self.origin_kind = order[(order.index(self.origin_kind) + 1) % len(order)] if self.origin_kind in order else None
        self.notify(f"items from {self.origin_kind}" if self.origin_kind else "items of every origin", timeout=2)
        if not self.showing_diff:
            self._show_snapshot()

    def action_copy_item(self) -> None:
        """Copy the text of the item under the cursor to the clipboard."""
        current = self._current()
        if current is None or self.data is None:
            return
        item = self.data.items.get(current[0])
        if item is None:
            return
        self.app.copy_to_clipboard(item.text)
        self.notify(f"copied {self._item_name(current[0])} ({len(item.text)} characters)", timeout=2)

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

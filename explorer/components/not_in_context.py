"""What was available to a stage of the walk but not sent: the "not in context" list of `why`."""

from __future__ import annotations

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from tracer import DroppedItem, one_line

from .._format import ORIGIN_COLOURS, short_id
from ._keys import MovableTable

NOTHING_LEFT_OUT = "nothing was left out"


class NotInContextTable(MovableTable):
    """One row per item left out of a context, with what left it out and where it came from."""

    DEFAULT_CSS = """
    NotInContextTable { height: 1fr; }
    """

    class DroppedChosen(Message):
        """Enter on a row: go to the stage whose context left the item out."""

        def __init__(self, item: DroppedItem) -> None:
            super().__init__()
            self.item = item

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(cursor_type="row", id=id)
        self.items: list[DroppedItem] = []

    def on_mount(self) -> None:
        self.add_column("left out by", width=17)
        self.add_column("role", width=9)
        self.add_column("stage of", width=11)
        self.add_column("text", width=max(20, (self.size.width or self.app.size.width) - 51))

    def show(self, items: list[DroppedItem]) -> None:
        """Fill the table (an item is listed once per thing that left it out: see ``tracer.DroppedItem``)."""
        self.items = list(items)
        self.clear()
        for number, d in enumerate(self.items):
            colour = ORIGIN_COLOURS.get(d.origin.kind, "")
            self.add_row(
                Text(d.dropped_by, style="red"), d.item_kind, short_id(d.run_id),
                Text(one_line(d.text, 200), style=colour), key=str(number),
            )
        if not self.items:  # short enough for the text column at 80 columns (it is 20 at least)
            self.add_row("", "", "", Text(NOTHING_LEFT_OUT, style="dim"))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        key = event.row_key.value
        if key is not None and key.isdigit() and int(key) < len(self.items):
            self.post_message(self.DroppedChosen(self.items[int(key)]))

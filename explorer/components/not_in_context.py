"""What was available to a stage of the walk but not sent: the "not in context" list of `why`."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.message import Message
from textual.widgets import DataTable

from tracer import DroppedItem, one_line

from .._format import ORIGIN_COLOURS, plain, short_id
from ._columns import fit_columns
from ._keys import MovableTable

NOTHING_LEFT_OUT = "nothing was left out"
#: what gives way for the text in a narrow pane, in order (see :func:`~._columns.fit_columns`)
GIVES_WAY = (("stage of", 0), ("left out by", 12), ("role", 0))


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
        self._fitted = 0  # the width the columns were fitted to

    def on_mount(self) -> None:
        self._fit(self.size.width or self.app.size.width)

    def on_resize(self, event: events.Resize) -> None:
        if event.size.width != self._fitted:
            self._fit(event.size.width)
            self.show(self.items)

    def _fit(self, width: int) -> None:
        self._fitted = width
        self.clear(columns=True)
        for label, w in fit_columns(width, [("left out by", 17), ("role", 9), ("stage of", 11)], GIVES_WAY):
            self.add_column(label, width=w, key=label)

    def show(self, items: list[DroppedItem]) -> None:
        """Fill the table (an item is listed once per thing that left it out: see ``tracer.DroppedItem``)."""
        self.items = list(items)
        self.clear()
        for number, d in enumerate(self.items):
            colour = ORIGIN_COLOURS.get(d.origin.kind, "")
            self._add({"left out by": plain(d.dropped_by, "red"), "role": d.item_kind, "stage of": short_id(d.run_id),
                       "text": Text(one_line(d.text, 200), style=colour)}, key=str(number))
        if not self.items:  # short enough for the text column at 80 columns (it is 20 at least)
            self._add({"text": Text(NOTHING_LEFT_OUT, style="dim")})

    def _add(self, cells: dict[str, str | Text], key: str | None = None) -> None:
        """A row of the cells of the columns shown (a column given way to leaves its cell out)."""
        self.add_row(*(cells.get(str(k.value), "") for k in self.columns), key=key)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        key = event.row_key.value
        if key is not None and key.isdigit() and int(key) < len(self.items):
            self.post_message(self.DroppedChosen(self.items[int(key)]))

"""The movement keys every list of the explorer shares, and the tables that have them.

Arrows and page keys move as usual, ``home``/``end`` go to the first and the last row (a DataTable
binds them to scrolling sideways: :data:`ROW_EDGES` binds them back), and ``j``/``k`` move down and
up in every table and tree, as ``hjkl`` do in the flowchart. (``g`` stays free: screens use it, to go
somewhere.)

Every table shows its text cells as they are: a DataTable reads a ``str`` cell as Rich markup, so
an agent, a session or a persona named ``x [/b]`` stopped the explorer with a MarkupError, and one
named ``ev[i]l`` lost its ``[i]``. :class:`PlainTable` hands every ``str`` cell over as plain text,
its control characters made visible (``explorer._format.visible``); a ``Text`` cell is made by its
caller, from visible text.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

from .._format import plain

#: For a DataTable (or a subclass) and a Tree: j/k down and up. Shown in no footer.
TABLE_MOVES: list[BindingType] = [
    Binding("j", "cursor_down", "Down", show=False),
    Binding("k", "cursor_up", "Up", show=False),
]


#: For a DataTable (or a subclass): home and end to the first and the last row (ctrl+home and
#: ctrl+end, as Textual binds them), not to the first and last column. Shown in no footer.
ROW_EDGES: list[BindingType] = [
    Binding("home", "scroll_top", "First row", show=False),
    Binding("end", "scroll_bottom", "Last row", show=False),
]


def _plain(cell: Any) -> Any:
    return plain(cell) if isinstance(cell, str) else cell


class PlainTable(DataTable[str | Text]):
    """A DataTable whose ``str`` cells are text, never markup (what a run, a session, an agent or a
    person called something is shown as it is)."""

    def add_row(self, *cells: Any, **options: Any) -> Any:
        return super().add_row(*map(_plain, cells), **options)

    def update_cell(self, row_key: Any, column_key: Any, value: Any, **options: Any) -> None:
        super().update_cell(row_key, column_key, _plain(value), **options)

    def update_cell_at(self, coordinate: Any, value: Any, **options: Any) -> None:
        super().update_cell_at(coordinate, _plain(value), **options)


class MovableTable(PlainTable):
    """A row-cursor DataTable with the explorer's movement keys."""

    BINDINGS: ClassVar[list[BindingType]] = [*ROW_EDGES, *TABLE_MOVES]

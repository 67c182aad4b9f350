"""The movement keys every list of the explorer shares, and the table that has them.

Arrows, page keys and home/end move as usual; ``j``/``k`` move down and up, ``g``/``G`` go to the
first and last row, in every table and tree, as ``hjkl`` do in the flowchart.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

#: For a DataTable (or a subclass): j/k down and up, g/G first and last row. Shown in no footer.
TABLE_MOVES: list[BindingType] = [
    Binding("j", "cursor_down", "Down", show=False),
    Binding("k", "cursor_up", "Up", show=False),
    Binding("g", "scroll_top", "First", show=False),
    Binding("G", "scroll_bottom", "Last", show=False),
]

#: For a Tree: the same keys.
TREE_MOVES: list[BindingType] = [
    Binding("j", "cursor_down", "Down", show=False),
    Binding("k", "cursor_up", "Up", show=False),
    Binding("g", "scroll_home", "First", show=False),
    Binding("G", "scroll_end", "Last", show=False),
]


class MovableTable(DataTable[str | Text]):
    """A row-cursor DataTable with the explorer's movement keys."""

    BINDINGS: ClassVar[list[BindingType]] = TABLE_MOVES

"""The movement keys every list of the explorer shares, and the table that has them.

Arrows, page keys and home/end move as usual, and ``j``/``k`` move down and up in every table and
tree, as ``hjkl`` do in the flowchart. (``g`` stays free: screens use it, to go somewhere.)
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

#: For a DataTable (or a subclass) and a Tree: j/k down and up. Shown in no footer.
TABLE_MOVES: list[BindingType] = [
    Binding("j", "cursor_down", "Down", show=False),
    Binding("k", "cursor_up", "Up", show=False),
]


class MovableTable(DataTable[str | Text]):
    """A row-cursor DataTable with the explorer's movement keys."""

    BINDINGS: ClassVar[list[BindingType]] = TABLE_MOVES

"""`?`: the keys of the screen underneath, with what each does."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from tracer import one_line

from ..components._keys import MovableTable


class HelpScreen(ModalScreen[None]):
    """A table of (key, what it does), closed by escape, ``q`` or ``?``."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def __init__(self, title: str, keys: list[tuple[str, str]]) -> None:
        super().__init__()
        self.help_title = title
        self.keys = keys

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box"):
            yield Static(f"Keys: {self.help_title}", id="help-title")
            table: DataTable[str | Text] = MovableTable(cursor_type="row", show_header=False, id="help-table")
            yield table
            yield Static("escape closes", id="help-hint")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        width = max(20, min(72, self.app.size.width) - 6)  # the box (explorer.tcss #help-box), less its frame
        key_width = min(max([len(k) for k, _ in self.keys] + [4]) + 1, 18)
        table.add_column("key", width=key_width)
        action_width = max(16, width - key_width - 4)
        table.add_column("action", width=action_width)
        for key, description in self.keys:
            table.add_row(one_line(key, key_width), one_line(description, action_width))
        table.focus()

    async def action_dismiss(self, result: None = None) -> None:
        """Close the help."""
        self.dismiss(None)

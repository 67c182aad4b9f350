"""One context item shown whole: its role, origin, token estimate and full text."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from tracer import Item, Origin, estimate_tokens

from .._format import ORIGIN_COLOURS, plain, visible


class ItemScreen(ModalScreen[str | None]):
    """An item whole. Dismissed with ``"why"`` or ``"origin"`` when the reader asks for those."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "dismiss", "Close"),
        Binding("w", "choose('why')", "Why item"),
        Binding("g", "choose('origin')", "Go to origin"),
        Binding("y", "copy", "Copy text"),
    ]

    def __init__(self, item: Item | None, item_hash: str, origin: Origin | None, name: str | None = None) -> None:
        super().__init__()
        self.item = item
        self.item_hash = item_hash
        self.origin = origin
        self.name_shown = name

    def compose(self) -> ComposeResult:
        item, origin = self.item, self.origin
        head = Text()
        head.append(visible(item.kind) if item else "item", style="bold")
        if self.name_shown:
            head.append(f"  {visible(self.name_shown)}", style="bold " + ORIGIN_COLOURS.get(origin.kind if origin else "", ""))
        head.append(f"  {visible(self.item_hash[:12])}", style="dim")
        if item is not None:
            head.append(f"  ~{estimate_tokens(item.text)} tokens", style="dim")
        if origin is not None:
            head.append("\norigin: ", style="dim")
            head.append(visible(origin.describe()), style=ORIGIN_COLOURS.get(origin.kind, ""))
            if origin.run_id:
                head.append(f"  (run {visible(origin.run_id)})", style="dim")
        with Vertical(id="item-box"):
            yield Static(head, id="item-head")
            with VerticalScroll(id="item-scroll"):
                yield Static(plain(item.text if item else "(this item is not stored)"), id="item-text")
        yield Footer()

    async def action_dismiss(self, result: str | None = None) -> None:
        """Close."""
        self.dismiss(None)

    def action_copy(self) -> None:
        """Copy the item's whole text to the clipboard."""
        if self.item is not None:
            self.app.copy_to_clipboard(self.item.text)
            self.notify(f"copied {len(self.item.text)} characters", timeout=2)

    def action_choose(self, what: str) -> None:
        """Close and ask the screen below to explain the item or go to its origin."""
        self.dismiss(what)

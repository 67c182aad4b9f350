"""Creating a persona: name, persona text, whether it says it is an AI, and its tools."""

from __future__ import annotations

from typing import Any, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, SelectionList, Static, TextArea

from ..sandbox._personas import MAX_NAME


class PersonaFormScreen(ModalScreen[dict[str, Any] | None]):
    """The new persona's fields; ctrl+s (or Create) returns them, escape cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "save", "Create", priority=True),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(self, tools: tuple[str, ...]) -> None:
        super().__init__()
        self.tools = tools

    def compose(self) -> ComposeResult:
        with Vertical(id="persona-form", classes="form"):
            yield Static("New persona", classes="form-title")
            yield Label("Name")
            yield Input(placeholder="e.g. Ada", id="name", max_length=MAX_NAME)
            yield Label("Persona (who it is, how it talks)")
            yield TextArea(id="persona", soft_wrap=True, show_line_numbers=False)
            yield Checkbox("Discloses being an AI", value=True, id="discloses")
            yield Label("Tools (space toggles)")
            yield SelectionList[str](*[(name, name) for name in self.tools], id="tools")
            yield Static("", id="form-error", classes="form-error")
            yield Static("tab moves between fields · ctrl+s creates · escape cancels", classes="form-hint")
            with Horizontal(classes="form-buttons"):
                yield Button("Create", variant="primary", id="create")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#name", Input).focus()

    def values(self) -> dict[str, Any]:
        """The fields as entered."""
        return {
            "name": self.query_one("#name", Input).value.strip(),
            "persona": self.query_one("#persona", TextArea).text.strip(),
            "discloses_ai": self.query_one("#discloses", Checkbox).value,
            "tools": list(self.query_one("#tools", SelectionList).selected),
        }

    def action_save(self) -> None:
        """Return the fields (when name and persona are filled in)."""
        values = self.values()
        missing = [label for key, label in (("name", "a name"), ("persona", "a persona text")) if not values[key]]
        if missing:
            self.query_one("#form-error", Static).update("Needs " + " and ".join(missing) + ".")
            self.query_one("#name" if not values["name"] else "#persona").focus()
            return
        self.dismiss(values)

    def action_cancel(self) -> None:
        """Close without creating."""
        self.dismiss(None)

    @on(Button.Pressed, "#create")
    def _create(self) -> None:
        self.action_save()

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.action_cancel()

    @on(Input.Submitted, "#name")
    def _name_done(self) -> None:
        self.query_one("#persona", TextArea).focus()

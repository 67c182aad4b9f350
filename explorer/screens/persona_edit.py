"""Editing a persona one field at a time: pick the field, then change it in place."""

from __future__ import annotations

from typing import Any, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Checkbox, Input, OptionList, SelectionList, Static, TextArea
from textual.widgets.option_list import Option

from tracer import one_line

from .._format import plain, visible
from ..sandbox import FIELDS, Persona
from ..sandbox._personas import MAX_NAME

_LABELS = {"name": "Name", "persona": "Persona", "discloses_ai": "Discloses being an AI", "tools": "Tools"}


def _shown(persona: Persona, field: str) -> str:
    if field == "discloses_ai":
        return "yes" if persona.discloses_ai else "no"
    if field == "tools":
        return visible(", ".join(persona.tools)) or "none"
    return one_line(str(getattr(persona, field)), 40)


class FieldPickerScreen(ModalScreen[str | None]):
    """Which field to edit."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, persona: Persona) -> None:
        super().__init__()
        self.persona = persona

    def compose(self) -> ComposeResult:
        with Vertical(id="field-picker", classes="form"):
            yield Static(plain(f"Edit {self.persona.name}: which field?"), classes="form-title")
            yield OptionList(  # (an option's str is markup: a Text is shown as it is)
                *[Option(plain(f"{_LABELS[f]}: {_shown(self.persona, f)}"), id=f) for f in FIELDS], id="fields"
            )

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        """Close without editing."""
        self.dismiss(None)


class FieldEditorScreen(ModalScreen[Any]):
    """One field's editor, prefilled with its current value; ctrl+s (or enter on a name) saves."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "save", "Save", priority=True),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(self, persona: Persona, field: str, tools: tuple[str, ...]) -> None:
        super().__init__()
        self.persona = persona
        self.field = field
        self.tools = tools

    def compose(self) -> ComposeResult:
        persona, field = self.persona, self.field
        with Vertical(id="field-editor", classes="form"):
            yield Static(plain(f"{persona.name}: {_LABELS[field]}"), classes="form-title")
            if field == "name":
                # prefilled and not selected: typing edits the name in place instead of replacing it
                yield Input(value=persona.name, id="value", select_on_focus=False, max_length=MAX_NAME)
            elif field == "persona":
                yield TextArea(persona.persona, id="value", soft_wrap=True, show_line_numbers=False)
            elif field == "discloses_ai":
                yield Checkbox("Discloses being an AI", value=persona.discloses_ai, id="value")
            else:
                yield SelectionList[str](*[(t, t, t in persona.tools) for t in self.tools], id="value")
            yield Static("ctrl+s saves · escape cancels", classes="form-hint")

    def on_mount(self) -> None:
        editor = self.query_one("#value")
        editor.focus()
        # edit in place: the cursor waits at the end of the current text
        if isinstance(editor, TextArea):
            editor.move_cursor(editor.document.end)
        elif isinstance(editor, Input):
            editor.cursor_position = len(editor.value)

    def value(self) -> Any:
        """The edited value."""
        editor = self.query_one("#value")
        if isinstance(editor, Input):
            return editor.value.strip()
        if isinstance(editor, TextArea):
            return editor.text.strip()
        if isinstance(editor, Checkbox):
            return editor.value
        assert isinstance(editor, SelectionList)
        return list(editor.selected)

    def action_save(self) -> None:
        """Return the new value."""
        self.dismiss(self.value())

    def action_cancel(self) -> None:
        """Close without saving."""
        self.dismiss(None)

    @on(Input.Submitted, "#value")
    def _submitted(self) -> None:
        self.action_save()

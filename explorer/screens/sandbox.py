"""The persona sandbox: the saved personas, and the keys to create, chat with, edit and delete them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from .._format import plain, visible
from ..components._keys import MovableTable
from ..sandbox import Persona, PersonaStore
from .chat import ChatScreen
from .confirm import ConfirmScreen
from .persona_edit import FieldEditorScreen, FieldPickerScreen
from .persona_form import PersonaFormScreen


class SandboxScreen(Screen[None]):
    """The personas saved in the store, one per row."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "create", "New"),
        Binding("enter", "chat", "Chat"),
        Binding("e", "edit", "Edit"),
        Binding("d", "delete", "Delete"),
        Binding("escape", "back", "Back"),
        Binding("q", "quit", "Quit", show=False),
    ]

    class Loaded(Message):
        """The personas were read (posted by the worker)."""

        def __init__(self, personas: list[Persona], select: str | None) -> None:
            super().__init__()
            self.personas = personas
            self.select = select

    class Failed(Message):
        """A sandbox operation failed; ``error`` says why."""

        def __init__(self, error: str) -> None:
            super().__init__()
            self.error = error

    def __init__(self, *, base: bool = False) -> None:
        super().__init__()
        self.base = base
        self.personas: list[Persona] = []

    @property
    def store(self) -> PersonaStore:
        """The persona store of the app."""
        personas: PersonaStore | None = getattr(self.app, "personas", None)
        assert personas is not None, "the sandbox needs a writable store"
        return personas

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("Personas · n: new · enter: chat · e: edit · d: delete", id="sandbox-title")
        table: DataTable[str | Text] = MovableTable(cursor_type="row", id="personas")
        yield table
        yield Static("", id="persona-detail")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#personas", DataTable)
        table.add_column("name", width=18)
        table.add_column("says AI", width=7)
        table.add_column("tools", width=20)
        table.add_column("persona", width=max(16, self.app.size.width - 59))
        table.focus()
        self.reload()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "back":
            return not self.base
        if action == "quit":
            return self.base
        return True

    # ------------------------------------------------------------------ reading

    def _run(self, job: Callable[[], Any], select: Callable[[Any], str | None] = lambda _: None) -> None:
        """Do ``job`` (database work) in a worker thread, then reload the list."""
        self._work(job, select)

    @work(thread=True, exclusive=True, group="sandbox", exit_on_error=False)
    def _work(self, job: Callable[[], Any], select: Callable[[Any], str | None]) -> None:
        try:
            result = job()
            personas = self.store.list()
        except Exception as exc:  # a SandboxError says what to fix; anything else still must not crash the app
            self.post_message(self.Failed(str(exc)))
            return
        self.post_message(self.Loaded(personas, select(result)))

    def reload(self, select: str | None = None) -> None:
        """Read the personas again."""
        self._run(lambda: None, lambda _: select)

    def on_sandbox_screen_loaded(self, message: Loaded) -> None:
        self.personas = message.personas
        table = self.query_one("#personas", DataTable)
        keep = message.select or self._current_id()
        table.clear()
        for p in self.personas:
            table.add_row(
                p.name, "yes" if p.discloses_ai else "no", ", ".join(p.tools) or "-",
                " ".join(p.persona.split()), key=p.id,
            )
        if not self.personas:
            self.query_one("#persona-detail", Static).update(plain("No personas yet: press n to create one."))
        elif keep is not None and keep in {p.id for p in self.personas}:
            table.move_cursor(row=table.get_row_index(keep), animate=False)
        self._show_detail()

    def on_sandbox_screen_failed(self, message: Failed) -> None:
        self.notify(message.error, severity="error", timeout=6)

    def _current_id(self) -> str | None:
        table = self.query_one("#personas", DataTable)
        if table.row_count == 0 or not self.personas:
            return None
        row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return str(row_key.value)

    def current(self) -> Persona | None:
        """The persona under the cursor."""
        wanted = self._current_id()
        return next((p for p in self.personas if p.id == wanted), None)

    def _show_detail(self) -> None:
        persona = self.current()
        if persona is None:
            return
        text = Text()
        text.append(visible(persona.name), style="bold")
        text.append(f"  {'discloses being an AI' if persona.discloses_ai else 'does not say it is an AI'}", style="dim")
        text.append(f"\n{visible(persona.persona)}")
        self.query_one("#persona-detail", Static).update(text)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_chat()

    # ------------------------------------------------------------------ actions

    def action_create(self) -> None:
        """Create a persona."""
        def created(values: dict[str, Any] | None) -> None:
            if values is not None:
                self._run(lambda: self.store.create(**values), lambda p: p.id)

        self.app.push_screen(PersonaFormScreen(self.store.known_tools), created)

    def action_chat(self) -> None:
        """Chat with the persona under the cursor (its conversation resumes)."""
        persona = self.current()
        if persona is not None:
            self.app.push_screen(ChatScreen(persona), lambda _: self.reload(persona.id))

    def action_edit(self) -> None:
        """Edit one field of the persona under the cursor."""
        persona = self.current()
        if persona is None:
            return

        def edited(field: str, value: Any) -> None:
            self._run(lambda: self.store.update(persona.id, **{field: value}), lambda p: p.id)

        def picked(field: str | None) -> None:
            if field is not None:
                self.app.push_screen(
                    FieldEditorScreen(persona, field, self.store.known_tools),
                    lambda value: edited(field, value) if value is not None else None,
                )

        self.app.push_screen(FieldPickerScreen(persona), picked)

    def action_delete(self) -> None:
        """Delete the persona under the cursor (after asking)."""
        persona = self.current()
        if persona is None:
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._run(lambda: self.store.delete(persona.id))

        self.app.push_screen(
            ConfirmScreen(f"Delete persona {persona.name!r} and its conversation? (Its recorded runs stay.)"),
            answered,
        )

    def action_back(self) -> None:
        """Back to the runs."""
        self.app.pop_screen()

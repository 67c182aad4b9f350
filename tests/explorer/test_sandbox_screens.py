"""The persona sandbox driven with Pilot: create, chat (and resume), edit one field, delete."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.widgets import Input, RichLog, TextArea

from explorer import ExplorerApp
from explorer.screens.chat import ChatScreen
from explorer.screens.persona_edit import FieldEditorScreen, FieldPickerScreen
from explorer.screens.persona_form import PersonaFormScreen
from explorer.screens.sandbox import SandboxScreen
from tracer import RunFilter


def _log_text(screen: Any) -> str:
    return "\n".join(line.text for line in screen.query_one(RichLog).lines)


async def test_create_chat_resume_edit_and_delete_a_persona(
    open_app: Callable[..., ExplorerApp], sample_copy: Path, settle: Any
) -> None:
    app = open_app(sample_copy)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("p")
        await settle(pilot)
        sandbox = app.screen
        assert isinstance(sandbox, SandboxScreen) and sandbox.personas == []

        # create: name, persona, disclosure (kept on), the check_availability tool ticked
        await pilot.press("n")
        form = app.screen
        assert isinstance(form, PersonaFormScreen)
        await pilot.press(*"Ada", "enter")
        await pilot.press(*"You are Ada, a terse scheduler.")
        await pilot.press("tab", "tab", "space")  # past the disclosure checkbox to the tools list
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert app.screen is sandbox
        [ada] = sandbox.personas
        assert (ada.name, ada.persona, ada.discloses_ai, ada.tools) == (
            "Ada", "You are Ada, a terse scheduler.", True, ("check_availability",))

        # chat: two turns, each a recorded run of Ada's session; /exit saves and goes back
        await pilot.press("enter")
        await settle(pilot)
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        await pilot.press(*"hello", "enter")
        await settle(pilot)
        await pilot.press(*"again", "enter")
        await settle(pilot)
        assert "echo: again (message 2)" in _log_text(chat)
        await pilot.press(*"/exit", "enter")
        await settle(pilot)
        assert app.screen is sandbox
        runs = app.source.list_runs(RunFilter(session_id=ada.conversation_id))
        assert [r.input for r in runs] == ["again", "hello"] and {r.agent for r in runs} == {"Ada"}

        # chat again: the conversation resumes (the model sees the earlier messages); ctrl+d ends it
        await pilot.press("enter")
        await settle(pilot)
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        assert "resumed" in _log_text(chat) and "echo: hello (message 1)" in _log_text(chat)
        await pilot.press(*"third", "enter")
        await settle(pilot)
        assert "echo: third (message 3)" in _log_text(chat)
        await pilot.press("ctrl+d")
        await settle(pilot)
        assert app.screen is sandbox

        # edit the name: the input is prefilled, so typing appends in place
        await pilot.press("e")
        assert isinstance(app.screen, FieldPickerScreen)
        await pilot.press("enter")  # Name is the first field
        editor = app.screen
        assert isinstance(editor, FieldEditorScreen)
        assert editor.query_one(Input).value == "Ada"
        await pilot.press(*" Lovelace", "enter")
        await settle(pilot)
        # edit the persona: the text area is prefilled too, the cursor at its end
        await pilot.press("e", "down", "enter")
        editor = app.screen
        assert isinstance(editor, FieldEditorScreen)
        assert editor.query_one(TextArea).text == "You are Ada, a terse scheduler."
        await pilot.press(*" Be kind.", "ctrl+s")
        await settle(pilot)
        # switch the disclosure off
        await pilot.press("e", "down", "down", "enter", "space", "ctrl+s")
        await settle(pilot)
        [edited] = sandbox.personas
        assert (edited.id, edited.name, edited.persona, edited.discloses_ai) == (
            ada.id, "Ada Lovelace", "You are Ada, a terse scheduler. Be kind.", False)
        assert edited.conversation_id == ada.conversation_id, "a rename keeps the session"

        # delete (after confirming): the persona and its conversation go, its runs stay
        await pilot.press("d", "y")
        await settle(pilot)
        assert sandbox.personas == []
        assert app.personas is not None and app.personas.load_conversation(ada.id) is None
        assert app.source.count_runs(RunFilter(session_id=ada.conversation_id)) == 3


async def test_a_persona_without_name_is_not_created(
    open_app: Callable[..., ExplorerApp], sample_copy: Path, settle: Any
) -> None:
    app = open_app(sample_copy, start="sandbox")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("n", "ctrl+s")
        form = app.screen
        assert isinstance(form, PersonaFormScreen)
        assert "Needs a name and a persona text." in str(form.query_one("#form-error").render())
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, SandboxScreen) and app.screen.personas == []


async def test_a_name_past_the_limit_cannot_be_typed_so_nothing_typed_is_lost(
    open_app: Callable[..., ExplorerApp], sample_copy: Path, settle: Any
) -> None:
    """The store refuses a name over 64 characters after the form closed (its text lost); the form stops at 64."""
    from textual.widgets import Input

    from explorer.sandbox._personas import MAX_NAME

    app = open_app(sample_copy, start="sandbox")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("n", *("Ä" * (MAX_NAME + 10)), "enter", *"A friendly bot.", "ctrl+s")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, SandboxScreen)
        assert [p.name for p in screen.personas] == ["Ä" * MAX_NAME] and not app._notifications
        await pilot.press("e")
        await settle(pilot)
        await pilot.press("enter")  # the name field
        await settle(pilot)
        await pilot.press("end", *"more")
        assert len(app.screen.query_one("#value", Input).value) == MAX_NAME


async def test_a_duplicate_name_is_refused_with_a_message(
    open_app: Callable[..., ExplorerApp], sample_copy: Path, settle: Any
) -> None:
    app = open_app(sample_copy, start="sandbox")
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.personas is not None
        app.personas.create("Ada", "You are Ada.")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, SandboxScreen)
        screen.reload()
        await settle(pilot)
        await pilot.press("n", *"ada", "enter", *"Another Ada.", "ctrl+s")
        await settle(pilot)
        assert [p.name for p in screen.personas] == ["Ada"]
        assert any("already a persona called 'Ada'" in n.message for n in app._notifications)

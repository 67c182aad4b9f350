"""Chatting with a persona: its conversation resumes; `/exit` or ctrl+d ends the chat and saves it."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, RichLog, Static

from agent import RunFinished, ToolFinished, ToolStarted

from .._format import failure, plain, visible
from ..sandbox import ChatLine, Persona, SandboxChat

_ROLE_STYLES = {"user": "bold green", "assistant": "bold yellow", "tool": "cyan"}


class ChatScreen(Screen[None]):
    """A chat with one persona; each turn is a recorded run."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+d", "end", "End chat", priority=True),
        Binding("escape", "end", "End chat", show=False),
        Binding("ctrl+o", "open_run", "Open last run"),
    ]

    class Ready(Message):
        """The chat was set up (its conversation read from the store)."""

        def __init__(self, chat: SandboxChat) -> None:
            super().__init__()
            self.chat = chat

    class Failed(Message):
        """The chat could not be set up or a turn failed to save."""

        def __init__(self, error: str) -> None:
            super().__init__()
            self.error = error

    def __init__(self, persona: Persona) -> None:
        super().__init__()
        self.persona = persona
        self.chat: SandboxChat | None = None
        self.last_run: str | None = None
        self._busy = False

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(plain(f"Chat with {self.persona.name} · /exit or ctrl+d ends and saves"), id="chat-title")
        yield RichLog(id="chat-log", wrap=True, markup=False, auto_scroll=True, min_width=20)
        yield Input(placeholder="Say something (/exit to end)", id="chat-input", disabled=True)
        yield Footer()

    @property
    def log_view(self) -> RichLog:
        """The conversation as shown."""
        return self.query_one("#chat-log", RichLog)

    def on_mount(self) -> None:
        self.set_up()

    @work(thread=True, exclusive=True, group="chat-setup", exit_on_error=False)
    def set_up(self) -> None:
        """Read the persona's conversation and build its agent (in a worker thread: database work)."""
        app = self.app
        personas = app.personas  # type: ignore[attr-defined]
        factory = app.chat_provider  # type: ignore[attr-defined]
        try:
            chat = SandboxChat(self.persona, personas, provider=factory() if factory else None)
        except Exception as exc:  # an unreadable conversation, a bad tool name: shown, never answered fresh
            self.post_message(self.Failed(str(exc)))
            return
        self.post_message(self.Ready(chat))

    def on_chat_screen_ready(self, message: Ready) -> None:
        self.chat = message.chat
        history = message.chat.history()
        if history:
            self.log_view.write(Text(f"(resumed: {len(history)} earlier lines)", style="dim"))
        for line in history:
            self._write(line)
        box = self.query_one("#chat-input", Input)
        box.disabled = False
        box.focus()

    def on_chat_screen_failed(self, message: Failed) -> None:
        self.log_view.write(plain(message.error, "red"))
        self.notify(message.error, severity="error", timeout=6)

    def _write(self, line: ChatLine) -> None:
        who = {"user": "you", "assistant": self.persona.name, "tool": "tool"}[line.role]
        text = Text()
        text.append(f"{visible(who)}: ", style=_ROLE_STYLES[line.role])
        text.append(visible(line.text), style="dim" if line.role == "tool" else "")
        self.log_view.write(text)

    @on(Input.Submitted, "#chat-input")
    def _said(self, event: Input.Submitted) -> None:
        message = event.value.strip()
        event.input.value = ""
        if not message:
            return
        if message in ("/exit", "/quit"):
            self.action_end()
            return
        if self.chat is None or self._busy:
            self.notify("wait for the answer to the last message", timeout=2)
            return
        self._write(ChatLine("user", message))
        self._busy = True
        self.turn(message)

    @work(exclusive=True, group="chat-turn", exit_on_error=False)
    async def turn(self, message: str) -> None:
        """One turn: stream the run's events into the log, then make the run visible to the runs table."""
        assert self.chat is not None
        try:
            async for event in self.chat.stream(message):
                if isinstance(event, ToolStarted):
                    self.log_view.write(plain(f"  … {event.progress or event.name}  {event.name}({event.arguments})",
                                              "dim cyan"))
                elif isinstance(event, ToolFinished) and event.is_error:
                    self.log_view.write(plain(f"  ✗ {event.name}: {event.result}", "red"))
                elif isinstance(event, RunFinished):
                    result = event.result
                    self.last_run = result.run_id
                    if result.status == "answered":
                        self._write(ChatLine("assistant", result.answer))
                    else:
                        self.log_view.write(plain(f"  run ended {result.status}: {result.error or result.question}",
                                                  "red"))
        except Exception as exc:  # saving failed: the reader must know the conversation was not kept
            self.log_view.write(plain(f"could not save the conversation: {failure(exc)}", "red"))
        finally:
            self._busy = False

    def action_end(self) -> None:
        """End the chat (the conversation was saved after each turn) and go back."""
        if self._busy:
            self.notify("wait for the answer, then end the chat", timeout=2)
            return
        self.dismiss(None)

    def action_open_run(self) -> None:
        """Open the run of the last turn."""
        if self.last_run is None:
            self.notify("no turn yet in this chat", timeout=2)
            return
        self.app.open_run(self.last_run)  # type: ignore[attr-defined]

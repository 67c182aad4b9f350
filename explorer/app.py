"""The explorer app: recordings, why, the persona sandbox and (attached to a host) its live sessions."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, ClassVar, Literal

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.notifications import SeverityLevel
from textual.screen import Screen

from agent.providers import Provider
from tracer import Run

from ._format import visible
from ._keymap import help_rows, palette_commands
from ._prefetch import RunLoad
from ._source import RecordingSource
from .sandbox import PersonaStore
from .screens.help import HelpScreen
from .screens.run import RunScreen
from .screens.runs import RunsScreen
from .screens.why import WhyScreen

Start = Literal["runs", "sandbox", "host"]


class ExplorerApp(App[None]):
    """Browse recorded runs, ask why, chat with personas.

    ``source`` is where runs are read from (:class:`StoreSource` or :class:`HostSource`).
    ``personas`` enables the sandbox (a writable local store). ``host`` enables the host panel:
    any object with ``sessions()`` and ``send(message, session_id=None, decision=None)``.
    ``run_id``/``stage_id`` open that run (and select that stage) on start. ``poll_interval``
    seconds between checks for new runs on a live source (None: never). ``evidence_provider`` and
    ``evidence_tools`` choose, from the original run, the live model and real tools that the
    counterfactual and blame actions re-run it with (default: as ``footprint blame`` does).

    An error nothing in the app handled ends it, as in any Textual app; :meth:`run` then raises
    it (``crash``), so ``footprint explore`` fails with a one-line error and a non-zero exit code
    instead of printing Textual's traceback (its locals included) and exiting 0.
    """

    CSS_PATH = "explorer.tcss"
    TITLE = "footprint explorer"
    ENABLE_COMMAND_PALETTE = True  # ctrl+p: the screen's actions by name (get_system_commands)
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "Keys", key_display="?"),
        # F1 too: where a text box has the focus (a chat), "?" is a character typed into it
        Binding("f1", "help", "Keys", show=False),
        # q quits from every screen (a focused text box still takes the letter as typing), as does
        # Textual's ctrl+q; ctrl+c is left to Textual: it copies the selected text
        Binding("q", "quit", "Quit", show=False),
    ]

    def __init__(
        self,
        source: RecordingSource,
        *,
        run_id: str | None = None,
        stage_id: str | None = None,
        start: Start = "runs",
        personas: PersonaStore | None = None,
        chat_provider: Callable[[], Provider] | None = None,
        host: Any | None = None,
        poll_interval: float | None = 2.0,
        evidence_provider: Callable[[Run], Provider] | None = None,
        evidence_tools: Callable[[Run], Any] | None = None,
    ) -> None:
        super().__init__()
        self.source = source
        self.personas = personas
        self.chat_provider = chat_provider
        self.host = host
        self.poll_interval = poll_interval
        self.evidence_provider = evidence_provider
        self.evidence_tools = evidence_tools
        self.start = start
        self._open_at = (run_id, stage_id)
        self.sub_title = visible(source.label)
        self.crash: Exception | None = None  # the error that ended the app, if one did
        self._reader = ThreadPoolExecutor(max_workers=2, thread_name_prefix="explorer-read")

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """Run the app until it is closed (as ``App.run``); raises the error that ended it, if one did."""
        result = super().run(*args, **kwargs)
        if self.crash is not None:
            raise self.crash
        return result

    def _handle_exception(self, error: Exception) -> None:
        # Textual's one seam for an error no handler caught: it keeps it to print as a traceback
        # once the terminal is restored; kept here instead, for run() to raise
        if self.crash is None:
            self.crash = error
        super()._handle_exception(error)

    def _print_error_renderables(self) -> None:
        if self.crash is None:  # (an exit message, say: printed as Textual prints it)
            super()._print_error_renderables()
        else:  # the crash is raised by run(), and footprint's CLI prints it on one line
            self._exit_renderables.clear()

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """A toast, always of plain text: what the explorer says in one quotes what it is about (a run id,
        a session, an error's message), so it is never read as markup, and its control characters
        are :func:`~explorer._format.visible`. (``markup`` is taken for Textual's signature, and ignored.)"""
        super().notify(visible(message), title=visible(title), severity=severity, timeout=timeout, markup=False)

    def get_default_screen(self) -> Screen[Any]:
        if self.start == "sandbox":
            from .screens.sandbox import SandboxScreen

            return SandboxScreen(base=True)
        return RunsScreen()

    def on_unmount(self) -> None:
        self._reader.shutdown(wait=False, cancel_futures=True)
        gc.unfreeze()

    def on_mount(self) -> None:
        # What exists by now (the modules, Textual's own objects: ~140,000) lives as long as the
        # app does. Out of the collector's sight, a full collection while a run opens scans only
        # what the explorer made since: ~10 ms instead of ~70.
        gc.freeze()
        run_id, stage_id = self._open_at
        if run_id is not None:
            self.open_run(run_id, stage_id)
        elif self.start == "host":
            self.open_host()

    # ------------------------------------------------------------------ navigation

    def open_run(self, run_id: str, stage_id: str | None = None) -> None:
        """Show a run (and select a stage of it)."""
        self.push_screen(RunScreen(run_id, stage_id, prefetch=self.prefetch(run_id, stage_id)))

    def prefetch(self, run_id: str, stage_id: str | None = None) -> RunLoad:
        """Start reading a run's opening now, on a thread, so it loads while its screen is being built."""
        return RunLoad.start(self._reader, self.source, run_id, stage_id)

    def open_why(self, run_id: str, item: str | None = None) -> None:
        """Show why a run answered as it did (or where one of its items came from)."""
        self.push_screen(WhyScreen(run_id, item))

    def go_to_stage(self, run_id: str, stage_id: str) -> None:
        """Select a stage: in the run screen already open for its run, else in a new one."""
        open_already = [s for s in self.screen_stack if isinstance(s, RunScreen) and s.run_id == run_id]
        if not open_already:
            self.open_run(run_id, stage_id)
            return
        target = open_already[-1]
        while self.screen is not target:
            self.pop_screen()
        target.select_stage(stage_id)

    def open_sandbox(self) -> None:
        """Show the persona sandbox."""
        if self.personas is None:
            self.notify("the sandbox writes personas into the store: open it with footprint sandbox", severity="warning")
            return
        from .screens.sandbox import SandboxScreen

        self.push_screen(SandboxScreen())

    def open_host(self) -> None:
        """Show the host's live sessions."""
        if self.host is None:
            self.notify("not attached to a host (footprint explore --host URL, or footprint up)", severity="warning")
            return
        from .screens.host import HostScreen

        self.push_screen(HostScreen())

    def open_agents(self) -> None:
        """Show the host's stored agents (its gateway) and their recent runs."""
        if self.host is None:
            self.notify("not attached to a host (footprint explore --host URL, or footprint up)", severity="warning")
            return
        from .screens.agents import AgentsScreen

        self.push_screen(AgentsScreen())

    # ------------------------------------------------------------------ help

    def action_help(self) -> None:
        """List the keys of the current screen: its own first, then the focused list's, then every screen's."""
        screen = self.screen
        if isinstance(screen, HelpScreen):
            return
        title = type(screen).__name__.removesuffix("Screen").lower() or "screen"
        self.push_screen(HelpScreen(title, help_rows(self, screen)))

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The command palette (ctrl+p): the screen's own actions by name, then Textual's (theme, quit...)."""
        for title, help_text, action, node in palette_commands(self, screen):
            yield SystemCommand(title, help_text, partial(self.run_action, action, node))
        yield from super().get_system_commands(screen)

"""The verdict of replay, counterfactual or blame, and the re-runs it recorded."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from .._format import visible
from .._verdicts import Verdict

_HEADLINE = {"identical": "green", "holds": "green", "no culprit": "green", "flips": "red", "differs": "red",
             "culprits found": "red", "inconclusive": "yellow"}


class VerdictScreen(ModalScreen[str | None]):
    """A verdict; ``o`` closes it and opens the first run it recorded."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "Close"),
        Binding("o", "open", "Open re-run"),
    ]

    def __init__(self, verdict: Verdict) -> None:
        super().__init__()
        self.verdict = verdict

    def compose(self) -> ComposeResult:
        verdict = self.verdict
        head = Text()
        head.append(f"{verdict.action}: ", style="bold")
        head.append(verdict.verdict, style="bold " + _HEADLINE.get(verdict.verdict, ""))
        body = Text()
        for text, style in verdict.lines:
            body.append(visible(text) + "\n", style=style)  # (a suspect's source, a divergence's reason: recorded)
        if verdict.runs:
            body.append(f"\nRecorded {len(verdict.runs)} run(s), forked from the original; o opens the first.",
                        style="dim")
        with Vertical(id="verdict-box"):
            yield Static(head, id="verdict-head")
            with VerticalScroll(id="verdict-scroll"):
                yield Static(body)
        yield Footer()

    def action_close(self) -> None:
        """Close."""
        self.dismiss(None)

    def action_open(self) -> None:
        """Close and open the first re-run."""
        self.dismiss(self.verdict.runs[0] if self.verdict.runs else None)

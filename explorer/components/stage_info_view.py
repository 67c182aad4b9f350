"""Any stage that is not an inference or a tool call: what went in, what came out, its attributes."""

from __future__ import annotations

import json

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from tracer import RunData, Stage, StageKind, one_line

from .._format import ORIGIN_COLOURS, clock, duration, visible
from .._prefetch import has_snapshot
from ._snapshots import SnapshotsWanted


class StageInfoView(VerticalScroll):
    """The details of a stage: timing, attributes, inputs with origins, outputs."""

    DEFAULT_CSS = """
    StageInfoView { height: 1fr; }
    StageInfoView > Static { height: auto; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.stage: Stage | None = None
        self.waiting = False  # for the stage to be read (its inputs and outputs)

    def compose(self) -> ComposeResult:
        yield Static("", id="stage-info-body")

    def show(self, data: RunData, stage: Stage) -> None:
        """Show ``stage`` of ``data``; what is not read yet says "reading…" until it is."""
        self.stage = stage
        partial = not has_snapshot(data, stage.id)
        self.waiting = partial
        if partial:
            self.post_message(SnapshotsWanted([stage.id]))
        text = Text()
        text.append(visible(stage.kind), style="bold")
        if stage.name and stage.name != stage.kind:
            text.append(f" {visible(stage.name)}")
        text.append(f"  {visible(stage.status)}", style="green" if stage.status == "ok" else "red")
        took = duration(stage.started_at, stage.ended_at)
        text.append(f"\nstarted {clock(stage.started_at)}" + (f"  took {took}" if took else ""), style="dim")
        if stage.error:
            text.append(f"\nerror: {visible(stage.error)}", style="red")
        produced = data.outputs.get(stage.id, [])
        outputs = [data.items[h] for h in produced if h in data.items]
        if partial and len(outputs) < len(produced):
            text.append("\n\nOutput\n", style="bold")
            text.append("reading…\n", style="dim")
        elif stage.kind == StageKind.ANSWER and outputs:
            text.append("\n\nAnswer\n", style="bold")
            text.append(visible(outputs[-1].text))
            text.append("\n\nw: why this answer", style="dim")
        elif outputs:
            text.append("\n\nOutput\n", style="bold")
            for item in outputs:
                text.append(f"{visible(item.kind)}: ", style="dim")
                text.append(visible(item.text) + "\n")
        entries = data.snapshot(stage.id, include_dropped=True)
        if partial and stage.kind != StageKind.ANSWER:
            text.append("\nInput\n", style="bold")
            text.append("reading…\n", style="dim")
        elif entries and stage.kind != StageKind.ANSWER:
            text.append("\nInput\n", style="bold")
            for entry in entries:
                seen = data.items.get(entry.item_hash)
                colour = ORIGIN_COLOURS.get(entry.origin.kind, "")
                mark = "" if entry.included else f" (not in context: {visible(entry.dropped_by)})"
                text.append(f"{visible(seen.kind) if seen else '?'} ", style="dim")
                text.append(one_line(seen.text if seen else "", 60), style=colour if entry.included else "dim strike")
                text.append(f"  ← {visible(entry.origin.describe())}{mark}\n", style="dim")
        if stage.attributes:
            text.append("\nAttributes\n", style="bold")
            for key, value in sorted(stage.attributes.items()):
                shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                text.append(f"{visible(key)}: ", style="dim")
                text.append(one_line(shown, 200) + "\n")
        self.query_one("#stage-info-body", Static).update(text)
        self.scroll_home(animate=False)

    def snapshots_read(self, data: RunData) -> None:
        """More snapshots were read: show the stage's inputs if they were awaited."""
        if self.waiting and self.stage is not None:
            self.show(data, self.stage)

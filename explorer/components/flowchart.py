"""The flowchart of a run: stages as boxes, edges as lines, a keyboard-driven selection.

Rendered with Textual's line API from a :class:`~explorer._flowlayout.FlowLayout`, so a run of
hundreds of stages costs only the rows on screen. A team's run is drawn with the runs of its
sub-agents framed inside it; the selection moves into and out of them like any other box.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tracer import RunData, Stage

from .._flowlayout import BOX_H, BOX_W, FlowLayout, default_stage, layout
from .._format import EDGE_COLOURS, STAGE_COLOURS


class Flowchart(ScrollView, can_focus=True):
    """A run's stages and edges; arrow keys move the selection, enter opens the stage."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "move('up')", "Up", show=False),
        Binding("down,j", "move('down')", "Down", show=False),
        Binding("left,h", "move('left')", "Left", show=False),
        Binding("right,l", "move('right')", "Right", show=False),
        Binding("home", "edge('first')", "First stage", show=False),
        Binding("end", "edge('last')", "Last stage", show=False),
        Binding("enter", "open", "Open stage", show=False),
        Binding("y", "copy_id", "Copy stage id", show=False),
    ]

    DEFAULT_CSS = """
    Flowchart { height: 1fr; }
    """

    selected: reactive[str | None] = reactive(None, init=False)

    class _StageMessage(Message):
        """Something happened to ``stage`` in ``flowchart``."""

        def __init__(self, flowchart: Flowchart, stage: Stage) -> None:
            super().__init__()
            self.flowchart = flowchart
            self.stage = stage

        @property
        def control(self) -> Flowchart:
            """The flowchart that posted it."""
            return self.flowchart

    class StageSelected(_StageMessage):
        """The selection moved to ``stage`` (posted on every move)."""

    class StageOpened(_StageMessage):
        """Enter was pressed on ``stage`` (the screen moves focus to its details)."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.data: RunData | None = None
        self.team_runs: dict[str, RunData] = {}  # the sub-agents' runs drawn inside, by id
        self.flow: FlowLayout | None = None
        self._stages: dict[str, Stage] = {}
        self._strips: dict[int, Strip] = {}

    # ------------------------------------------------------------------ data

    def show(self, data: RunData, select: str | None = None, children: Mapping[str, RunData] | None = None) -> None:
        """Draw ``data``'s flowchart and select ``select`` (default: the answer, else the last stage).

        ``children`` are the runs its sub-agents made (see :func:`tracer.child_runs`), drawn inside it.
        """
        self.data = data
        self.team_runs = dict(children or {})
        self.flow = layout(data, self.team_runs)
        self._stages = {s.id: s for run in (data, *self.team_runs.values()) for s in run.stages
                        if s.id in self.flow.boxes}
        self._strips.clear()
        self.virtual_size = Size(self.flow.width, self.flow.height)
        target = select if select in self._stages else default_stage(data)
        if target is not None:
            if self.selected == target:  # redrawn (a team's runs arrived): keep it in view
                self._reveal(target)
                self._announce(target)
            self.selected = target
        self.refresh()

    @property
    def stages(self) -> dict[str, Stage]:
        """Every stage drawn, by id: the run's and its sub-agents' runs'."""
        return self._stages

    @property
    def selected_stage(self) -> Stage | None:
        """The selected stage, if any."""
        return self._stages.get(self.selected) if self.selected else None

    def select(self, stage_id: str) -> bool:
        """Select a stage by id; False when this run has no such stage."""
        if stage_id not in self._stages:
            return False
        self.selected = stage_id
        return True

    def watch_selected(self, old: str | None, new: str | None) -> None:
        self._strips.clear()
        self.refresh()
        if new is not None:
            self._reveal(new)
            self._announce(new)

    def _announce(self, stage_id: str) -> None:
        self.post_message(self.StageSelected(self, self._stages[stage_id]))

    def _reveal(self, stage_id: str) -> None:
        if self.flow is None:
            return
        box = self.flow.boxes[stage_id]
        pad = self._pad()
        # keep the arrow above the box in view too, so the reader sees where it came from
        region = Region(box.x + pad, max(0, box.y - 2), BOX_W, BOX_H + 2)
        self.call_after_refresh(self.scroll_to_region, region, animate=False, immediate=True)

    # ------------------------------------------------------------------ keys

    def action_move(self, direction: str) -> None:
        """Move the selection by an arrow key."""
        if self.flow is None or self.selected is None:
            return
        target = self.flow.neighbour(self.selected, direction)
        if target is not None:
            self.selected = target

    def action_edge(self, which: str) -> None:
        """Select the first or the last stage."""
        if self.data is None or not self.data.stages:
            return
        stages = sorted(self.data.stages, key=lambda s: s.seq)
        self.selected = (stages[0] if which == "first" else stages[-1]).id

    def action_copy_id(self) -> None:
        """Copy the id of the selected stage to the clipboard."""
        stage = self.selected_stage
        if stage is not None:
            self.app.copy_to_clipboard(stage.id)
            self.notify(f"copied {stage.id}", timeout=2)

    def action_open(self) -> None:
        """Open the selected stage."""
        stage = self.selected_stage
        if stage is not None:
            self.post_message(self.StageOpened(self, stage))

    def on_click(self, event: events.Click) -> None:
        """Select the box under the mouse."""
        if self.flow is None:
            return
        x = event.x + int(self.scroll_offset.x) - self._pad()
        y = event.y + int(self.scroll_offset.y)
        if 0 <= y < self.flow.height and 0 <= x < self.flow.width:
            key = self.flow.styles[y][x]
            if key.startswith("box:"):
                self.selected = key[4:]
                if event.chain >= 2:
                    self.action_open()

    # ------------------------------------------------------------------ drawing

    def _pad(self) -> int:
        """Columns of space left of the canvas, centring it when the widget is wider."""
        if self.flow is None:
            return 0
        return max(0, (self.scrollable_content_region.width - self.flow.width) // 2)

    def on_resize(self, event: events.Resize) -> None:
        self._strips.clear()

    def _style(self, key: str, base: Style) -> Style:
        if key.startswith("box:"):
            stage_id = key[4:]
            stage = self._stages.get(stage_id)
            colour = "red" if stage is not None and stage.status == "error" else STAGE_COLOURS.get(
                stage.kind if stage else "", "white")
            if stage_id == self.selected:
                return base + Style(color=colour, reverse=True, bold=True)
            return base + Style(color=colour)
        if key.startswith("edge:"):
            return base + Style(color=EDGE_COLOURS.get(key[5:], "bright_black"))
        if key.startswith("frame:"):  # the boundary of a sub-agent's run
            return base + Style(color=STAGE_COLOURS["subagent"])
        return base

    def _row(self, y: int, base: Style) -> Strip:
        strip = self._strips.get(y)
        if strip is None:
            assert self.flow is not None
            chars, styles = self.flow.chars[y], self.flow.styles[y]
            segments: list[Segment] = []
            start = 0
            for x in range(1, len(chars) + 1):
                if x == len(chars) or styles[x] != styles[start]:
                    segments.append(Segment("".join(chars[start:x]), self._style(styles[start], base)))
                    start = x
            strip = Strip(segments, len(chars))
            self._strips[y] = strip
        return strip

    def render_line(self, y: int) -> Strip:
        """One row of the widget: a cropped row of the canvas."""
        width = self.scrollable_content_region.width
        scroll_x, scroll_y = self.scroll_offset
        row = scroll_y + y
        base = self.rich_style  # worked out from the styles on every access: once a line
        if self.flow is None or row >= self.flow.height:
            return Strip.blank(width, base)
        pad = self._pad()
        strip = self._row(row, base)
        if pad:
            strip = Strip([Segment(" " * pad, base), *strip], pad + strip.cell_length)
        return strip.crop_extend(scroll_x, scroll_x + width, base)

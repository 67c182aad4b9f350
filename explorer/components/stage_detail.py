"""The pane under a run's flowchart: the snapshot of an inference, a tool call, or any other stage."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import ContentSwitcher

from tracer import RunData, Stage, StageKind

from .snapshot_view import SnapshotView
from .stage_info_view import StageInfoView
from .tool_call_view import ToolCallView


class StageDetail(ContentSwitcher):
    """Shows the view that fits the selected stage's kind."""

    DEFAULT_CSS = """
    StageDetail { height: 1fr; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(initial="stage-info", id=id)

    def compose(self) -> ComposeResult:
        yield SnapshotView(id="snapshot")
        yield ToolCallView(id="tool-call")
        yield StageInfoView(id="stage-info")

    def show(self, data: RunData, stage: Stage) -> None:
        """Show the details of ``stage``."""
        if stage.kind == StageKind.INFERENCE:
            self.current = "snapshot"
            self.query_one(SnapshotView).show(data, stage)
        elif stage.kind == StageKind.TOOL:
            self.current = "tool-call"
            self.query_one(ToolCallView).show(data, stage)
        else:
            self.current = "stage-info"
            self.query_one(StageInfoView).show(data, stage)

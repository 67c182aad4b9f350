"""The pane under a run's flowchart: the snapshot of an inference, a tool call, or any other stage.

Each view is mounted the first time a stage of its kind is selected, so a run screen opens with
only the view it shows.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import ContentSwitcher

from tracer import RunData, Stage, StageKind

from .snapshot_view import SnapshotView
from .stage_info_view import StageInfoView
from .tool_call_view import ToolCallView

_VIEWS: dict[str, type[Widget]] = {"snapshot": SnapshotView, "tool-call": ToolCallView, "stage-info": StageInfoView}


class StageDetail(ContentSwitcher):
    """Shows the view that fits the selected stage's kind."""

    DEFAULT_CSS = """
    StageDetail { height: 1fr; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(initial="stage-info", id=id)
        self.names: dict[str, str] = {}  # the run's item names, once read (see RunScreen.read_names)

    def show_names(self, names: dict[str, str]) -> None:
        """The run's item names arrived: the snapshot view names its items with them."""
        self.names = names
        for view in self.query(SnapshotView):
            view.show_names(names)

    def compose(self) -> ComposeResult:
        yield StageInfoView(id="stage-info")

    async def _view(self, name: str) -> Widget:
        found = self.query(f"#{name}")
        if found:
            return found.first()
        view = _VIEWS[name](id=name)
        if isinstance(view, SnapshotView):
            view.names = self.names
        await self.mount(view)
        return view

    async def show(self, data: RunData, stage: Stage) -> None:
        """Show the details of ``stage`` (a view asks for a snapshot ``data`` lacks, and says it is reading it)."""
        views: dict[str, str] = {StageKind.INFERENCE: "snapshot", StageKind.TOOL: "tool-call"}
        name = views.get(stage.kind, "stage-info")
        view = await self._view(name)
        self.current = name
        view.show(data, stage)  # type: ignore[attr-defined]

    def snapshots_read(self, data: RunData) -> None:
        """More of ``data``'s snapshots were read: the view shown redraws if it was waiting for them."""
        if self.current:
            self.query_one(f"#{self.current}").snapshots_read(data)  # type: ignore[attr-defined]

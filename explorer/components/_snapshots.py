"""The message a stage's view posts when it shows a stage whose snapshot is not read yet."""

from __future__ import annotations

from textual.message import Message


class SnapshotsWanted(Message):
    """These stages' snapshots are wanted on screen (the run screen reads them, then the view redraws)."""

    def __init__(self, stage_ids: list[str]) -> None:
        super().__init__()
        self.stage_ids = stage_ids

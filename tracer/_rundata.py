"""Everything recorded about one run, loaded together: the unit that `why`, `diff`, `show`, the
explorer and the host's read API work on."""

from __future__ import annotations

from dataclasses import dataclass, field

from ._records import Edge, Item, Run, SnapshotEntry, Stage, StageKind


@dataclass
class RunData:
    """A run with its stages, edges, snapshots (stage inputs), outputs and the items they name."""

    run: Run
    stages: list[Stage]
    edges: list[Edge]
    inputs: dict[str, list[SnapshotEntry]] = field(default_factory=dict)
    outputs: dict[str, list[str]] = field(default_factory=dict)
    items: dict[str, Item] = field(default_factory=dict)

    def stage(self, stage_id: str) -> Stage:
        """The stage with ``stage_id`` (a KeyError names it when absent)."""
        for stage in self.stages:
            if stage.id == stage_id:
                return stage
        raise KeyError(f"run {self.run.id} has no stage {stage_id}")

    def has_stage(self, stage_id: str) -> bool:
        """True when the stage belongs to this run."""
        return any(s.id == stage_id for s in self.stages)

    def inferences(self) -> list[Stage]:
        """The inference stages in order."""
        return [s for s in self.stages if s.kind == StageKind.INFERENCE]

    def snapshot(self, stage_id: str, *, include_dropped: bool = False) -> list[SnapshotEntry]:
        """The context a stage saw, in order (and what was left out, when asked)."""
        entries = self.inputs.get(stage_id, [])
        return entries if include_dropped else [e for e in entries if e.included]

    def answer_hash(self) -> str | None:
        """The item the run answered with: the last output of its answer stage or last inference."""
        for kind in (StageKind.ANSWER, StageKind.INFERENCE, StageKind.PAUSE):
            for stage in reversed(self.stages):
                if stage.kind == kind and self.outputs.get(stage.id):
                    return self.outputs[stage.id][-1]
        return None

    def producer_of(self, item_hash: str) -> Stage | None:
        """The first stage of this run that output ``item_hash``."""
        for stage in self.stages:
            if item_hash in self.outputs.get(stage.id, ()):
                return stage
        return None

"""Reading a run for its screen: the outline and the stage it shows first now, the others when shown.

A long run's snapshots are most of what it holds (each inference saw the whole conversation so
far: 31,499 entries in a run of 500 stages), and the screen shows one stage at a time. So a run
opens with its stages, edges and outputs, and with the stage it shows first read whole (its
snapshot and the items it saw and output), as are the stages whose boxes show an output (the
question, the answer). The run screen reads any other stage when it is shown, on a worker thread,
and keeps it. A short run is read whole when it opens (a few milliseconds), so moving through it
never waits.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field

from tracer import Item, NotFoundError, RunData, SnapshotEntry, child_run_ids, child_runs

from ._flowlayout import OUTPUT_LABELLED, default_stage
from ._source import RecordingSource

#: A run of at most this many stages is read whole when it opens.
WHOLE_RUN_STAGES = 50


@dataclass
class OpenedRun(RunData):
    """A run as its screen holds it: the whole outline, and the stages read whole so far.

    ``read`` holds the stages whose snapshots are in ``inputs`` and whose items (those they saw and
    output) are in ``items``; of the others, only the stage, its edges and its outputs' hashes.
    """

    read: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, data: RunData, read: Iterable[str]) -> OpenedRun:
        """``data`` (an outline holding the snapshots of the ``read`` stages) as an opened run."""
        return cls(run=data.run, stages=data.stages, edges=data.edges, inputs=data.inputs, outputs=data.outputs,
                   items=data.items, read=set(read))

    def add_snapshots(self, stage_ids: Iterable[str], inputs: dict[str, list[SnapshotEntry]],
                      items: dict[str, Item]) -> None:
        """Keep what was read of ``stage_ids`` (``load_snapshots``; a stage absent from ``inputs`` saw nothing)."""
        ids = set(stage_ids)
        self.inputs.update({k: v for k, v in inputs.items() if k in ids})
        self.items.update(items)
        self.read |= ids


def has_snapshot(data: RunData, stage_id: str) -> bool:
    """True when ``data`` holds the snapshot of ``stage_id`` (a plain RunData holds every one)."""
    return not isinstance(data, OpenedRun) or stage_id in data.read


def missing_snapshots(data: RunData, stage_ids: Iterable[str]) -> list[str]:
    """The stages among ``stage_ids`` whose snapshots ``data`` does not hold yet."""
    return [s for s in dict.fromkeys(stage_ids) if not has_snapshot(data, s)]


def read_opening(source: RecordingSource, run_id: str, stage_id: str | None = None) -> OpenedRun:
    """The run's outline with the stage shown first (``stage_id``, else the default) read whole.

    So are the stages whose flowchart boxes show an output (the question, the answer), and a run
    of up to :data:`WHOLE_RUN_STAGES` stages is read whole. Blocks: run it on a thread.
    """
    try:
        outline = source.load_outline(run_id, [stage_id] if stage_id else [])
    except NotFoundError:
        if not stage_id:
            raise
        # a stage the run does not have (an id from another run's screen): open at the default
        outline, stage_id = source.load_outline(run_id, []), None
    read = {stage_id} if stage_id else set()
    if len(outline.stages) <= WHOLE_RUN_STAGES:
        wanted = [s.id for s in outline.stages]
    else:
        first = stage_id or default_stage(outline)
        wanted = ([first] if first else []) + [s.id for s in outline.stages if s.kind in OUTPUT_LABELLED]
    opened = OpenedRun.of(outline, read)
    missing = missing_snapshots(opened, wanted)
    if missing:
        opened.add_snapshots(missing, *source.load_snapshots(run_id, missing))
    return opened


def read_team(source: RecordingSource, data: RunData) -> dict[str, OpenedRun]:
    """The runs below ``data`` (those its sub-agents made, at any depth), each opened as
    :func:`read_opening` opens a run. Blocks: run it on a thread."""
    if not child_run_ids(data):
        return {}
    found = child_runs(source, data, load=lambda run_id: read_opening(source, run_id))
    return {run_id: opened for run_id, opened in found.items() if isinstance(opened, OpenedRun)}


@dataclass
class RunLoad:
    """A run being opened on a thread pool (started before its screen is built, so both go on at once)."""

    run_id: str
    opening: Future[OpenedRun]

    @classmethod
    def start(cls, pool: Executor, source: RecordingSource, run_id: str, stage_id: str | None = None) -> RunLoad:
        """Start reading the run's opening (see :func:`read_opening`) now."""
        return cls(run_id, pool.submit(read_opening, source, run_id, stage_id))

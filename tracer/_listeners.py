"""Recording listeners: code that follows a run as it is recorded (exporters, loggers).

A :class:`RecordingListener` passed to ``Recorder(store, listeners=[...])`` is told when a run
starts, when each stage closes and when the run ends, and receives exactly what was written — the
redacted records, never the raw values — so a secret the policy masks never reaches a listener.

The same events can be produced later from a stored run with :func:`feed_listener`, so one listener
serves both the live path and the after-the-fact path (``footprint export otlp``):

    recorder = Recorder(store, listeners=[OTelExporter()])      # live
    feed_listener(store.load_run(run_id), OTelExporter())        # after the fact

A paused run that is resumed later is two *segments*: ``run_started`` (``resumed=False``) ...
``run_ended`` (status ``awaiting``), then ``run_started`` (``resumed=True``, ``first_seq`` = the
resume stage's sequence number) ... ``run_ended``. :func:`feed_listener` splits a stored run at its
resume stages the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from ._records import Edge, Item, Run, RunStatus, SnapshotEntry, Stage, StageKind
from ._rundata import RunData


@dataclass(frozen=True)
class RecordedStage:
    """A stage as it was written: the record, its incoming edges, its snapshot and its outputs.

    ``items`` holds every item the snapshot and the outputs name, as stored (redacted).
    """

    stage: Stage
    edges: tuple[Edge, ...] = ()
    inputs: tuple[SnapshotEntry, ...] = ()
    outputs: tuple[str, ...] = ()
    items: Mapping[str, Item] = field(default_factory=dict)

    def output_items(self) -> list[Item]:
        """The items the stage produced, in order."""
        return [self.items[h] for h in self.outputs if h in self.items]

    def snapshot(self, *, include_dropped: bool = False) -> list[tuple[SnapshotEntry, Item]]:
        """The context the stage saw, in order, each entry with its item."""
        return [
            (e, self.items[e.item_hash])
            for e in self.inputs
            if (include_dropped or e.included) and e.item_hash in self.items
        ]


class RecordingListener:
    """Told about a run while it is recorded; override the callbacks you need (each does nothing).

    Callbacks run on the recording path, after the rows were handed to the writer: keep them quick
    and hand slow work (network export) to a background thread. An exception a callback raises is
    logged and swallowed — a listener never breaks a run.
    """

    def run_started(self, run: Run, *, resumed: bool = False, first_seq: int = 0) -> None:
        """A run (or, with ``resumed``, the continuation of a paused run) began."""

    def stage_closed(self, recorded: RecordedStage) -> None:
        """A stage closed; ``recorded`` is what was written for it."""

    def run_ended(self, run: Run) -> None:
        """A run (or one segment of a paused run) ended; ``run`` carries its status and outcome."""


def recorded_stages(data: RunData) -> Iterator[RecordedStage]:
    """The stages of a stored run as :class:`RecordedStage` values, in sequence order."""
    edges: dict[str, list[Edge]] = {}
    for edge in data.edges:
        edges.setdefault(edge.dst, []).append(edge)
    for stage in data.stages:
        inputs = tuple(data.inputs.get(stage.id, ()))
        outputs = tuple(data.outputs.get(stage.id, ()))
        wanted = {e.item_hash for e in inputs} | set(outputs)
        yield RecordedStage(
            stage, tuple(edges.get(stage.id, ())), inputs, outputs,
            {h: data.items[h] for h in wanted if h in data.items},
        )


def feed_listener(data: RunData, listeners: RecordingListener | Iterable[RecordingListener]) -> None:
    """Replay a stored run's recording events into listeners, as they happened when it was recorded.

    Stages are delivered in the order they closed; a run that paused and resumed is delivered as
    its segments (see the module docstring).
    """
    targets = [listeners] if isinstance(listeners, RecordingListener) else list(listeners)
    run = data.run
    stages = list(recorded_stages(data))
    segments: list[list[RecordedStage]] = [[]]
    for rs in stages:
        if rs.stage.kind == StageKind.RESUME and segments[-1]:
            segments.append([])
        segments[-1].append(rs)
    for number, segment in enumerate(segments):
        last = number == len(segments) - 1
        first = segment[0].stage if segment else None
        if number == 0:
            start = dataclasses.replace(run, status=RunStatus.RUNNING.value, output=None, ended_at=None, error=None)
        else:
            assert first is not None
            start = dataclasses.replace(
                run, status=RunStatus.RUNNING.value, input="", output=None, started_at=first.started_at,
                ended_at=None, error=None,
            )
        for target in targets:
            target.run_started(start, resumed=number > 0, first_seq=first.seq if first and number else 0)
        for rs in sorted(segment, key=lambda r: (r.stage.ended_at or r.stage.started_at, r.stage.seq)):
            for target in targets:
                target.stage_closed(rs)
        if last:
            end = run
        else:
            ended = max((rs.stage.ended_at or rs.stage.started_at for rs in segment), default=run.started_at)
            end = dataclasses.replace(start, status=RunStatus.AWAITING.value, ended_at=ended)
        for target in targets:
            target.run_ended(end)

"""Where a run's spans go in a trace: its own trace, or under the parent run that handed over to it.

A run started by another run (a routed team member, an agent called as a tool) carries
``parent_run`` and ``parent_stage``: the parent run and its ``subagent`` stage. Exported together,
the child joins the parent's trace and its ``invoke_agent`` span is a child of that stage's span:

    invoke_agent team                 trace T (the root run's)
    └── subagent researcher           the parent's hand-over stage
        └── invoke_agent researcher   the child run, same trace T
            └── chat ...

A child exported without its parent (sent earlier, or filtered out) starts a trace of its own and
its ``invoke_agent`` span links to the parent's hand-over span. Span ids are derived from stage ids,
so the link's span id is always the right one; its trace id is the parent run's own trace id, which
is right when the parent was the root of what was sent with it.

:class:`Lineage` remembers where each run it has seen was placed (the batch export sees parents
before children: :func:`parents_first` orders a stream of runs so, holding back only children whose
parent comes later).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from opentelemetry.trace import Link, SpanContext, TraceFlags

from .._records import PARENT_RUN, PARENT_STAGE, Run
from .._rundata import RunData

PARENT_RUN_ID = "footprint.parent.run.id"
PARENT_STAGE_ID = "footprint.parent.stage.id"
LINK_KIND = "footprint.link.kind"

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


@dataclass(frozen=True)
class Placement:
    """Where a run's spans go: the trace, the parent of its ``invoke_agent`` span, and its links."""

    trace_id: int
    parent: SpanContext | None = None
    links: tuple[Link, ...] = ()


def handed_over_by(run: Run) -> tuple[str, str] | None:
    """The (parent run id, parent ``subagent`` stage id) a child run records, else None."""
    parent_run, parent_stage = run.attributes.get(PARENT_RUN), run.attributes.get(PARENT_STAGE)
    if isinstance(parent_run, str) and parent_run and isinstance(parent_stage, str) and parent_stage:
        return parent_run, parent_stage
    return None


class Lineage:
    """The placement of every run seen (the most recent ``limit``), so a child can join its parent."""

    def __init__(self, limit: int = 100_000) -> None:
        self.limit = limit
        self._placed: OrderedDict[str, Placement] = OrderedDict()

    def get(self, run_id: str) -> Placement | None:
        """Where ``run_id`` was placed, when it was seen."""
        return self._placed.get(run_id)

    def place(self, run: Run) -> Placement:
        """Where ``run`` goes: where it went before (a resumed segment), under its parent, or a new trace."""
        from ._spans import span_id_of, trace_id_of  # _spans imports this module

        placed = self._placed.get(run.id)
        if placed is None:
            parent = handed_over_by(run)
            if parent is None:
                placed = Placement(trace_id_of(run.id))
            else:
                parent_run, parent_stage = parent
                above = self._placed.get(parent_run)
                if above is not None:
                    placed = Placement(above.trace_id, SpanContext(
                        above.trace_id, span_id_of(parent_stage), is_remote=False, trace_flags=_SAMPLED))
                else:
                    link = Link(
                        SpanContext(trace_id_of(parent_run), span_id_of(parent_stage), is_remote=True,
                                    trace_flags=_SAMPLED),
                        {LINK_KIND: "parent_run", PARENT_RUN_ID: parent_run, PARENT_STAGE_ID: parent_stage},
                    )
                    placed = Placement(trace_id_of(run.id), links=(link,))
        self._placed[run.id] = placed
        self._placed.move_to_end(run.id)
        while len(self._placed) > self.limit:
            self._placed.popitem(last=False)
        return placed


def parents_first(runs: Iterable[RunData]) -> Iterator[RunData]:
    """``runs`` in the same order, except that a child comes after its parent when both are there.

    Streams: a child is held back only while its parent may still come (to the end of the stream,
    for a child whose parent is not there at all). Oldest-first exports hold back nothing.
    """
    seen: set[str] = set()
    waiting: dict[str, list[RunData]] = {}  # parent run id -> children held back for it

    def release(data: RunData) -> Iterator[RunData]:
        ready = [data]
        while ready:
            current = ready.pop()
            seen.add(current.run.id)
            yield current
            ready.extend(reversed(waiting.pop(current.run.id, [])))

    for data in runs:
        parent = handed_over_by(data.run)
        if parent is not None and parent[0] not in seen and parent[0] != data.run.id:
            waiting.setdefault(parent[0], []).append(data)
            continue
        yield from release(data)
    held_ids = {d.run.id for held in waiting.values() for d in held}
    for absent in [p for p in waiting if p not in held_ids]:  # parents not exported: their children link
        for held in waiting.pop(absent, []):
            yield from release(held)
    for cycle in list(waiting.values()):  # only a cycle of parents is left: keep every run anyway
        yield from cycle

"""The runs a run started: the children of its ``subagent`` stages, and theirs, loaded together.

A ``subagent`` stage names the run it started in its ``child_run`` attribute (and that run names
the stage back in ``parent_run`` / ``parent_stage``), so a team's runs form a tree under the run
that began the work: the unit ``footprint show`` draws and multi-agent blame tests.
"""

from __future__ import annotations

from collections.abc import Callable

from ._records import CHILD_RUN, Stage, StageKind
from ._rundata import RunData
from ._why import RunSource
from .errors import NotFoundError

MAX_CHILD_RUNS = 500  # a runaway delegation loop must not load the whole store


def started_run(stage: Stage) -> str | None:
    """The run a ``subagent`` stage started (None: another kind of stage, or one that started none)."""
    child = stage.attributes.get(CHILD_RUN) if stage.kind == StageKind.SUBAGENT else None
    return child if isinstance(child, str) and child else None


def child_run_ids(data: RunData) -> list[tuple[str, str]]:
    """``(subagent stage id, child run id)`` for each run this run's ``subagent`` stages started, in order."""
    out = []
    for stage in sorted(data.stages, key=lambda s: s.seq):
        child = started_run(stage)
        if child is not None:
            out.append((stage.id, child))
    return out


def child_runs(
    source: RunSource, data: RunData, *, limit: int = MAX_CHILD_RUNS, load: Callable[[str], RunData] | None = None,
) -> dict[str, RunData]:
    """Every run below ``data`` (children, their children, ...) by id, at most ``limit`` of them.

    A child that is not in the store (deleted, or still being written by another process) is left
    out; the parent's stage still names it. ``load`` reads one child its own way (the explorer
    reads a long run's outline only); by default each level is read whole, in one go if the source can.
    """
    found: dict[str, RunData] = {}
    level = [data]
    while level and len(found) < limit:
        wanted = [c for d in level for _, c in child_run_ids(d) if c not in found and c != data.run.id]
        wanted = list(dict.fromkeys(wanted))[: limit - len(found)]
        if not wanted:
            break
        loaded = _load(source, wanted) if load is None else _load_each(load, wanted)
        found.update(loaded)
        level = list(loaded.values())
    return found


def _load_each(load: Callable[[str], RunData], run_ids: list[str]) -> dict[str, RunData]:
    out = {}
    for run_id in run_ids:
        try:
            out[run_id] = load(run_id)
        except NotFoundError:
            continue
    return out


def _load(source: RunSource, run_ids: list[str]) -> dict[str, RunData]:
    load_runs = getattr(source, "load_runs", None)
    if load_runs is not None:
        try:
            return dict(load_runs(run_ids))
        except NotFoundError:
            pass  # one is missing: load them one by one below, leaving out what is not there
    return _load_each(source.load_run, run_ids)

"""Dropped context: for each inference of a run, what was available but not sent, and what left it out.

The agent records it beside each snapshot (entries with ``included = false`` and ``dropped_by``:
``memory_window``, ``prompt_length_cap``, ...). The same rows are in the ``context`` SQL view::

    SELECT stage_id, kind, text, dropped_by FROM context WHERE run_id = ? AND NOT included

Every left-out item is recorded by reference (an entry naming the stored item). A stage whose
attribute ``dropped_since`` maps a reason to an earlier stage of the run recorded, for that reason,
only what it left out beyond that stage's list (a conversation window rarely lets a message back
in): :func:`left_out` puts the lists together, and so does :func:`dropped_context`. In SQL, such a
stage's rows are its new ones only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._records import SnapshotEntry
from ._rundata import RunData
from ._why import DroppedItem, RunSource
from .errors import NotFoundError

#: A stage attribute {reason: stage id, or [run id, stage id] for another run's stage}: for that reason,
#: this stage's left-out entries continue that stage's.
DROPPED_SINCE = "dropped_since"


def left_out(data: RunData, stage_id: str, source: RunSource | None = None,
             loaded: dict[str, RunData] | None = None,
             lists: dict[tuple[str, str], list[SnapshotEntry]] | None = None) -> list[SnapshotEntry]:
    """Everything stage ``stage_id`` left out of its context, in order: per reason continued from an
    earlier stage (``dropped_since``), that stage's list (recursively) first, then this stage's own.

    A list continued from another run's stage is followed when ``source`` can load that run (each
    run loaded once, in ``loaded``); without it only this run's part is given. ``lists`` keeps each
    stage's list once put together: a caller asking for every inference of a run in turn passes
    one, so each stage's list is built once, not once per later stage that continues it.
    """
    key = (data.run.id, stage_id)
    if lists is not None and key in lists:
        return lists[key]
    own = [e for e in data.inputs.get(stage_id, []) if not e.included]
    continued = _stage_attributes(data, stage_id).get(DROPPED_SINCE)
    if not isinstance(continued, dict) or not continued:
        found = own
    else:
        carried: list[SnapshotEntry] = []
        for reason, since in continued.items():
            where: RunData | None = data
            earlier = since
            if isinstance(since, list) and len(since) == 2:
                run_id, earlier = str(since[0]), str(since[1])
                where = _load(run_id, source, loaded if loaded is not None else {})
            if where is None or earlier == stage_id or not isinstance(earlier, str) or not where.has_stage(earlier):
                continue
            carried += [e for e in left_out(where, earlier, source, loaded, lists) if e.dropped_by == reason]
        found = [*carried, *own] if carried else own
    if lists is not None:
        lists[key] = found
    return found


def _load(run_id: str, source: RunSource | None, loaded: dict[str, RunData]) -> RunData | None:
    if source is None:
        return None
    if run_id not in loaded:
        try:
            loaded[run_id] = source.load_run(run_id)
        except NotFoundError:
            return None
    return loaded[run_id]


def _stage_attributes(data: RunData, stage_id: str) -> dict[str, object]:
    return next((s.attributes for s in data.stages if s.id == stage_id), {})


@dataclass
class DroppedContext:
    """One inference of a run and the context it left out (empty when nothing was left out)."""

    run_id: str
    stage_id: str
    stage_name: str
    turn: int
    sent: int
    items: list[DroppedItem] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "run_id": self.run_id, "stage_id": self.stage_id, "stage_name": self.stage_name, "turn": self.turn,
            "sent": self.sent,
            "dropped": [
                {"item_hash": d.item_hash, "item_kind": d.item_kind, "text": d.text, "dropped_by": d.dropped_by,
                 "origin": {"kind": d.origin.kind, "run_id": d.origin.run_id, "stage_id": d.origin.stage_id,
                            "source": d.origin.source}}
                for d in self.items
            ],
        }


def dropped_context(source: RunSource, run_id: str) -> list[DroppedContext]:
    """Per inference of run ``run_id`` (an exact id), in order: what was available but not sent."""
    data = source.load_run(run_id)
    loaded: dict[str, RunData] = {run_id: data}
    lists: dict[tuple[str, str], list[SnapshotEntry]] = {}
    out = []
    for turn, stage in enumerate(data.inferences(), 1):
        entries = data.inputs.get(stage.id, [])
        report = DroppedContext(run_id, stage.id, stage.name, turn, sum(1 for e in entries if e.included))
        for entry in left_out(data, stage.id, source, loaded, lists):
            item = data.items.get(entry.item_hash) or next(
                (r.items[entry.item_hash] for r in loaded.values() if entry.item_hash in r.items), None)
            report.items.append(DroppedItem(run_id, stage.id, entry.item_hash, item.kind if item else "?",
                                            item.text if item else "", entry.origin, entry.dropped_by or "unknown"))
        out.append(report)
    return out

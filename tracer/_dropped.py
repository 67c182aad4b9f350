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

#: A stage attribute {reason: stage id}: for that reason, this stage's left-out entries continue that stage's.
DROPPED_SINCE = "dropped_since"


def left_out(data: RunData, stage_id: str) -> list[SnapshotEntry]:
    """Everything stage ``stage_id`` left out of its context, in order: per reason continued from an
    earlier stage (``dropped_since``), that stage's list (recursively) first, then this stage's own."""
    own = [e for e in data.inputs.get(stage_id, []) if not e.included]
    continued = _stage_attributes(data, stage_id).get(DROPPED_SINCE)
    if not isinstance(continued, dict) or not continued:
        return own
    carried: list[SnapshotEntry] = []
    for reason, since in continued.items():
        if since != stage_id and isinstance(since, str) and data.has_stage(since):
            carried += [e for e in left_out(data, since) if e.dropped_by == reason]
    return [*carried, *own] if carried else own


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
    out = []
    for turn, stage in enumerate(data.inferences(), 1):
        entries = data.inputs.get(stage.id, [])
        report = DroppedContext(run_id, stage.id, stage.name, turn, sum(1 for e in entries if e.included))
        for entry in left_out(data, stage.id):
            item = data.items.get(entry.item_hash)
            report.items.append(DroppedItem(run_id, stage.id, entry.item_hash, item.kind if item else "?",
                                            item.text if item else "", entry.origin, entry.dropped_by or "unknown"))
        out.append(report)
    return out

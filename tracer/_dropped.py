"""Dropped context: for each inference of a run, what was available but not sent, and what left it out.

The agent records it beside each snapshot (entries with ``included = false`` and ``dropped_by``:
``memory_window``, ``prompt_length_cap``, ...). The same rows are in the ``context`` SQL view::

    SELECT stage_id, kind, text, dropped_by FROM context WHERE run_id = ? AND NOT included
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._why import DroppedItem, RunSource


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
        for entry in entries:
            if entry.included:
                continue
            item = data.items.get(entry.item_hash)
            report.items.append(DroppedItem(run_id, stage.id, entry.item_hash, item.kind if item else "?",
                                            item.text if item else "", entry.origin, entry.dropped_by or "unknown"))
        out.append(report)
    return out

"""`diff`: what changed between two snapshots, and where two runs first diverge."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._records import Item, ItemKind, OriginKind, SnapshotEntry
from ._rundata import RunData


def estimate_tokens(text: str) -> int:
    """A model-independent token estimate: about four characters per token."""
    return (len(text) + 3) // 4


@dataclass
class DiffEntry:
    """One item that differs between two snapshots."""

    change: str  # added | dropped | injected | truncated | summarized | edited
    item_hash: str
    item_kind: str
    text: str
    origin_kind: str
    origin_source: str | None
    tokens: int
    before_hash: str | None = None
    before_text: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class SnapshotDiff:
    """The difference between snapshot A (before) and snapshot B (after)."""

    entries: list[DiffEntry]
    kept: int
    tokens_before: dict[str, int] = field(default_factory=dict)
    tokens_after: dict[str, int] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        """True when anything differs."""
        return bool(self.entries)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "entries": [e.to_dict() for e in self.entries], "kept": self.kept,
            "tokens_before": self.tokens_before, "tokens_after": self.tokens_after,
        }


def _slot(entry: SnapshotEntry, item: Item | None) -> tuple[Any, ...]:
    """What makes two different items "the same slot" of a context (so one replaced the other)."""
    origin = entry.origin
    kind = item.kind if item else "?"
    if origin.kind != OriginKind.STAGE and origin.source:
        return (origin.kind, origin.source)
    if kind in (ItemKind.SETTINGS, ItemKind.SYSTEM):
        return (kind,)
    if kind == ItemKind.TOOL_DEFINITION and item is not None:
        return (kind, item.body.get("name"))
    return (origin.kind, origin.run_id, origin.stage_id, kind)


def _is_cut(old: str, new: str) -> bool:
    """True when ``new`` is ``old`` cut short (an ellipsis or trailing dots allowed at the cut)."""
    core = new.rstrip(" .…")
    return len(new) < len(old) and bool(core) and old.startswith(core)


def diff_snapshots(
    before: list[SnapshotEntry], after: list[SnapshotEntry], items: dict[str, Item]
) -> SnapshotDiff:
    """What was added, dropped, truncated, summarized, injected or edited from ``before`` to ``after``."""
    before = [e for e in before if e.included]
    after = [e for e in after if e.included]
    before_hashes = {e.item_hash for e in before}
    after_hashes = {e.item_hash for e in after}
    gone = [e for e in before if e.item_hash not in after_hashes]
    new = [e for e in after if e.item_hash not in before_hashes]
    gone_by_slot: dict[tuple[Any, ...], SnapshotEntry] = {}
    for e in gone:
        gone_by_slot.setdefault(_slot(e, items.get(e.item_hash)), e)
    result: list[DiffEntry] = []
    for e in new:
        item = items.get(e.item_hash)
        text = item.text if item else ""
        kind = item.kind if item else "?"
        previous = gone_by_slot.pop(_slot(e, item), None)
        if previous is not None:
            old = items.get(previous.item_hash)
            old_text = old.text if old else ""
            change = "truncated" if _is_cut(old_text, text) else "edited"
            result.append(DiffEntry(change, e.item_hash, kind, text, e.origin.kind, e.origin.source,
                                    estimate_tokens(text), previous.item_hash, old_text))
            continue
        if kind == ItemKind.SUMMARY:
            change = "summarized"
        elif e.origin.kind in (OriginKind.MEMORY, OriginKind.PROMPT_SECTION, OriginKind.HOOK, OriginKind.FILE):
            change = "injected"
        else:
            change = "added"
        result.append(DiffEntry(change, e.item_hash, kind, text, e.origin.kind, e.origin.source, estimate_tokens(text)))
    for e in gone_by_slot.values():
        item = items.get(e.item_hash)
        text = item.text if item else ""
        result.append(DiffEntry("dropped", e.item_hash, item.kind if item else "?", text, e.origin.kind,
                                e.origin.source, estimate_tokens(text)))
    return SnapshotDiff(result, len(before_hashes & after_hashes), _tokens(before, items), _tokens(after, items))


def _tokens(entries: list[SnapshotEntry], items: dict[str, Item]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for e in entries:
        item = items.get(e.item_hash)
        totals[e.origin.kind] = totals.get(e.origin.kind, 0) + estimate_tokens(item.text if item else "")
    return totals


@dataclass
class RunDivergence:
    """Where two runs first differ (``index`` is None when they do not)."""

    index: int | None
    reason: str
    stage_a: str | None = None
    stage_b: str | None = None
    snapshot: SnapshotDiff | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "index": self.index, "reason": self.reason, "stage_a": self.stage_a, "stage_b": self.stage_b,
            "snapshot": self.snapshot.to_dict() if self.snapshot else None,
        }



def diff_runs(a: RunData, b: RunData) -> RunDivergence:
    """The first stage at which run ``b`` departs from run ``a``."""
    items = {**a.items, **b.items}
    stages_a = sorted(a.stages, key=lambda s: s.seq)
    stages_b = sorted(b.stages, key=lambda s: s.seq)
    for index, (sa, sb) in enumerate(zip(stages_a, stages_b, strict=False)):
        if (sa.kind, sa.name) != (sb.kind, sb.name):
            return RunDivergence(index, f"stage {index} is {sa.kind} {sa.name!r} in A but {sb.kind} {sb.name!r} in B",
                                 sa.id, sb.id)
        snap_a = [e.item_hash for e in a.snapshot(sa.id)]
        snap_b = [e.item_hash for e in b.snapshot(sb.id)]
        if snap_a != snap_b:
            snapshot = diff_snapshots(a.snapshot(sa.id), b.snapshot(sb.id), items)
            return RunDivergence(index, f"{sa.kind} {sa.name!r} saw different context", sa.id, sb.id, snapshot)
        if a.outputs.get(sa.id, []) != b.outputs.get(sb.id, []):
            return RunDivergence(index, f"{sa.kind} {sa.name!r} produced different output", sa.id, sb.id)
    if len(stages_a) != len(stages_b):
        index = min(len(stages_a), len(stages_b))
        longer = "A" if len(stages_a) > len(stages_b) else "B"
        return RunDivergence(index, f"run {longer} goes on for {abs(len(stages_a) - len(stages_b))} more stage(s)",
                             stages_a[index].id if index < len(stages_a) else None,
                             stages_b[index].id if index < len(stages_b) else None)
    return RunDivergence(None, "the runs do not diverge")

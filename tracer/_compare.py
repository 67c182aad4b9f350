"""`compare`: two recorded runs side by side, stage by stage.

Typical use: yesterday's run answered right, today's answered wrong. The comparison aligns the two
flowcharts (by stage kind, and by name for inferences and tools), names the first stage where they
part, shows the context items that differ there (sent and left out), lists the tool calls whose
name, arguments or result differ, and sets tokens and cost side by side.

Tool call ids are ignored when comparing content: two runs that made the same call with the same
arguments and got the same result agree, whatever ids the model gave the calls.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any

from ._diff import DiffEntry, RunDivergence, SnapshotDiff, diff_snapshots, estimate_tokens
from ._json import canonical_json
from ._records import Item, ItemKind, Origin, OriginKind, Run, SnapshotEntry, Stage, StageKind
from ._rundata import RunData
from ._why import RunSource


@dataclass
class DroppedChange:
    """Context left out (not sent) by a stage in one run but not by its counterpart in the other."""

    side: str  # "a" | "b": the run that left it out
    item_hash: str
    item_kind: str
    text: str
    dropped_by: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return dict(self.__dict__)


@dataclass
class StagePair:
    """Two aligned stages (or a stage only one run has) and how they differ."""

    index: int
    a: Stage | None
    b: Stage | None
    change: str  # same | differs | only_a | only_b
    reasons: list[str] = field(default_factory=list)
    context: SnapshotDiff | None = None
    dropped: list[DroppedChange] = field(default_factory=list)
    outputs: SnapshotDiff | None = None

    @property
    def label(self) -> str:
        """The stage as a reader knows it, e.g. ``inference 'turn 2'``."""
        stage = self.a or self.b
        assert stage is not None
        return f"{stage.kind} {stage.name!r}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "index": self.index, "change": self.change, "label": self.label,
            "stage_a": self.a.id if self.a else None, "stage_b": self.b.id if self.b else None,
            "reasons": self.reasons, "context": self.context.to_dict() if self.context else None,
            "dropped": [d.to_dict() for d in self.dropped],
            "outputs": self.outputs.to_dict() if self.outputs else None,
        }


@dataclass
class ToolCallChange:
    """One tool call of either run, paired with its counterpart: same, or what differs."""

    change: str  # same | arguments | result | only_a | only_b | replaced
    name_a: str | None = None
    arguments_a: str | None = None
    result_a: str | None = None
    name_b: str | None = None
    arguments_b: str | None = None
    result_b: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class UsageComparison:
    """Tokens and cost of both runs, in total and per inference (input, output tokens)."""

    tokens_in: tuple[int, int]
    tokens_out: tuple[int, int]
    cost: tuple[float, float]
    per_inference_a: list[tuple[int, int]]
    per_inference_b: list[tuple[int, int]]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "tokens_in": list(self.tokens_in), "tokens_out": list(self.tokens_out), "cost": list(self.cost),
            "per_inference_a": [list(p) for p in self.per_inference_a],
            "per_inference_b": [list(p) for p in self.per_inference_b],
        }


@dataclass
class RunComparison:
    """The result of :func:`compare_runs`."""

    a: Run
    b: Run
    stages: list[StagePair]
    tool_calls: list[ToolCallChange]
    usage: UsageComparison

    @property
    def first_divergence(self) -> StagePair | None:
        """The first aligned stage that differs (None when the runs agree stage by stage)."""
        return next((p for p in self.stages if p.change != "same"), None)

    @property
    def divergence(self) -> RunDivergence:
        """The first divergence in the form :func:`diff_runs` gives it."""
        pair = self.first_divergence
        if pair is None:
            return RunDivergence(None, "the runs do not diverge")
        return RunDivergence(pair.index, f"{pair.label}: {'; '.join(pair.reasons)}",
                             pair.a.id if pair.a else None, pair.b.id if pair.b else None, pair.context)

    @property
    def same_answer(self) -> bool:
        """True when both runs ended the same way with the same output."""
        return (self.a.status, self.a.output) == (self.b.status, self.b.output)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        first = self.first_divergence
        return {
            "a": {"id": self.a.id, "status": self.a.status, "output": self.a.output, "model": self.a.model},
            "b": {"id": self.b.id, "status": self.b.status, "output": self.b.output, "model": self.b.model},
            "same_answer": self.same_answer,
            "first_divergence": first.to_dict() if first else None,
            "stages": [p.to_dict() for p in self.stages],
            "tool_calls": [c.to_dict() for c in self.tool_calls],
            "usage": self.usage.to_dict(),
        }


def compare_runs(source: RunSource, a: str, b: str) -> RunComparison:
    """Compare recorded runs ``a`` and ``b`` (exact ids) stage by stage."""
    return compare_run_data(source.load_run(a), source.load_run(b))


def compare_run_data(a: RunData, b: RunData) -> RunComparison:
    """Compare two loaded runs stage by stage."""
    items = {**a.items, **b.items}
    return RunComparison(a.run, b.run, _align(a, b, items), _tool_calls(a, b), _usage(a, b))


def content_form(item: Item | None, item_hash: str) -> tuple[Any, ...]:
    """What two items must share to count as the same content (tool call ids left out)."""
    if item is None:
        return (item_hash,)
    body = item.body
    if item.kind == ItemKind.TOOL_CALL:
        return (item.kind, body.get("name"), _canonical_arguments(body.get("arguments", "")))
    if item.kind == ItemKind.TOOL_RESULT:
        return (item.kind, body.get("name"), canonical_json(body.get("content")), bool(body.get("is_error")))
    return (item.hash,)


def _canonical_arguments(arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            return canonical_json(json.loads(arguments)) if arguments.strip() else "{}"
        except ValueError:
            return arguments
    return canonical_json(arguments)


def _key(stage: Stage) -> tuple[str, ...]:
    if stage.kind in (StageKind.INFERENCE, StageKind.TOOL, StageKind.ERROR):
        return (stage.kind, stage.name)
    return (stage.kind,)


def _align(a: RunData, b: RunData, items: dict[str, Item]) -> list[StagePair]:
    stages_a = sorted(a.stages, key=lambda s: s.seq)
    stages_b = sorted(b.stages, key=lambda s: s.seq)
    matcher = SequenceMatcher(None, [_key(s) for s in stages_a], [_key(s) for s in stages_b], autojunk=False)
    pairs: list[StagePair] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for sa, sb in zip(stages_a[i1:i2], stages_b[j1:j2], strict=True):
                pairs.append(_pair(len(pairs), sa, sb, a, b, items))
            continue
        common = min(i2 - i1, j2 - j1) if tag == "replace" else 0
        for sa, sb in zip(stages_a[i1:i1 + common], stages_b[j1:j1 + common], strict=True):
            pair = _pair(len(pairs), sa, sb, a, b, items)
            pair.change = "differs"
            pair.reasons.insert(0, f"A has {sa.kind} {sa.name!r} where B has {sb.kind} {sb.name!r}")
            pairs.append(pair)
        for sa in stages_a[i1 + common:i2]:
            pairs.append(StagePair(len(pairs), sa, None, "only_a", ["only run A has this stage"]))
        for sb in stages_b[j1 + common:j2]:
            pairs.append(StagePair(len(pairs), None, sb, "only_b", ["only run B has this stage"]))
    return pairs


def _forms(entries: Sequence[SnapshotEntry], items: dict[str, Item]) -> list[tuple[Any, ...]]:
    return [content_form(items.get(e.item_hash), e.item_hash) for e in entries]


def _pair(index: int, sa: Stage, sb: Stage, a: RunData, b: RunData, items: dict[str, Item]) -> StagePair:
    pair = StagePair(index, sa, sb, "same")
    sent_a, sent_b = a.snapshot(sa.id), b.snapshot(sb.id)
    forms_a, forms_b = _forms(sent_a, items), _forms(sent_b, items)
    if forms_a != forms_b:
        only_a, only_b = _unmatched(sent_a, forms_a, forms_b), _unmatched(sent_b, forms_b, forms_a)
        if only_a or only_b:
            pair.context = _diff(only_a, only_b, items)
            pair.reasons.append(f"saw different context ({len(only_a)} item(s) only in A, {len(only_b)} only in B)")
        else:
            pair.reasons.append("saw the same items in a different order")
    left_a = [e for e in a.inputs.get(sa.id, []) if not e.included]
    left_b = [e for e in b.inputs.get(sb.id, []) if not e.included]
    dropped_a, dropped_b = _forms(left_a, items), _forms(left_b, items)
    for side, entries, forms, other in (("a", left_a, dropped_a, dropped_b), ("b", left_b, dropped_b, dropped_a)):
        for entry in _unmatched(entries, forms, other):
            item = items.get(entry.item_hash)
            pair.dropped.append(DroppedChange(side, entry.item_hash, item.kind if item else "?",
                                              item.text if item else "", entry.dropped_by or "unknown"))
    if pair.dropped:
        pair.reasons.append(f"left out different context ({len(pair.dropped)} item(s))")
    out_a = [content_form(items.get(h), h) for h in a.outputs.get(sa.id, [])]
    out_b = [content_form(items.get(h), h) for h in b.outputs.get(sb.id, [])]
    if out_a != out_b:
        made_a, made_b = _output_entries(a, sa), _output_entries(b, sb)
        pair.outputs = _diff(_unmatched(made_a, out_a, out_b), _unmatched(made_b, out_b, out_a), items)
        pair.reasons.append("produced different output")
    if sa.status != sb.status:
        pair.reasons.append(f"ended {sa.status} in A, {sb.status} in B")
    if pair.reasons:
        pair.change = "differs"
    return pair


def _diff(only_a: list[SnapshotEntry], only_b: list[SnapshotEntry], items: dict[str, Item]) -> SnapshotDiff:
    """diff_snapshots, plus any entry it folded away (it keeps one entry per slot): every difference shown."""
    diff = diff_snapshots(only_a, only_b, items)
    named = {e.item_hash for e in diff.entries} | {e.before_hash for e in diff.entries if e.before_hash}
    for change, entries in (("dropped", only_a), ("added", only_b)):
        for entry in entries:
            if entry.item_hash in named:
                continue
            item = items.get(entry.item_hash)
            text = item.text if item else ""
            diff.entries.append(DiffEntry(change, entry.item_hash, item.kind if item else "?", text,
                                          entry.origin.kind, entry.origin.source, estimate_tokens(text)))
    return diff


def _output_entries(data: RunData, stage: Stage) -> list[SnapshotEntry]:
    # one origin for both runs' outputs, so an output that changed pairs with its counterpart ("edited")
    origin = Origin(OriginKind.STAGE)
    return [SnapshotEntry(i, h, origin) for i, h in enumerate(data.outputs.get(stage.id, []))]


def _unmatched(
    entries: Sequence[SnapshotEntry], forms: list[tuple[Any, ...]], other: list[tuple[Any, ...]]
) -> list[SnapshotEntry]:
    """The entries whose content the other side lacks (counting repeats)."""
    available = Counter(other)
    out = []
    for entry, form in zip(entries, forms, strict=True):
        if available[form] > 0:
            available[form] -= 1
        else:
            out.append(entry)
    return out


@dataclass(frozen=True)
class _Call:
    name: str
    arguments: str
    result: str | None

    @property
    def key(self) -> tuple[str, str]:
        return self.name, _canonical_arguments(self.arguments)


def _calls(data: RunData) -> list[_Call]:
    calls = []
    for stage in sorted(data.stages, key=lambda s: s.seq):
        if stage.kind != StageKind.TOOL:
            continue
        outputs = data.outputs.get(stage.id, [])
        result = data.items[outputs[-1]].text if outputs and outputs[-1] in data.items else None
        calls.append(_Call(stage.name, str(stage.attributes.get("arguments", "")), result))
    return calls


def _tool_calls(a: RunData, b: RunData) -> list[ToolCallChange]:
    calls_a, calls_b = _calls(a), _calls(b)
    matcher = SequenceMatcher(None, [c.key for c in calls_a], [c.key for c in calls_b], autojunk=False)
    out: list[ToolCallChange] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        pairs = list(zip(calls_a[i1:i2], calls_b[j1:j2], strict=False)) if tag in ("equal", "replace") else []
        for ca, cb in pairs:
            if tag == "equal":
                change = "same" if ca.result == cb.result else "result"
            else:
                change = "arguments" if ca.name == cb.name else "replaced"
            out.append(ToolCallChange(change, ca.name, ca.arguments, ca.result, cb.name, cb.arguments, cb.result))
        for ca in calls_a[i1 + len(pairs):i2]:
            out.append(ToolCallChange("only_a", ca.name, ca.arguments, ca.result))
        for cb in calls_b[j1 + len(pairs):j2]:
            out.append(ToolCallChange("only_b", name_b=cb.name, arguments_b=cb.arguments, result_b=cb.result))
    return out


def _per_inference(data: RunData) -> list[tuple[int, int]]:
    return [(int(s.attributes.get("input_tokens") or 0), int(s.attributes.get("output_tokens") or 0))
            for s in data.inferences()]


def _usage(a: RunData, b: RunData) -> UsageComparison:
    return UsageComparison(
        (a.run.tokens_in, b.run.tokens_in), (a.run.tokens_out, b.run.tokens_out), (a.run.cost, b.run.cost),
        _per_inference(a), _per_inference(b),
    )

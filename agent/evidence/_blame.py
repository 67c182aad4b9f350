"""Blame: which context items made the answer what it is? Tested, not guessed.

The suspects are the items `why` names for the answer. Each is tested with a counterfactual that
removes it from the first inference that sent it on. With many suspects, groups are tested first:
remove half; a half whose removal leaves the answer as it was is cleared as a whole, a half that
flips it is split again, down to single items. Items that cannot sensibly be culprits are skipped,
and the report says why: the answer itself, the user's question, settings, the calls the model
made (their results are tested), model outputs of the run itself, items sent only to earlier runs,
and tool definitions unless asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracer import ItemKind, Origin, Recorder, StageKind, Store, why

from ..providers import Provider
from ..tools import Tool, ToolRegistry
from ._counterfactual import Comparator, CounterfactualResult, Edit, counterfactual
from ._rebuild import Once
from ._recording import PLACE_RUN, RecordedRun, read_recording


@dataclass
class Suspect:
    """A tested item and its verdict (``via`` says whether it was tested alone or cleared with a group)."""

    item_hash: str
    kind: str
    text: str
    origin: Origin
    turn: int
    verdict: str = "untested"
    changed: int = 0
    repeats: int = 0
    via: str = "alone"
    run_ids: list[str] = field(default_factory=list)

    source: str = ""  # where the item came from, as a reader names it: "memory profile.home_city"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "item_hash": self.item_hash, "kind": self.kind, "text": self.text, "source": self.source,
            "turn": self.turn, "verdict": self.verdict, "changed": self.changed, "repeats": self.repeats,
            "via": self.via, "run_ids": self.run_ids,
        }


@dataclass
class Skipped:
    """An item `why` named that was not tested, and why not."""

    item_hash: str
    kind: str
    text: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return dict(self.__dict__)


@dataclass
class GroupTest:
    """One bisection step: a group of suspects removed together, and the verdict."""

    items: list[str]
    verdict: str
    changed: int
    repeats: int

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return dict(self.__dict__)


@dataclass
class BlameReport:
    """The culprits of an answer, with the verdicts as evidence, and what was tested or skipped."""

    run_id: str
    answer: str
    tested: list[Suspect]
    skipped: list[Skipped]
    groups: list[GroupTest] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def culprits(self) -> list[Suspect]:
        """The items whose removal alone flips the answer, most decisive first."""
        flipping = [s for s in self.tested if s.verdict == "flips"]
        return sorted(flipping, key=lambda s: -(s.changed / s.repeats if s.repeats else 0))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "run_id": self.run_id, "answer": self.answer, "culprits": [s.item_hash for s in self.culprits],
            "tested": [s.to_dict() for s in self.tested], "skipped": [s.to_dict() for s in self.skipped],
            "groups": [g.to_dict() for g in self.groups], "notes": self.notes,
        }


def suspects(
    store: Store, run_id: str, recording: RecordedRun, *, include_tool_definitions: bool = False
) -> tuple[list[Suspect], list[Skipped]]:
    """The items `why` names for the answer of ``run_id``, split into suspects and skipped items."""
    data = recording.data
    evidence = why(store, run_id)
    answer = data.answer_hash()
    question = {h for s in data.stages if s.kind == StageKind.INPUT for h in data.outputs.get(s.id, [])}
    first_turn: dict[str, int] = {}
    for inference in recording.inferences:
        for entry in inference.entries:
            first_turn.setdefault(entry.item_hash, inference.turn)
    out: list[Suspect] = []
    skipped: list[Skipped] = []
    seen: set[str] = set()
    for node in evidence.items():
        item_hash = node.item_hash or ""
        if item_hash in seen or item_hash == answer:
            continue
        seen.add(item_hash)
        kind, text = node.item_kind or "?", node.text or ""
        reason = _skip_reason(kind, item_hash, first_turn, question, recording, include_tool_definitions)
        if reason:
            skipped.append(Skipped(item_hash, kind, text, reason))
            continue
        origin = node.origin or Origin("stage")
        out.append(Suspect(item_hash, kind, text, origin, first_turn[item_hash], source=_source(origin, run_id)))
    return out, skipped


def _source(origin: Origin, run_id: str) -> str:
    if origin.kind == "stage":
        return "this run's tool result" if origin.run_id == run_id else f"run {origin.run_id}"
    if origin.source:
        return f"{origin.kind} {origin.source}" if origin.run_id == run_id else f"{origin.kind} {origin.source} of run {origin.run_id}"
    return origin.kind


def _skip_reason(
    kind: str, item_hash: str, first_turn: dict[str, int], question: set[str], recording: RecordedRun,
    include_tool_definitions: bool,
) -> str | None:
    if item_hash not in first_turn:
        return "not sent to this run's model (it reached the answer through an earlier run)"
    if kind == ItemKind.SETTINGS:
        return "settings are not context (try counterfactual --replace with other settings)"
    if kind == ItemKind.TOOL_DEFINITION and not include_tool_definitions:
        return "tool definitions are tested only when asked (--include-tools)"
    if kind == ItemKind.TOOL_CALL:
        return "a call the model made; its result is tested instead"
    if item_hash in question:
        return "the user's question itself"
    if kind == ItemKind.ASSISTANT and recording.places.get(item_hash) == PLACE_RUN:
        return "a model output of this run"
    return None


async def blame(
    store: Store,
    run: str,
    *,
    provider: Provider,
    tools: Sequence[Tool] | ToolRegistry = (),
    repeats: int = 3,
    comparator: Comparator | None = None,
    new_calls: str = "durable",
    include_tool_definitions: bool = False,
    bisect_above: int = 8,
    recorder: Recorder | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> BlameReport:
    """Test the items `why` names for the answer of ``run``; report those whose removal flips it, ranked.

    More than ``bisect_above`` suspects are bisected (groups first). Each counterfactual runs
    ``repeats`` times against ``provider`` (see :func:`counterfactual` for tools and ``new_calls``).
    """
    store.flush()
    run_id = store.resolve_run_id(run)
    recording = read_recording(store.load_run(run_id))
    tested, skipped = suspects(store, run_id, recording, include_tool_definitions=include_tool_definitions)
    report = BlameReport(run_id, recording.data.run.output or "", tested, skipped)
    executions = Once()
    progress = on_progress or (lambda _line: None)

    async def test(group: list[Suspect]) -> CounterfactualResult:
        names = group[0].source if len(group) == 1 else f"{len(group)} items"
        result = await counterfactual(
            store, run_id, edits=[Edit.remove(s.item_hash) for s in group], provider=provider,
            stage=min(s.turn for s in group), tools=tools, repeats=repeats, comparator=comparator,
            new_calls=new_calls, recorder=recorder, executions=executions,
        )
        progress(f"removed {names}: {result.verdict} ({result.changed}/{len(result.outcomes)} changed)")
        return result

    async def alone(suspect: Suspect) -> None:
        result = await test([suspect])
        suspect.verdict, suspect.changed, suspect.repeats = result.verdict, result.changed, len(result.outcomes)
        suspect.run_ids = [o.run_id for o in result.outcomes]

    async def search(group: list[Suspect], group_flips: bool) -> None:
        if len(group) == 1:
            await alone(group[0])
            return
        middle = len(group) // 2
        any_half = False
        for half in (group[:middle], group[middle:]):
            if len(half) == 1:
                await alone(half[0])
                any_half |= half[0].verdict != "holds"
                continue
            result = await test(half)
            report.groups.append(GroupTest([s.item_hash for s in half], result.verdict, result.changed,
                                           len(result.outcomes)))
            if result.verdict == "holds":
                for suspect in half:
                    suspect.verdict, suspect.repeats, suspect.via = "holds", len(result.outcomes), f"group of {len(half)}"
                    suspect.run_ids = [o.run_id for o in result.outcomes]
            else:
                any_half = True
                await search(half, True)
        if group_flips and not any_half:
            # the group flips the answer but neither half does: the cause is spread over both halves
            report.notes.append(f"removing {len(group)} items together changes the answer, but neither half does; "
                                f"each was then tested alone")
            for suspect in group:
                await alone(suspect)

    if len(tested) <= bisect_above:
        for suspect in tested:
            await alone(suspect)
    else:
        progress(f"{len(tested)} suspects: testing halves first")
        await search(tested, False)
    return report

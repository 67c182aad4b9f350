"""Blame: which context items made the answer what it is? Tested, not guessed.

The suspects are the items `why` names for the answer, in `why`'s ranking (:func:`tracer.rank`):
the items the answer most likely rests on are tested first. Each test is a counterfactual that
starts from a control re-run (:mod:`._control`), so a verdict is never the rebuild's own noise:

* a memory fact, a prompt section, a history message, a tool definition (when asked): removed;
* a tool result (of this run or an earlier one): the tool returned nothing, its call kept, so the
  model cannot simply fetch the same result again;
* what the model produced in this run (an assistant message, a tool call's arguments): replaced by
  an alternative the caller gives (``alternatives``); without one it is not tested, and the report
  says what to try;
* what the memory window or the prompt cap left out of the answering call: restored.

With many suspects, the top-ranked one is tested alone, then the rest as a group; a group whose
edit leaves the answer as it was is cleared as a whole, one that changes it is split in halves
(in rank order) down to single items. Only an item tested alone is ever convicted. The report
names each culprit with its chain (:mod:`._chain`), every item by its human name beside its hash,
and the re-runs made and time taken.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracer import ItemKind, Origin, RankedItem, Recorder, StageKind, Store, rank, resolve_item, why

from ..providers import Provider
from ..tools import Tool, ToolRegistry
from ._chain import Chain, chain_of
from ._control import Comparator, Controls
from ._counterfactual import CounterfactualResult, counterfactual
from ._earlier import through_earlier
from ._edits import Edit, resolve
from ._rebuild import Once
from ._recording import PLACE_RUN, RecordedRun, read_recording
from .errors import EvidenceError


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
    source: str = ""  # where the item came from, as a reader names it: its name, e.g. "memory:profile.city"
    name: str = ""
    action: str = "remove"  # the edit that tests it: remove | nothing | replace | restore | through
    earlier_run: str | None = None  # for "through": the earlier run that last sent it
    alternative: str | None = None
    score: float = 0.0
    reasons: list[str] = field(default_factory=list)
    rank: int = 0  # 1 = the item `why` ranks first
    order: tuple[int, int] = (0, 0)  # (0 from outside the run | 1 made by it, when) : causes come first
    reason: str = ""  # why an inconclusive verdict is inconclusive
    chain: Chain | None = None

    def edit(self) -> Edit:
        """The edit a counterfactual makes to test this suspect."""
        if self.action == "nothing":
            return Edit.returned_nothing(self.item_hash)
        if self.action == "replace":
            return Edit.replace(self.item_hash, self.alternative or "")
        if self.action == "restore":
            return Edit.restore(self.item_hash)
        return Edit.remove(self.item_hash)  # ("through" is tested in its earlier run: see _earlier)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        out = {
            "item_hash": self.item_hash, "name": self.name, "kind": self.kind, "text": self.text,
            "source": self.source, "turn": self.turn, "edit": self.action, "verdict": self.verdict,
            "changed": self.changed, "repeats": self.repeats, "via": self.via, "run_ids": self.run_ids,
            "rank": self.rank, "score": round(self.score, 4), "reasons": self.reasons,
        }
        if self.reason:
            out["reason"] = self.reason
        if self.chain is not None:
            out["chain"] = self.chain.to_dict()
        return out


@dataclass
class Skipped:
    """An item `why` named that was not tested, and why not (with what to try, where there is something)."""

    item_hash: str
    kind: str
    text: str
    reason: str
    name: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return dict(self.__dict__)


@dataclass
class GroupTest:
    """One group step: suspects edited together, and the verdict."""

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
    left_out: list[Suspect] = field(default_factory=list)  # restored into the window or the prompt
    reruns: int = 0
    seconds: float = 0.0

    @property
    def culprits(self) -> list[Suspect]:
        """The items whose edit alone flips the answer; causes first (what came from outside the run,
        then what the run made, in the order it made it), then the most decisive."""
        flipping = [s for s in self.tested if s.verdict == "flips"]
        return sorted(flipping, key=lambda s: (s.order, -(s.changed / s.repeats if s.repeats else 0), s.rank))

    @property
    def omissions(self) -> list[Suspect]:
        """Left-out items whose restoring alone flips the answer."""
        return [s for s in self.left_out if s.verdict == "flips"]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "run_id": self.run_id, "answer": self.answer, "culprits": [s.item_hash for s in self.culprits],
            "culprit_names": [s.name for s in self.culprits],
            "tested": [s.to_dict() for s in self.tested], "left_out": [s.to_dict() for s in self.left_out],
            "omissions": [s.item_hash for s in self.omissions], "skipped": [s.to_dict() for s in self.skipped],
            "groups": [g.to_dict() for g in self.groups], "notes": self.notes, "reruns": self.reruns,
            "seconds": round(self.seconds, 3),
        }


def _order(recording: RecordedRun, item_hash: str) -> tuple[int, int]:
    """(0, 0) for what came from outside the run; (1, seq) for what a stage of the run made."""
    for stage in recording.data.stages:
        if item_hash in recording.data.outputs.get(stage.id, ()) and stage.kind in (StageKind.TOOL,
                                                                                     StageKind.INFERENCE):
            return 1, stage.seq
    return 0, 0


def suspects(
    store: Store, run_id: str, recording: RecordedRun, *, include_tool_definitions: bool = False,
    alternatives: Mapping[str, str] | None = None, order: str = "rank",
) -> tuple[list[Suspect], list[Skipped]]:
    """The items `why` names for the answer of ``run_id``, split into suspects and skipped items, in
    ``order``: ``rank`` (most likely first) or ``context`` (the order the context was built)."""
    data = recording.data
    ranked = rank(why(store, run_id), names=recording.names)
    if order == "context":
        ranked = sorted(ranked, key=lambda r: r.position)
    elif order != "rank":
        raise EvidenceError(f"order must be rank or context, not {order!r}")
    answer = data.answer_hash()
    question = {h for s in data.stages if s.kind == StageKind.INPUT for h in data.outputs.get(s.id, [])}
    first_turn: dict[str, int] = {}
    for inference in recording.inferences:
        for entry in inference.entries:
            first_turn.setdefault(entry.item_hash, inference.turn)
    given = _alternatives(recording, alternatives or {})
    left_out = {e.item_hash for i in recording.inferences for e in i.dropped}
    earlier_tested = 0
    out: list[Suspect] = []
    skipped: list[Skipped] = []
    for position, node in enumerate(ranked, 1):
        item_hash = node.item_hash
        if item_hash == answer:
            continue
        name = recording.name(item_hash) if item_hash in recording.names else (node.name or item_hash[:12])
        reason = _skip_reason(node, item_hash, first_turn, question, recording, include_tool_definitions, given)
        if reason == _EARLIER and item_hash in left_out:
            reason = "left out of this run's calls by its window or cap: tested by restoring it"
        elif reason == _EARLIER and node.run_id and node.kind != ItemKind.TOOL_CALL:
            if earlier_tested < EARLIER_TESTED:
                earlier_tested += 1
                out.append(Suspect(item_hash, node.kind, node.text, node.origin, 1, source=name, name=name,
                                   score=node.score, reasons=list(node.reasons), rank=position, action="through",
                                   earlier_run=node.run_id, order=(-1, 0)))
                continue
            reason = f"sent only to an earlier run's model ({node.run_id}); ranked below the {EARLIER_TESTED} such items tested"
        elif reason == _EARLIER:
            reason = f"sent only to an earlier run's model ({node.run_id})"
        if reason:
            skipped.append(Skipped(item_hash, node.kind, node.text, reason, name))
            continue
        suspect = Suspect(item_hash, node.kind, node.text, node.origin, first_turn.get(item_hash, 1), source=name,
                          name=name, score=node.score, reasons=list(node.reasons), rank=position,
                          order=_order(recording, item_hash))
        if node.kind == ItemKind.TOOL_RESULT:
            suspect.action = "nothing"
        elif item_hash in given:
            suspect.action, suspect.alternative = "replace", given[item_hash]
        out.append(suspect)
    return out, skipped


_EARLIER = "earlier"  # a marker: sent only to an earlier run's model
#: How many items sent only to earlier runs blame tests there (the highest ranked), at two steps each.
EARLIER_TESTED = 8


def _alternatives(recording: RecordedRun, alternatives: Mapping[str, str]) -> dict[str, str]:
    """Alternatives keyed by item hash (the caller names items by name, hash or hash prefix)."""
    return {resolve_item(recording.data, ref, recording.names): text for ref, text in alternatives.items()}


def _skip_reason(
    node: RankedItem, item_hash: str, first_turn: dict[str, int], question: set[str], recording: RecordedRun,
    include_tool_definitions: bool, given: Mapping[str, str],
) -> str | None:
    kind = node.kind
    run_id = recording.run_id
    if item_hash not in first_turn:
        return _EARLIER
    if kind == ItemKind.SETTINGS:
        return "settings are not context (try counterfactual --replace with other settings)"
    if kind == ItemKind.TOOL_DEFINITION and not include_tool_definitions:
        return "tool definitions are tested only when asked (--include-tools)"
    if item_hash in question:
        return "the user's question itself"
    made_here = kind == ItemKind.ASSISTANT and recording.places.get(item_hash) == PLACE_RUN
    if (made_here or kind == ItemKind.TOOL_CALL) and item_hash not in given:
        # removing a call removes its result too (a result needs its call), and what the model wrote in
        # this run it would write again: either is tested by putting an alternative in its place
        name = recording.name(item_hash)
        what = "other arguments" if kind == ItemKind.TOOL_CALL else "another text"
        return (f"a model output: it is tested with an alternative in its place (its result, if any, is tested on "
                f"its own); give one (blame --alternative {name}=TEXT, or counterfactual {run_id} --replace {name} "
                f"--with '{what}')")
    return None


def _left_out(recording: RecordedRun, tested: set[str]) -> list[Suspect]:
    """What the window or the prompt cap left out of the answering call, to be restored."""
    last = recording.inferences[-1]
    out = []
    seen: set[str] = set()
    for entry in last.dropped:
        if entry.item_hash in seen or entry.item_hash in tested:
            continue
        seen.add(entry.item_hash)
        item = recording.data.items.get(entry.item_hash)
        if item is None:
            continue
        name = recording.name(entry.item_hash)
        out.append(Suspect(entry.item_hash, item.kind, item.text, entry.origin, last.turn, source=name, name=name,
                           action="restore", reasons=[f"left out by {entry.dropped_by}"], order=(0, 0)))
    return out


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
    include_left_out: bool = True,
    alternatives: Mapping[str, str] | None = None,
    bisect_above: int = 8,
    order: str = "rank",
    recorder: Recorder | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> BlameReport:
    """Test the items `why` names for the answer of ``run``, most likely first; report those whose edit flips it.

    More than ``bisect_above`` suspects are tested in groups (the top one alone, then the rest,
    split while a group changes the answer). Each counterfactual runs ``repeats`` times against
    ``provider`` after a control (see :func:`counterfactual` for tools and ``new_calls``).
    ``alternatives`` (item name or hash -> text) lets model outputs of the run be tested;
    ``order="context"`` tests in the order the context was built instead of `why`'s ranking.
    """
    started = time.perf_counter()
    store.flush()
    run_id = store.resolve_run_id(run)
    recording = read_recording(store.load_run(run_id), store)
    tested, skipped = suspects(store, run_id, recording, include_tool_definitions=include_tool_definitions,
                               alternatives=alternatives, order=order)
    report = BlameReport(run_id, recording.data.run.output or "", tested, skipped)
    if include_left_out:
        report.left_out = _left_out(recording, {s.item_hash for s in tested})
    executions, controls = Once(), Controls()
    recorder = recorder if recorder is not None else Recorder(store)  # one for every re-run: its caches too
    progress = on_progress or (lambda _line: None)
    reruns = 0

    async def test(group: list[Suspect]) -> CounterfactualResult:
        nonlocal reruns
        result = await counterfactual(
            store, run_id, edits=[s.edit() for s in group], provider=provider, tools=tools, repeats=repeats,
            comparator=comparator, new_calls=new_calls, recorder=recorder, executions=executions,
            controls=controls, recording=recording, flush=False,
        )
        reruns += len(result.outcomes)
        names = group[0].name if len(group) == 1 else f"{len(group)} items"
        progress(f"{group[0].action if len(group) == 1 else 'edited'} {names}: {result.verdict} "
                 f"({result.changed}/{len(result.outcomes)} changed)")
        if len(group) > 1:
            report.groups.append(GroupTest([s.item_hash for s in group], result.verdict, result.changed,
                                           len(result.outcomes)))
        return result

    async def alone(suspect: Suspect) -> None:
        result = await test([suspect])
        suspect.verdict, suspect.changed, suspect.repeats = result.verdict, result.changed, len(result.outcomes)
        suspect.run_ids = [o.run_id for o in result.outcomes]
        suspect.reason, suspect.via = result.reason, "alone"
        if suspect.verdict == "flips":
            suspect.chain = chain_of(recording, suspect.item_hash)

    def clear(group: list[Suspect], result: CounterfactualResult) -> None:
        for suspect in group:
            suspect.verdict, suspect.repeats, suspect.via = "holds", len(result.outcomes), f"group of {len(group)}"
            suspect.run_ids = [o.run_id for o in result.outcomes]

    async def search(group: list[Suspect], known: CounterfactualResult | None = None) -> None:
        """Find the culprits in ``group`` (``known``: its verdict, when already tested)."""
        if len(group) == 1:
            await alone(group[0])
            return
        result = known or await test(group)
        if result.verdict == "holds":
            clear(group, result)
            return
        control = result.control
        if control is not None and not control.reproduced and all(
                resolve(recording, 0, [s.edit()])[0].first == control.stage for s in group):
            # the control failed where each of them would be re-run from: alone, each says the same
            for suspect in group:
                suspect.verdict, suspect.reason, suspect.via = "inconclusive", result.reason, f"group of {len(group)}"
            return
        middle = len(group) // 2
        for half in (group[:middle], group[middle:]):
            await search(half)
        if result.verdict == "flips" and not any(s.verdict != "holds" for s in group):
            # the group changes the answer but no half does: the cause is spread over several items
            report.notes.append(f"editing {len(group)} items together changes the answer, but neither half does; "
                                f"each was then tested alone")
            for suspect in group:
                await alone(suspect)

    async def find(group: list[Suspect]) -> None:
        if len(group) <= bisect_above:
            for suspect in group:
                await alone(suspect)
            return
        progress(f"{len(group)} suspects: the most likely first, then the rest in groups")
        await alone(group[0])
        await search(group[1:])

    await find([s for s in tested if s.action != "through"])
    for suspect in (s for s in tested if s.action == "through"):
        assert suspect.earlier_run is not None
        found = await through_earlier(store, recording, suspect.item_hash, suspect.earlier_run, provider=provider,
                                      tools=tools, repeats=repeats, comparator=comparator, new_calls=new_calls,
                                      executions=executions, controls=controls)
        here = found.here
        reruns += len(found.earlier.outcomes) + (len(here.outcomes) if here is not None else 0)
        suspect.verdict, suspect.via = found.verdict, f"in run {suspect.earlier_run}"
        suspect.reason = found.note if found.verdict == "inconclusive" else ""
        if here is not None:
            suspect.changed, suspect.repeats = here.changed, len(here.outcomes)
            suspect.run_ids = [o.run_id for o in found.earlier.outcomes] + [o.run_id for o in here.outcomes]
            suspect.reason = here.reason
        else:
            suspect.repeats = len(found.earlier.outcomes)
            suspect.run_ids = [o.run_id for o in found.earlier.outcomes]
        progress(f"through run {suspect.earlier_run}: {suspect.name}: {suspect.verdict}")
        if suspect.verdict == "flips":
            suspect.chain = chain_of(recording, suspect.item_hash)
    if report.left_out:
        progress(f"{len(report.left_out)} item(s) left out of the answering call: restoring them")
        await search(report.left_out) if len(report.left_out) > 1 else await alone(report.left_out[0])
        for suspect in report.left_out:
            if suspect.via.startswith("group"):
                suspect.via = f"restored with {suspect.via.removeprefix('group of ')}"
    store.flush()
    report.reruns = reruns + controls.reruns
    report.seconds = time.perf_counter() - started
    return report

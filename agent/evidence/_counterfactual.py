"""Counterfactual: would the answer change without this item (or with this text instead)?

Take the snapshot an inference stage sent, apply an edit (remove an item, or replace its text),
and run the rest of the run again from there against a live provider, N times:

* the model calls before the stage are served their recorded responses (the run up to the stage is
  given); from the stage on, the live provider answers;
* a tool call identical to one the recording made (same name and arguments) gets the recorded
  result; a new call runs the real tool when it is durable (``new_calls="durable"``, the default),
  or any tool (``"all"``), or none (``"none"``); a refused call gets an error result the model sees.
  A non-durable tool never runs twice for the same call: its first result is kept and served again;
* an edit applies from the stage on: the item is left out of (or replaced in) that snapshot and
  every later one; removing a tool call or a tool result removes the pair.

Each re-run is recorded as a run forked from the original, pointing at the stage and the edit.
The verdict: ``flips`` when at least two thirds of the re-runs answer differently, ``holds`` when
none does, ``inconclusive`` otherwise (including re-runs that failed).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracer import ContextItem, Item, ItemKind, NotFoundError, Recorder, Store

from ..errors import ProviderError, ToolRejectedError
from ..providers import ModelRequest, ModelResponse, Provider
from ..tools import Tool, ToolRegistry, result_text
from ._rebuild import AgentParts, ForkRecorder, Once, ServedTools, rebuild_agent
from ._recording import PLACE_STATIC, PLACE_SYSTEM, RecordedInference, RecordedRun, call_key, read_recording
from .errors import EditError, EvidenceError

#: comparator(original answer, new answer) -> True when they count as the same answer.
Comparator = Callable[[str, str], bool]
NEW_CALL_POLICIES = ("durable", "all", "none")


@dataclass(frozen=True)
class Edit:
    """One change to a snapshot: remove the item whose hash starts with ``item``, or replace its text."""

    item: str
    text: str | None = None

    @classmethod
    def remove(cls, item: str) -> Edit:
        """Leave the item out."""
        return cls(item)

    @classmethod
    def replace(cls, item: str, text: str) -> Edit:
        """Put ``text`` in the item's place (same kind, same origin)."""
        return cls(item, text)

    @property
    def action(self) -> str:
        """``remove`` or ``replace``."""
        return "remove" if self.text is None else "replace"


@dataclass
class ResolvedEdit:
    """An edit bound to the item it changes."""

    action: str
    item: Item
    source: str
    place: str
    first: int  # index of the first inference (from the stage on) that sent the item
    replacement: Item | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form stored as the fork's edit."""
        out = {"action": self.action, "item": self.item.hash, "kind": self.item.kind, "source": self.source,
               "text": self.item.text[:200]}
        if self.replacement is not None:
            out["replacement"] = self.replacement.text[:200]
        return out


@dataclass
class Outcome:
    """One re-run: its run id, how it ended, and whether its answer is the original one."""

    run_id: str
    status: str
    answer: str
    result: str  # same | changed | error
    error: str | None = None
    frozen_calls: int = 0
    new_calls: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return dict(self.__dict__)


@dataclass
class CounterfactualResult:
    """The verdict of a counterfactual and the outcomes behind it."""

    source_run_id: str
    stage_id: str
    stage_name: str
    edits: list[ResolvedEdit]
    original_status: str
    original_answer: str
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def changed(self) -> int:
        """How many re-runs answered differently."""
        return sum(1 for o in self.outcomes if o.result == "changed")

    @property
    def verdict(self) -> str:
        """``flips``, ``holds`` or ``inconclusive``."""
        return verdict_of([o.result for o in self.outcomes])

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "source_run_id": self.source_run_id, "stage_id": self.stage_id, "stage_name": self.stage_name,
            "edits": [e.to_dict() for e in self.edits], "original_status": self.original_status,
            "original_answer": self.original_answer, "verdict": self.verdict, "changed": self.changed,
            "outcomes": [o.to_dict() for o in self.outcomes],
        }


def verdict_of(results: Sequence[str]) -> str:
    """``flips`` (a clear majority, two thirds or more, changed), ``holds`` (every one the same), else ``inconclusive``."""
    changed = sum(1 for r in results if r == "changed")
    if results and changed * 3 >= 2 * len(results):
        return "flips"
    if results and all(r == "same" for r in results):
        return "holds"
    return "inconclusive"


def exact(original: str, answer: str) -> bool:
    """The default comparator: the very same text."""
    return original == answer


class ForkModel(Provider):
    """Serves the recorded responses before the fork point, then asks the live provider."""

    def __init__(self, recording: RecordedRun, fork_index: int, live: Provider) -> None:
        self.recording, self.fork_index, self.live = recording, fork_index, live
        self.name = live.name
        self.labels = tuple(getattr(live, "labels", ()))
        self.calls = 0
        self.live_calls = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The recorded response for a turn before the fork, the live one after."""
        n = self.calls
        self.calls += 1
        if n < self.fork_index:
            recorded = self.recording.inferences[n]
            if recorded.response is None:
                raise ProviderError(recorded.error or "the recorded model call failed", provider="recording")
            return recorded.response
        self.live_calls += 1
        return await self.live.complete(request)


class WindowEdits:
    """Applies remove/replace edits to the conversation part of each snapshot, from each item's first call on.

    Only the occurrences present when the item first appears are edited: content the re-run produces
    anew (a tool called again) is kept.
    """

    def __init__(self, edits: Sequence[ResolvedEdit]) -> None:
        self.edits = list(edits)
        self.marked: dict[int, tuple[ContextItem, Item | None]] = {}

    def __call__(self, n: int, kept: list[ContextItem]) -> list[ContextItem]:
        for edit in self.edits:
            if edit.first != n:
                continue
            for ci in kept:
                if ci.item.hash == edit.item.hash:
                    self._mark(ci, edit.replacement, kept)
        out = []
        for ci in kept:
            marked = self.marked.get(id(ci))
            if marked is None:
                out.append(ci)
            elif marked[1] is not None:
                out.append(ContextItem(marked[1], ci.origin))
        return out

    def _mark(self, ci: ContextItem, replacement: Item | None, kept: list[ContextItem]) -> None:
        self.marked[id(ci)] = (ci, replacement)
        kind, body = ci.item.kind, ci.item.body
        if replacement is not None or kind not in (ItemKind.TOOL_CALL, ItemKind.TOOL_RESULT):
            return
        call_id = body.get("id") if kind == ItemKind.TOOL_CALL else body.get("call_id")
        partner = ItemKind.TOOL_RESULT if kind == ItemKind.TOOL_CALL else ItemKind.TOOL_CALL
        for other in kept:
            other_id = other.item.body.get("call_id" if partner == ItemKind.TOOL_RESULT else "id")
            if other.item.kind == partner and other_id == call_id:
                self.marked[id(other)] = (other, None)


def resolve_stage(recording: RecordedRun, stage: str | int | None, items: Sequence[str]) -> RecordedInference:
    """The inference ``stage`` names: a stage id or unique prefix, or a turn number (1 = the first call).

    Without one, the earliest inference that sent any of ``items``.
    """
    inferences = recording.inferences
    listing = ", ".join(f"{i.turn}: {i.stage.id}" for i in inferences)
    if stage is None:
        for inference in inferences:
            hashes = {e.item_hash for e in inference.entries}
            if any(h.startswith(ref) for h in hashes for ref in items):
                return inference
        raise EditError(f"no inference of run {recording.run_id} sent an item starting with "
                        f"{', '.join(map(repr, items))} (footprint show {recording.run_id} lists the context)")
    text = str(stage)
    if text.isdigit() and 1 <= int(text) <= len(inferences):
        return inferences[int(text) - 1]
    matches = [i for i in inferences if i.stage.id.startswith(text)]
    if len(matches) == 1:
        return matches[0]
    if any(s.id.startswith(text) for s in recording.data.stages):
        raise EditError(f"stage {text} of run {recording.run_id} is not an inference; a counterfactual starts "
                        f"at an inference (turn: stage) {listing}")
    raise NotFoundError(f"no inference of run {recording.run_id} matches {text!r}; its inferences (turn: stage): "
                        f"{listing}")


def resolve_edits(recording: RecordedRun, start: RecordedInference, edits: Sequence[Edit]) -> list[ResolvedEdit]:
    """Bind each edit to the item it names in the snapshots from ``start`` on."""
    later = recording.inferences[start.turn - 1:]
    out = []
    for edit in edits:
        if not edit.item:
            raise EditError("an edit needs an item hash (or a unique prefix of one)")
        found: dict[str, tuple[int, Any]] = {}
        for inference in later:
            for entry in inference.entries:
                if entry.item_hash.startswith(edit.item):
                    found.setdefault(entry.item_hash, (inference.turn - 1, entry.origin))
        if not found:
            raise EditError(f"no item starting with {edit.item!r} is sent at or after inference {start.stage.name!r} "
                            f"({start.stage.id}) of run {recording.run_id}")
        if len(found) > 1:
            raise EditError(f"{edit.item!r} matches {len(found)} items of run {recording.run_id}; give more of the hash")
        item_hash, (first, origin) = next(iter(found.items()))
        item = recording.data.items[item_hash]
        place = recording.places.get(item_hash, "")
        replacement = None if edit.text is None else replaced(item, edit.text)
        out.append(ResolvedEdit(edit.action, item, origin.source or origin.kind, place, first, replacement))
    return out


def replaced(item: Item, text: str) -> Item:
    """``item`` with its text changed to ``text`` (arguments of a tool call, content of a result, ...)."""
    body = dict(item.body)
    if item.kind == ItemKind.TOOL_CALL:
        body["arguments"] = text
    elif item.kind == ItemKind.TOOL_RESULT:
        body["content"] = text
    elif item.kind == ItemKind.TOOL_DEFINITION:
        body["description"] = text
    elif item.kind == ItemKind.SETTINGS:
        try:
            settings = json.loads(text)
        except json.JSONDecodeError as exc:
            raise EditError(f"replacement settings must be a JSON object ({exc.msg})") from None
        if not isinstance(settings, dict):
            raise EditError("replacement settings must be a JSON object")
        return Item(item.kind, settings)
    else:
        body["text"] = text
    return Item(item.kind, body)


def edited_parts(recording: RecordedRun, edits: Sequence[ResolvedEdit]) -> AgentParts:
    """The rebuilt agent's parts with the system and static edits applied (conversation edits apply per call)."""
    parts = AgentParts.of(recording)
    for edit in edits:
        new = edit.replacement
        if edit.place == PLACE_SYSTEM:
            parts.system = [ContextItem(n, ci.origin) for ci in parts.system
                            for n in _edited(ci.item, edit.item.hash, new)]
            if parts.facts is not None:
                parts.facts = [n for f in parts.facts for n in _edited(f, edit.item.hash, new)]
        elif edit.place == PLACE_STATIC and edit.item.kind == ItemKind.SETTINGS:
            if new is None:
                raise EditError("the settings cannot be removed; replace them with a JSON object instead")
            parts.settings = dict(new.body)
        elif edit.place == PLACE_STATIC:
            parts.tool_definitions = [n for d in parts.tool_definitions for n in _edited(d, edit.item.hash, new)]
    return parts


def _edited(item: Item, target: str, new: Item | None) -> list[Item]:
    """``[item]`` untouched, ``[new]`` when it is the target and is replaced, ``[]`` when it is removed."""
    if item.hash != target:
        return [item]
    return [] if new is None else [new]


def _tool_map(tools: Sequence[Tool] | ToolRegistry) -> dict[str, Tool]:
    if isinstance(tools, ToolRegistry):
        return {name: tools.get(name) for name in tools.names()}
    return {t.name: t for t in tools}


def new_call_handler(
    tools: dict[str, Tool], policy: str, executions: Once
) -> Callable[[str, dict[str, Any]], Any]:
    """What a call the recording did not make gets, by ``policy`` (see the module docstring)."""
    if policy not in NEW_CALL_POLICIES:
        raise EvidenceError(f"new_calls must be one of {', '.join(NEW_CALL_POLICIES)}, not {policy!r}")

    async def handle(name: str, arguments: dict[str, Any]) -> str:
        real = tools.get(name)
        if real is None:
            raise ToolRejectedError(f"{name} was not run: this call is new in the counterfactual and no "
                                    f"implementation of {name} was given; its result is unknown")
        if policy == "none" or (policy == "durable" and not real.durable):
            raise ToolRejectedError(f"{name} was not run: this call is new in the counterfactual and {name} is not "
                                    f"durable (it may have side effects); its result is unknown")

        async def run() -> str:
            return result_text(await real.execute(arguments))

        return await executions.get(call_key(name, arguments), run)

    return handle


async def counterfactual(
    store: Store,
    run: str,
    *,
    edits: Edit | Sequence[Edit],
    provider: Provider,
    stage: str | int | None = None,
    tools: Sequence[Tool] | ToolRegistry = (),
    repeats: int = 3,
    comparator: Comparator | None = None,
    new_calls: str = "durable",
    recorder: Recorder | None = None,
    executions: Once | None = None,
    on_outcome: Callable[[Outcome], None] | None = None,
) -> CounterfactualResult:
    """Re-run ``run`` from inference ``stage`` with ``edits`` applied, ``repeats`` times, against ``provider``.

    ``stage`` is a stage id (or unique prefix) or a turn number; without it, the earliest inference
    that sent the edited item. ``tools`` are the real tools for calls the recording did not make.
    ``comparator(original, new)`` says whether two answers are the same (default: identical text).
    ``executions`` shares new tool results between counterfactuals (blame passes one).
    """
    if repeats < 1:
        raise EvidenceError(f"repeats must be at least 1, not {repeats}")
    edit_list = [edits] if isinstance(edits, Edit) else list(edits)
    if not edit_list:
        raise EditError("a counterfactual needs at least one edit (remove or replace an item)")
    store.flush()
    run_id = store.resolve_run_id(run)
    recording = read_recording(store.load_run(run_id))
    start = resolve_stage(recording, stage, [e.item for e in edit_list])
    resolved = resolve_edits(recording, start, edit_list)
    parts = edited_parts(recording, resolved)
    window = [e for e in resolved if e.place not in (PLACE_SYSTEM, PLACE_STATIC)]
    real_tools = _tool_map(tools)
    shared = executions or Once()
    same = comparator or exact
    original = recording.data.run
    result = CounterfactualResult(run_id, start.stage.id, start.stage.name, resolved, original.status,
                                  original.output or "")
    base = recorder or Recorder(store)
    for repeat in range(repeats):
        served = ServedTools(recording, new_call_handler(real_tools, new_calls, shared),
                             {n: t.durable for n, t in real_tools.items()})
        model = ForkModel(recording, start.turn - 1, provider)
        fork = ForkRecorder(base, source=recording, kind="counterfactual", stage=start.stage.id,
                            edit={"edits": [e.to_dict() for e in resolved], "repeat": repeat + 1, "of": repeats},
                            labels=model.labels)
        agent = rebuild_agent(recording, parts=parts, provider=model, tools=served, recorder=fork,
                              session_id=f"counterfactual:{run_id}", edit=WindowEdits(window) if window else None)
        done = await agent.run(recording.message)
        if done.status == original.status:
            outcome = "same" if same(original.output or "", done.answer or done.question or "") else "changed"
        elif done.status in ("failed", "cancelled"):
            outcome = "error"
        else:
            outcome = "changed"
        result.outcomes.append(Outcome(done.run_id, done.status, done.answer or done.question or "", outcome,
                                       done.error, len(served.served), len(served.new)))
        if on_outcome is not None:
            on_outcome(result.outcomes[-1])
    store.flush()
    return result


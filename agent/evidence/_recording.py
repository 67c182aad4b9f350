"""What a recorded run says about the agent that made it, read back from the store.

Everything a replay or a counterfactual needs is in the recording: the first inference's snapshot
holds the system context (prompt sections and memory facts, each with the prompt or memory stage
that produced it), the conversation history (items whose origin is an earlier run), the user's
message, the tool definitions offered and the settings; each inference's outputs are the model's
responses; each tool stage holds a call and its result; the entries left out by the memory window
say what the window left out, call by call (every message, by reference: see :mod:`._window`).
"""

from __future__ import annotations

import functools
import json
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from tracer import (
    ContextItem,
    Item,
    ItemKind,
    OriginKind,
    RunData,
    RunSource,
    SnapshotEntry,
    Stage,
    StageKind,
    canonical_json,
    item_names,
    left_out,
)

from .._batch import UNCUT_RESULT_OF
from .._memory import DROPPED_BY_WINDOW
from .._prompt import DROPPED_BY_LENGTH_CAP
from ..providers import ModelResponse, ToolCall, Usage
from ._window import MessageKey, message_key
from .errors import NotReplayableError

#: Where a context item sits when the agent is rebuilt: how it re-enters the next run.
PLACE_SYSTEM, PLACE_HISTORY, PLACE_INPUT, PLACE_STATIC, PLACE_RUN = "system", "history", "input", "static", "run"


@dataclass
class RecordedInference:
    """One recorded model call: its stage, turn, snapshot and the response it got (None: it failed)."""

    stage: Stage
    turn: int
    entries: list[SnapshotEntry]
    dropped: list[SnapshotEntry]
    response: ModelResponse | None
    error: str | None = None

    @property
    def window_left_out(self) -> list[SnapshotEntry]:
        """What the memory window left out of this call (every message, oldest first)."""
        return [e for e in self.dropped if e.dropped_by == DROPPED_BY_WINDOW]


@dataclass
class RecordedCall:
    """One recorded tool call and what it returned (or the question it paused on)."""

    call_id: str
    name: str
    arguments: str
    content: str | None
    is_error: bool
    pause: tuple[str, str] | None = None  # (question, kind) when the tool paused the run
    stage_id: str = ""
    call_hash: str = ""  # the tool call item the tool stage ran
    result_hash: str = ""  # the tool result item it produced
    cut: dict[str, Any] | None = None  # the stage's result_cut: the result reached the model cut to a bound
    uncut: str | None = None  # what the recording kept of the result before it was cut

    @property
    def key(self) -> tuple[str, str]:
        """What identifies "the same call": the tool's name and its arguments in canonical form."""
        return call_key(self.name, self.arguments)


def call_key(name: str, arguments: str | dict[str, Any]) -> tuple[str, str]:
    """(name, canonical arguments): calls that differ only in JSON spacing or key order are the same."""
    if not isinstance(arguments, str):
        return name, canonical_json(arguments)
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return name, arguments
    return name, canonical_json(parsed)


@dataclass
class RecordedRun:
    """A recorded run, read for rebuilding: the agent's context, the model's responses, the tool results."""

    data: RunData
    message: str
    system: list[ContextItem]
    system_dropped: list[ContextItem]
    facts: list[Item] | None  # None: the run had no memory stage
    user_id: str | None
    history: list[ContextItem]
    tool_definitions: list[Item]
    settings: dict[str, Any]
    inferences: list[RecordedInference]
    calls: list[RecordedCall]
    places: dict[str, str] = field(default_factory=dict)  # item hash -> PLACE_*
    failure: tuple[str, str] | None = None  # (reason, message) of an error stage
    names: dict[str, str] = field(default_factory=dict)  # item hash -> its human name (tracer.item_names)

    @functools.cached_property
    def history_runs(self) -> frozenset[str]:
        """The earlier runs the conversation history came from (a recording is read once, never changed)."""
        return frozenset(ci.origin.run_id for ci in self.history if ci.origin.run_id and ci.origin.run_id != self.run_id)

    def left_out_keys(self) -> list[Counter[MessageKey]]:
        """Per recorded call, the keys of the messages its memory window left out (see :mod:`._window`);
        made once per recording (a blame re-runs it hundreds of times), to be read, not changed."""
        keys: list[Counter[MessageKey]] | None = self.__dict__.get("_left_out_keys")
        if keys is None:
            runs = self.history_runs
            keys = self.__dict__["_left_out_keys"] = [
                Counter(message_key(e.item_hash, e.origin, runs) for e in i.window_left_out) for i in self.inferences]
        return keys

    def name(self, item_hash: str) -> str:
        """The item's human name in this run (its short hash when it has none)."""
        return self.names.get(item_hash) or item_hash[:12]

    @property
    def run_id(self) -> str:
        """The recorded run's id."""
        return self.data.run.id

    def inference(self, stage_id: str) -> RecordedInference:
        """The recorded inference of stage ``stage_id``."""
        for inference in self.inferences:
            if inference.stage.id == stage_id:
                return inference
        raise KeyError(stage_id)

    def first_inference_with(self, item_hash: str) -> RecordedInference | None:
        """The earliest inference whose snapshot sent ``item_hash``."""
        return next((i for i in self.inferences if any(e.item_hash == item_hash for e in i.entries)), None)

    def results_by_call(self) -> dict[tuple[str, str], deque[RecordedCall]]:
        """Recorded calls by (name, canonical arguments), each queue in the order they were made."""
        served: dict[tuple[str, str], deque[RecordedCall]] = {}
        for call in self.calls:
            served.setdefault(call.key, deque()).append(call)
        return served


def read_recording(data: RunData, source: RunSource | None = None) -> RecordedRun:
    """Read ``data`` for rebuilding; a :class:`NotReplayableError` says what is missing.

    ``source`` (a store) completes what the window left out of the first calls with what earlier
    runs of the conversation recorded (a run records only what fell out since the run before); the
    rebuild does not need it, restoring a left-out message does.
    """
    run = data.run
    kinds = {s.kind for s in data.stages}
    if StageKind.RESUME in kinds:
        raise NotReplayableError(
            f"run {run.id} paused and was resumed; replaying a resumed run is not supported (replay the runs "
            f"of the session before it, or counterfactual an inference before the pause)"
        )
    if run.status == "cancelled":
        raise NotReplayableError(f"run {run.id} was cancelled; a cancelled run cannot be replayed")
    inferences = _inferences(data, source)
    if not inferences:
        raise NotReplayableError(f"run {run.id} made no model call; there is nothing to replay")
    by_kind: dict[str, set[str]] = {}
    for stage in data.stages:
        by_kind.setdefault(stage.kind, set()).add(stage.id)
    input_stages = by_kind.get(StageKind.INPUT, set())
    system_stages = by_kind.get(StageKind.PROMPT, set()) | by_kind.get(StageKind.MEMORY, set())
    first = inferences[0]
    places: dict[str, str] = {}
    system: list[ContextItem] = []
    history: list[ContextItem] = []
    tool_definitions: list[Item] = []
    settings: dict[str, Any] = {}
    message: str | None = None
    for entry in first.entries:
        item = _item(data, entry)
        origin = entry.origin
        if origin.kind == OriginKind.CONFIG:
            places[item.hash] = PLACE_STATIC
            if item.kind == ItemKind.TOOL_DEFINITION:
                tool_definitions.append(item)
            elif item.kind == ItemKind.SETTINGS:
                settings.update(item.body)
        elif origin.run_id == run.id and origin.stage_id in system_stages:
            places[item.hash] = PLACE_SYSTEM
            system.append(ContextItem(item, origin))
        elif origin.run_id == run.id and origin.stage_id in input_stages:
            if item.kind == ItemKind.USER:
                places[item.hash] = PLACE_INPUT
                message = str(item.body.get("text", ""))
            else:  # e.g. the results the loop gives calls an earlier run left unanswered: it gives them again
                places[item.hash] = PLACE_RUN
        elif origin.run_id is not None and origin.run_id != run.id:
            places.setdefault(item.hash, PLACE_HISTORY)
            history.append(ContextItem(item, origin))
        else:
            raise NotReplayableError(
                f"run {run.id}: the first model call sent a {item.kind} item ({item.hash[:12]}) from "
                f"{origin.describe()}, which a rebuilt agent cannot reproduce"
            )
    system_dropped: list[ContextItem] = []
    older: list[ContextItem] = []
    for entry in first.dropped:
        item = _item(data, entry)
        if entry.dropped_by == DROPPED_BY_LENGTH_CAP:
            system_dropped.append(ContextItem(item, entry.origin))
        elif entry.dropped_by == DROPPED_BY_WINDOW and entry.origin.run_id != run.id:
            places.setdefault(item.hash, PLACE_HISTORY)
            older.append(ContextItem(item, entry.origin))
    if message is None:
        message = _input_text(data, input_stages)
    for inference in inferences[1:]:
        for entry in inference.entries:
            places.setdefault(entry.item_hash, PLACE_RUN)
    memory_stage = next((s for s in data.stages if s.kind == StageKind.MEMORY), None)
    facts = None
    if memory_stage is not None:
        facts = [_item(data, e) for e in data.inputs.get(_prompt_stage_id(data) or "", []) if e.origin.kind == "memory"]
    return RecordedRun(
        data=data, message=message, system=system, system_dropped=system_dropped, facts=facts,
        user_id=(memory_stage.attributes.get("user_id") if memory_stage else None),
        history=_in_conversation_order(older, history), tool_definitions=tool_definitions, settings=settings,
        inferences=inferences, calls=_calls(data), places=places, failure=_failure(data), names=item_names(data),
    )


def _in_conversation_order(left_out: list[ContextItem], kept: list[ContextItem]) -> list[ContextItem]:
    """The history the run started from: what the window left out merged with what it kept.

    Each list is in conversation order; the stages that produced the messages sort by time (their
    ids do), so the merge puts each left-out message back where it was.
    """
    if not left_out:
        return kept
    merged: list[ContextItem] = []
    i = j = 0
    while i < len(left_out) and j < len(kept):
        if (left_out[i].origin.stage_id or "") <= (kept[j].origin.stage_id or ""):
            merged.append(left_out[i])
            i += 1
        else:
            merged.append(kept[j])
            j += 1
    return [*merged, *left_out[i:], *kept[j:]]


def _item(data: RunData, entry: SnapshotEntry) -> Item:
    item = data.items.get(entry.item_hash)
    if item is None:
        raise NotReplayableError(f"run {data.run.id}: item {entry.item_hash[:12]} is missing from the store")
    return item


def _input_text(data: RunData, input_stages: set[str]) -> str:
    for stage_id in input_stages:
        for item_hash in data.outputs.get(stage_id, []):
            if data.items[item_hash].kind == ItemKind.USER:
                return str(data.items[item_hash].body.get("text", ""))
    return data.run.input


def _prompt_stage_id(data: RunData) -> str | None:
    return next((s.id for s in data.stages if s.kind == StageKind.PROMPT), None)


def _inferences(data: RunData, source: RunSource | None) -> list[RecordedInference]:
    out = []
    loaded: dict[str, RunData] = {data.run.id: data}
    lists: dict[tuple[str, str], list[SnapshotEntry]] = {}  # each stage's list built once
    for turn, stage in enumerate(data.inferences(), 1):
        entries = data.inputs.get(stage.id, [])
        response = None
        if stage.status == "ok":
            response = _response(data, stage)
        elif stage.status != "error":
            raise NotReplayableError(f"run {data.run.id}: inference {stage.name!r} ended {stage.status}")
        dropped = left_out(data, stage.id, source, loaded, lists)
        for entry in dropped:  # continued from an earlier run: its items come with it
            if entry.item_hash not in data.items:
                found = next((r.items[entry.item_hash] for r in loaded.values() if entry.item_hash in r.items), None)
                if found is not None:
                    data.items[entry.item_hash] = found
        out.append(RecordedInference(stage, turn, [e for e in entries if e.included], dropped, response, stage.error))
    return out


def _response(data: RunData, stage: Stage) -> ModelResponse:
    text = ""
    calls = []
    for item_hash in data.outputs.get(stage.id, []):
        item = data.items[item_hash]
        if item.kind == ItemKind.ASSISTANT:
            text = str(item.body.get("text", ""))
        elif item.kind == ItemKind.TOOL_CALL:
            calls.append(ToolCall(str(item.body["id"]), str(item.body["name"]), str(item.body.get("arguments", ""))))
    attrs = stage.attributes
    usage = Usage(int(attrs.get("input_tokens") or 0), int(attrs.get("output_tokens") or 0),
                  int(attrs.get("cached_tokens") or 0))
    return ModelResponse(text, tuple(calls), str(attrs.get("finish_reason") or "stop"), usage,
                         str(attrs.get("model") or ""), attrs.get("response_id"), "recording")


def _calls(data: RunData) -> list[RecordedCall]:
    out = []
    for stage in data.stages:
        if stage.kind != StageKind.TOOL:
            continue
        attrs = stage.attributes
        outputs = data.outputs.get(stage.id, [])
        pause = (str(attrs.get("question", "")), str(attrs.get("pause_kind", "answer"))) if attrs.get("paused") else None
        content, is_error = None, False
        if outputs:
            body = data.items[outputs[-1]].body
            content, is_error = body.get("content"), bool(body.get("is_error"))
            if not isinstance(content, str):
                content = json.dumps(content)
        call_hash = next((e.item_hash for e in data.inputs.get(stage.id, []) if e.included), "")
        cut = attrs.get("result_cut")
        uncut = next((data.items[h].body.get("text") for h in outputs[:-1]
                      if data.items[h].body.get(UNCUT_RESULT_OF) is not None), None)
        out.append(RecordedCall(str(attrs.get("call_id", "")), stage.name, str(attrs.get("arguments", "")), content,
                                is_error, pause, stage.id, call_hash, outputs[-1] if outputs else "",
                                cut if isinstance(cut, dict) else None, uncut if isinstance(uncut, str) else None))
    return out


def _failure(data: RunData) -> tuple[str, str] | None:
    for stage in data.stages:
        if stage.kind == StageKind.ERROR:
            message = ""
            for item_hash in data.outputs.get(stage.id, []):
                message = data.items[item_hash].text
            return str(stage.attributes.get("reason", stage.name)), message
    return None

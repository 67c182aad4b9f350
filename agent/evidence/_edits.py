"""Edits a counterfactual makes to a recorded run, for every kind of item, and the plan they add up to.

    remove    leave the item out (a tool call and its result go together; a tool result alone:
              the tool returned nothing, its call kept)
    replace   put this text in the item's place (a tool result: the tool returned this text)
    nothing   a tool result: the tool returned nothing (its call kept)
    error     a tool result: the tool failed with this message (its call kept)
    restore   an item the memory window or the prompt cap left out: put it back in

Where an item sits decides how the edit is made. The system context (prompt sections, memory facts)
and what every call offers (tool definitions, settings) are edited in the rebuilt agent; the
conversation is edited call by call from the first call that sent the item; a tool result is edited
where it comes from, the tool, so calling the tool again gives the edited result too; what the
model produced in the run (an assistant message, a tool call's arguments) is edited in the model's
response from the call that produced it on.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tracer import ContextItem, Item, ItemKind, NotFoundError, resolve_item

from ..providers import ModelResponse, ToolCall
from ._rebuild import AgentParts
from ._recording import (
    PLACE_HISTORY,
    PLACE_INPUT,
    PLACE_RUN,
    PLACE_STATIC,
    PLACE_SYSTEM,
    RecordedRun,
    call_key,
)
from ._window import MessageKey, message_key
from .errors import EditError

ACTIONS = ("remove", "replace", "nothing", "error", "restore")
_RESULT_ONLY = ("nothing", "error")


@dataclass(frozen=True)
class Edit:
    """One change to a recorded run: ``item`` is a hash, a unique prefix of one, or the item's name."""

    item: str
    text: str | None = None
    mode: str | None = None  # None: remove (no text) or replace (text)

    @classmethod
    def remove(cls, item: str) -> Edit:
        """Leave the item out (a tool result alone: the tool returned nothing)."""
        return cls(item)

    @classmethod
    def replace(cls, item: str, text: str) -> Edit:
        """Put ``text`` in the item's place (same kind, same origin)."""
        return cls(item, text)

    @classmethod
    def returned_nothing(cls, item: str) -> Edit:
        """A tool result: the tool returned nothing; its call stays."""
        return cls(item, "", "nothing")

    @classmethod
    def returned_error(cls, item: str, message: str = "the tool failed") -> Edit:
        """A tool result: the tool failed with ``message``; its call stays."""
        return cls(item, message, "error")

    @classmethod
    def restore(cls, item: str) -> Edit:
        """An item the memory window or the prompt cap left out: put it back in."""
        return cls(item, None, "restore")

    @property
    def action(self) -> str:
        """One of :data:`ACTIONS`."""
        return self.mode or ("remove" if self.text is None else "replace")


@dataclass
class ResolvedEdit:
    """An edit bound to the item it changes and to where that item sits."""

    action: str
    item: Item
    name: str  # the item's human name in the run
    place: str
    first: int  # index of the first call (0-based) the edit changes
    replacement: Item | None = None
    call: Item | None = None  # a tool result's call (the one that fetched it)

    @property
    def source(self) -> str:
        """The item's name (kept for readers of older reports)."""
        return self.name

    def to_dict(self) -> dict[str, Any]:
        """The JSON form stored as the fork's edit."""
        out = {"action": self.action, "item": self.item.hash, "name": self.name, "kind": self.item.kind,
               "source": self.name, "text": self.item.text[:200]}
        if self.replacement is not None:
            out["replacement"] = self.replacement.text[:200]
        return out


@dataclass
class Plan:
    """What a re-run changes, assembled from resolved edits (no edit: a control re-run)."""

    fork: int  # the first call the live provider answers; before it, the recorded responses are served
    parts: AgentParts
    message: str
    conversation: list[ResolvedEdit] = field(default_factory=list)  # edited call by call
    results: dict[str, Item] = field(default_factory=dict)  # recorded result hash -> what the tool gives instead
    refetch: dict[tuple[str, str], Item] = field(default_factory=dict)  # call key -> result (history results)
    outputs: list[ResolvedEdit] = field(default_factory=list)  # edits of the model's own responses
    restored: set[MessageKey] = field(default_factory=set)


def _result_item(item: Item, content: str, is_error: bool) -> Item:
    return Item(ItemKind.TOOL_RESULT, {**item.body, "content": content, "is_error": is_error})


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


def _find(recording: RecordedRun, ref: str, start: int, restore: bool) -> tuple[str, int]:
    """(item hash, index of the first call at or after ``start`` that sent it, or left it out to restore)."""
    if not ref:
        raise EditError("an edit needs an item: its name, its hash or a unique prefix of the hash")
    try:
        item_hash = resolve_item(recording.data, ref, recording.names)
    except NotFoundError as exc:
        raise EditError(str(exc)) from None
    for inference in recording.inferences[start:]:
        entries = inference.dropped if restore else inference.entries
        if any(e.item_hash == item_hash for e in entries):
            return item_hash, inference.turn - 1
    producer = _producer(recording, item_hash)
    if not restore and producer is not None and producer >= start:
        return item_hash, producer
    what = "left out of" if restore else "sent to"
    raise EditError(f"{recording.name(item_hash)} ({item_hash[:12]}) is not {what} any model call of run "
                    f"{recording.run_id} from inference {start + 1} on")


def _made_by_run(recording: RecordedRun, item_hash: str) -> bool:
    """True when a model call or a tool call of the run itself produced ``item_hash``."""
    return _producer(recording, item_hash) is not None or any(c.result_hash == item_hash for c in recording.calls)


def _producer(recording: RecordedRun, item_hash: str) -> int | None:
    """The index of the inference of this run whose response holds ``item_hash``."""
    for index, inference in enumerate(recording.inferences):
        if item_hash in recording.data.outputs.get(inference.stage.id, []):
            return index
    return None


def resolve(recording: RecordedRun, start: int, edits: Sequence[Edit]) -> list[ResolvedEdit]:
    """Bind each edit to its item, checking that the action suits the item's kind and place."""
    out = []
    for edit in edits:
        action = edit.action
        if action not in ACTIONS:
            raise EditError(f"unknown edit {action!r}; the edits are {', '.join(ACTIONS)}")
        item_hash, first = _find(recording, edit.item, start, action == "restore")
        item = recording.data.items[item_hash]
        name = recording.name(item_hash)
        if action in _RESULT_ONLY and item.kind != ItemKind.TOOL_RESULT:
            raise EditError(f"{name} is a {item.kind}; 'the tool returned {action}' is an edit of a tool result")
        if action == "remove" and item.kind == ItemKind.TOOL_RESULT:
            action = "nothing"  # its call stays: the model must not simply fetch the same result again
        place = recording.places.get(item_hash, PLACE_RUN)
        if _made_by_run(recording, item_hash):
            place = PLACE_RUN  # the same content may also be in the history: the run's own is the one edited
        if action == "restore":
            place = PLACE_SYSTEM if any(ci.item.hash == item_hash for ci in recording.system_dropped) else PLACE_HISTORY
        replacement = None
        if action == "replace":
            replacement = replaced(item, edit.text or "")
        elif action in _RESULT_ONLY:
            text = edit.text or ("" if action == "nothing" else "the tool failed")
            replacement = _result_item(item, text if action == "nothing" else f"Error: {text}", action == "error")
        if item.kind == ItemKind.SETTINGS and replacement is None:
            raise EditError("the settings cannot be removed; replace them with a JSON object instead")
        producer = _producer(recording, item_hash)
        if producer is not None and item.kind in (ItemKind.ASSISTANT, ItemKind.TOOL_CALL):
            first = producer  # a model output is edited from the call that produced it on
        resolved = ResolvedEdit(action, item, name, place, first, replacement)
        if item.kind == ItemKind.TOOL_RESULT:
            resolved.call = _call_of(recording, item)
        out.append(resolved)
    return out


def _call_of(recording: RecordedRun, result: Item) -> Item | None:
    call_id = result.body.get("call_id")
    for call in recording.calls:
        if call.result_hash == result.hash and call.call_hash in recording.data.items:
            return recording.data.items[call.call_hash]
    for ci in recording.history:
        if ci.item.kind == ItemKind.TOOL_CALL and ci.item.body.get("id") == call_id:
            return ci.item
    return None


def plan(recording: RecordedRun, edits: Sequence[ResolvedEdit], fork: int | None = None) -> Plan:
    """The re-run these edits make; ``fork`` defaults to the first call an edit changes."""
    first = min((e.first for e in edits), default=len(recording.inferences))
    out = Plan(first if fork is None else min(fork, first), AgentParts.of(recording), recording.message)
    runs = recording.history_runs
    parts = out.parts
    # an item is its content: the very same one in the history too (yesterday's search gave today's
    # result word for word) is edited there as well, or its edit would test nothing
    in_history = {ci.item.hash for ci in recording.history}
    for edit in edits:
        new = edit.replacement
        target = edit.item.hash
        if edit.action == "restore":
            if edit.place == PLACE_SYSTEM:
                restored = [ci for ci in parts.system_dropped if ci.item.hash == target]
                parts.system += restored
                parts.system_dropped = [ci for ci in parts.system_dropped if ci.item.hash != target]
                if parts.facts is not None:
                    parts.facts += [ci.item for ci in restored if ci.item.kind == ItemKind.MEMORY]
            else:
                for inference in recording.inferences:
                    out.restored |= {message_key(e.item_hash, e.origin, runs) for e in inference.window_left_out
                                     if e.item_hash == target}
        elif edit.place == PLACE_SYSTEM:
            parts.system = [ContextItem(n, ci.origin) for ci in parts.system for n in _edited(ci.item, target, new)]
            if parts.facts is not None:
                parts.facts = [n for f in parts.facts for n in _edited(f, target, new)]
        elif edit.place == PLACE_STATIC and edit.item.kind == ItemKind.SETTINGS:
            assert new is not None
            parts.settings = dict(new.body)
        elif edit.place == PLACE_STATIC:
            parts.tool_definitions = [n for d in parts.tool_definitions for n in _edited(d, target, new)]
        elif edit.place == PLACE_INPUT:
            out.message = "" if new is None else new.text
        elif edit.item.kind in (ItemKind.ASSISTANT, ItemKind.TOOL_CALL) and edit.place == PLACE_RUN:
            out.outputs.append(edit)
            if target in in_history:
                out.conversation.append(_in_history(recording, edit, out, fork))
        elif edit.item.kind == ItemKind.TOOL_RESULT and edit.place == PLACE_RUN and new is not None:
            out.results[target] = new
            if target in in_history:
                out.conversation.append(_in_history(recording, edit, out, fork))
        else:
            out.conversation.append(edit)
            if edit.item.kind == ItemKind.TOOL_RESULT and new is not None and edit.call is not None:
                body = edit.call.body
                out.refetch[call_key(str(body.get("name", "")), body.get("arguments", ""))] = new
    return out


def _in_history(recording: RecordedRun, edit: ResolvedEdit, out: Plan, fork: int | None) -> ResolvedEdit:
    """``edit`` of the copy in the history, from the first call that sent it (the re-run forks there)."""
    first = next((i.turn - 1 for i in recording.inferences if any(e.item_hash == edit.item.hash for e in i.entries)),
                 edit.first)
    if fork is None:
        out.fork = min(out.fork, first)
    return dataclasses.replace(edit, first=first)


def _edited(item: Item, target: str, new: Item | None) -> list[Item]:
    """``[item]`` untouched, ``[new]`` when it is the target and is replaced, ``[]`` when it is removed."""
    if item.hash != target:
        return [item]
    return [] if new is None else [new]


class ConversationEdits:
    """Applies remove/replace edits to the conversation each call sees, from each item's first call on.

    Only the occurrences present when the item first appears are edited: content the re-run produces
    anew is kept. Removing a tool call removes its result with it (a result alone is never removed:
    the tool returns nothing instead).
    """

    def __init__(self, edits: Sequence[ResolvedEdit]) -> None:
        self.edits = list(edits)
        self.marked: dict[int, Item | None] = {}  # id(context item) -> its replacement (None: left out)

    def __call__(self, n: int, kept: list[ContextItem]) -> list[ContextItem]:
        for edit in self.edits:
            if edit.first <= n:
                for ci in kept:
                    if ci.item.hash == edit.item.hash and id(ci) not in self.marked:
                        self._mark(ci, edit.replacement, kept)
        out = []
        for ci in kept:
            if id(ci) not in self.marked:
                out.append(ci)
            elif (replacement := self.marked[id(ci)]) is not None:
                out.append(ContextItem(replacement, ci.origin))
        return out

    def _mark(self, ci: ContextItem, replacement: Item | None, kept: list[ContextItem]) -> None:
        self.marked[id(ci)] = replacement
        if replacement is not None or ci.item.kind != ItemKind.TOOL_CALL:
            return
        call_id = ci.item.body.get("id")
        for other in kept:
            if other.item.kind == ItemKind.TOOL_RESULT and other.item.body.get("call_id") == call_id:
                self.marked[id(other)] = None


def edit_response(response: ModelResponse, edits: Sequence[ResolvedEdit]) -> ModelResponse:
    """``response`` with the edited model outputs changed: a tool call (same tool and arguments) given
    new arguments or left out, the text replaced or emptied."""
    text, changed = response.text, False
    calls: list[ToolCall | None] = list(response.tool_calls)
    for edit in edits:
        body = edit.item.body
        if edit.item.kind == ItemKind.ASSISTANT and text == body.get("text"):
            text = "" if edit.replacement is None else str(edit.replacement.body.get("text", ""))
            changed = True
        elif edit.item.kind == ItemKind.TOOL_CALL:
            wanted = call_key(str(body.get("name", "")), body.get("arguments", ""))
            for index, call in enumerate(calls):
                if call is not None and call_key(call.name, call.arguments) == wanted:
                    new_args = None if edit.replacement is None else str(edit.replacement.body.get("arguments", ""))
                    calls[index] = None if new_args is None else ToolCall(call.id, call.name, new_args)
                    changed = True
                    break
    if not changed:
        return response
    kept = tuple(c for c in calls if c is not None)
    finish = response.finish_reason if kept or not response.tool_calls else "stop"
    return ModelResponse(text, kept, finish, response.usage, response.model, response.response_id, response.provider)


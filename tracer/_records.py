"""The records of a recording: runs, stages, edges, content-addressed items and snapshots.

Every value here is immutable. A :class:`ContextItem` is what the agent holds instead of a bare
message: the content (:class:`Item`, addressed by the hash of its canonical form) plus where it came
from (:class:`Origin`). A snapshot is the ordered list of context items an inference stage sent to
the model, tools and settings included.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, overload

from ._json import canonical_json, utf8_value


class RunStatus(StrEnum):
    """How a run ended (``running`` while it has not)."""

    RUNNING = "running"
    ANSWERED = "answered"
    AWAITING = "awaiting"
    FAILED = "failed"
    CANCELLED = "cancelled"


class StageKind(StrEnum):
    """What a node of a run's flowchart does."""

    INPUT = "input"
    PROMPT = "prompt"
    MEMORY = "memory"
    INFERENCE = "inference"
    TOOL_BATCH = "tool_batch"
    TOOL = "tool"
    ANSWER = "answer"
    PAUSE = "pause"
    RESUME = "resume"
    COMPACTION = "compaction"
    ERROR = "error"
    SUBAGENT = "subagent"
    PLAN_STEP = "plan_step"


class StageStatus(StrEnum):
    """A stage's state."""

    RUNNING = "running"
    OK = "ok"
    ERROR = "error"
    CANCELLED = "cancelled"


class EdgeKind(StrEnum):
    """How one stage follows another."""

    NEXT = "next"
    FORK = "fork"
    JOIN = "join"
    LOOP = "loop"
    RESUME = "resume"


class ItemKind(StrEnum):
    """The role a piece of content plays in a model's context."""

    SYSTEM = "system"
    PROMPT_SECTION = "prompt_section"
    MEMORY = "memory"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    SUMMARY = "summary"
    TOOL_DEFINITION = "tool_definition"
    SETTINGS = "settings"
    TEXT = "text"


class OriginKind(StrEnum):
    """Where a context item came from: a stage of a run, or a source outside the recording."""

    STAGE = "stage"
    USER = "user"
    MEMORY = "memory"
    PROMPT_SECTION = "prompt_section"
    FILE = "file"
    HOOK = "hook"
    CONFIG = "config"


# one str object per kind: str() of an enum member, and JSON text read back, make a new one each
# time, and a long conversation holds one per message (54 bytes each) in every origin
_KIND_NAMES: dict[str, str] = {str(kind): str(kind) for kind in (*ItemKind, *OriginKind)}


def kind_name(kind: str) -> str:
    """``kind`` as a plain str, the same object for every occurrence of a kind."""
    return _KIND_NAMES.get(kind) or sys.intern(str(kind))




def content_hash(kind: str, body: Any) -> str:
    """The content address of an item: 128-bit BLAKE2b of its canonical form, as hex."""
    try:
        address = canonical_json([kind, body]).encode()
    except UnicodeEncodeError:  # a lone surrogate: hashed as its escape, as Item does
        address = canonical_json(utf8_value([kind, body])).encode()
    return hashlib.blake2b(address, digest_size=16).hexdigest()


# the canonical JSON of the usual kinds, so hashing an item dumps only its body
_KIND_JSON = {str(kind): canonical_json(str(kind)) for kind in ItemKind}


def _text_of(kind: str, body: dict[str, Any]) -> str:
    if kind == ItemKind.TOOL_CALL:
        args = body.get("arguments", "")
        return f"{body.get('name', '?')}({args if isinstance(args, str) else canonical_json(args)})"
    if kind == ItemKind.TOOL_RESULT:
        content = body.get("content", "")
        return content if isinstance(content, str) else canonical_json(content)
    if kind == ItemKind.TOOL_DEFINITION:
        return f"{body.get('name', '?')}: {body.get('description', '')}"
    if kind == ItemKind.SETTINGS:
        return canonical_json(body)
    text = body.get("text", "")
    return text if isinstance(text, str) else canonical_json(text)


def _text_only(body: dict[str, Any]) -> bool:
    """True for a body of one text (``{"text": "..."}``), whose item's row stores no body."""
    return len(body) == 1 and type(body.get("text")) is str


@dataclass(frozen=True, slots=True)
class Item:
    """A piece of context content, stored once however many snapshots hold it.

    ``body`` is a JSON object whose shape depends on ``kind``: ``{"text": ...}`` for text kinds,
    ``{"id", "name", "arguments"}`` for a tool call, ``{"call_id", "name", "content", "is_error"}``
    for a tool result, ``{"name", "description", "parameters"}`` for a tool definition.
    """

    kind: str
    body: dict[str, Any]
    hash: str = field(default="", compare=False)
    _canonical: str = field(default="", compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.hash:
            canonical = canonical_json(self.body)
            kind = _KIND_JSON.get(self.kind) or canonical_json(self.kind)
            try:
                address = f"[{kind},{canonical}]".encode()
            except UnicodeEncodeError:  # a lone surrogate, which no UTF-8 writer takes: the item
                # keeps it as its escape, so it can be hashed and stored
                object.__setattr__(self, "kind", utf8_value(self.kind))
                object.__setattr__(self, "body", utf8_value(self.body))
                canonical = canonical_json(self.body)
                kind = canonical_json(self.kind)
                address = f"[{kind},{canonical}]".encode()
            if not _text_only(self.body):
                # the same canonical text as content_hash(), kept: the store writes it as the body.
                # A text item's row has no body, and a conversation holds its items for its whole
                # life: kept, the text would be held twice (a long session's host held every
                # message's text twice)
                object.__setattr__(self, "_canonical", canonical)
            object.__setattr__(self, "hash", hashlib.blake2b(address, digest_size=16).hexdigest())

    @property
    def canonical_body(self) -> str:
        """The canonical JSON text of the body (what the store keeps for non-text items)."""
        if self._canonical:
            return self._canonical
        canonical = canonical_json(self.body)
        if not _text_only(self.body):
            object.__setattr__(self, "_canonical", canonical)
        return canonical

    @property
    def text(self) -> str:
        """A readable one-piece rendering of the content."""
        return _text_of(self.kind, self.body)

    @classmethod
    def of_text(cls, kind: str, text: str, **extra: Any) -> Item:
        """A text item of ``kind`` (user, assistant, system, memory, ...)."""
        return cls(kind, {"text": text, **extra})


@dataclass(frozen=True, slots=True)
class Origin:
    """Where an item came from.

    ``kind`` is :class:`OriginKind`. A stage origin names the run and stage that produced the item
    (for history it is the earlier run that first produced it). Outside sources name the source in
    ``source`` (a memory key, a prompt section, a file path, a hook name) and, when a stage brought
    the item in (a memory load, a prompt composition), that stage too.
    """

    kind: str
    run_id: str | None = None
    stage_id: str | None = None
    source: str | None = None
    # the recorder's packed form of this origin, computed once (see tracer._rows.packed_origin)
    _packed: str | None = field(default=None, init=False, compare=False, repr=False)

    def describe(self) -> str:
        """A short human description, e.g. ``memory profile.city (stage s-...)``."""
        parts = [self.kind]
        if self.source:
            parts.append(self.source)
        if self.stage_id:
            parts.append(f"@ {self.stage_id}")
        return " ".join(parts)


@dataclass(frozen=True, slots=True)
class ContextItem:
    """An item together with its origin: what the agent holds instead of a bare message."""

    item: Item
    origin: Origin
    # a recorder's packed snapshot entry for this item, and the token of the packer that made it
    # (see tracer._rows): two fields, not a pair (a tuple held per message of a conversation)
    _entry: str = field(default="", init=False, compare=False, repr=False)
    _packer: object = field(default=None, init=False, compare=False, repr=False)

    @property
    def kind(self) -> str:
        """The item's kind."""
        return self.item.kind

    @property
    def text(self) -> str:
        """The item's readable text."""
        return self.item.text

    @property
    def hash(self) -> str:
        """The item's content address."""
        return self.item.hash


class Recorded:
    """A receipt from a recorder: the list a recorded stage's window left out, by position in its
    snapshot chain, so a later stage can name it instead of handing the items over again.

    A stage's :attr:`StageRecording.left_receipt` after it closed. ``LeftOut(..., recorded=r)``
    says "what ``r`` names (``r.count`` items, each left out by ``r.reason``), then these": the
    recorder writes the same rows as for the items themselves, and whoever holds the conversation
    need not keep the items ``r`` names in memory. ``base`` is the receipt the list was checked to
    continue (the one the stage was handed, or, for a list of what fell out since, the chain's
    last), None when it is the stage's own list of items.
    """

    __slots__ = ("_at", "_log", "_token", "base", "count", "reason", "stage_id")

    def __init__(self, count: int, reason: str, base: Recorded | None, stage_id: str,
                 token: object, log: list[str], at: int) -> None:
        self.count, self.reason, self.base, self.stage_id = count, reason, base, stage_id
        self._token, self._log, self._at = token, log, at

    def entries(self) -> list[str]:
        """The packed entries it names (see :mod:`tracer._rows`)."""
        return self._log[self._at:self._at + self.count]

    def __repr__(self) -> str:
        return f"Recorded({self.count} x {self.reason!r} by {self.stage_id})"


class LeftOut(Sequence[tuple[ContextItem, str]]):
    """What a stage's context left out, and why: ``(item, reason)`` pairs, held as runs of items
    left out for one reason.

    A conversation window leaves out the whole history before it, for one reason, at every call:
    ``stage.inputs(items, dropped=LeftOut((history[:start], "memory_window")))`` hands that list to
    the recorder as it is, without a pair per message (pairs made at every call grow with the
    conversation, and so does the garbage collector's work over them).

    ``recorded`` (a :class:`Recorded`) names items left out before the runs without holding them;
    the sequence (``len``, iteration) is the runs' items only, :attr:`total` counts both.
    """

    __slots__ = ("_length", "recorded", "runs")

    def __init__(self, *runs: tuple[Sequence[ContextItem], str], recorded: Recorded | None = None) -> None:
        self.runs: list[tuple[Sequence[ContextItem], str]] = [(items, reason) for items, reason in runs if items]
        self._length = sum(len(items) for items, _ in self.runs)
        self.recorded = recorded if recorded is not None and recorded.count else None

    @property
    def total(self) -> int:
        """How many items were left out: those :attr:`recorded` names and the runs'."""
        return self._length + (self.recorded.count if self.recorded is not None else 0)

    def __bool__(self) -> bool:
        return bool(self._length or self.recorded)

    def extend(self, pairs: Iterable[tuple[ContextItem, str]]) -> None:
        """Add ``pairs`` after the runs held."""
        for ci, reason in pairs:
            self.runs.append(((ci,), reason))
            self._length += 1

    def items(self) -> list[ContextItem]:
        """Every item left out, in order."""
        if len(self.runs) == 1:
            return list(self.runs[0][0])
        return [ci for items, _ in self.runs for ci in items]

    def reasons(self) -> list[str]:
        """The reasons, each once, in order (:attr:`recorded`'s first)."""
        first = [self.recorded.reason] if self.recorded is not None else []
        return list(dict.fromkeys([*first, *(reason for _, reason in self.runs)]))

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[tuple[ContextItem, str]]:
        for items, reason in self.runs:
            for ci in items:
                yield ci, reason

    @overload
    def __getitem__(self, index: int) -> tuple[ContextItem, str]: ...

    @overload
    def __getitem__(self, index: slice) -> list[tuple[ContextItem, str]]: ...

    def __getitem__(self, index: int | slice) -> tuple[ContextItem, str] | list[tuple[ContextItem, str]]:
        if isinstance(index, slice):
            return list(self)[index]
        at = index + self._length if index < 0 else index
        if not 0 <= at < self._length:
            raise IndexError("LeftOut index out of range")
        for items, reason in self.runs:
            if at < len(items):
                return items[at], reason
            at -= len(items)
        raise IndexError("LeftOut index out of range")  # (not reached)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LeftOut | list | tuple):
            if getattr(other, "recorded", None) is not self.recorded:
                return False
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=False))
        return NotImplemented

    def __repr__(self) -> str:
        runs = [f"{len(items)} x {reason!r}" for items, reason in self.runs]
        return f"LeftOut({', '.join([repr(self.recorded), *runs] if self.recorded else runs)})"


@dataclass(frozen=True, slots=True)
class SnapshotEntry:
    """One position of a stage's input list: an item, its origin, and whether it was sent.

    ``included`` is False for context that was available but left out (a memory window, a prompt
    length cap, a compaction); ``dropped_by`` then says which.
    """

    position: int
    item_hash: str
    origin: Origin
    included: bool = True
    dropped_by: str | None = None


#: The attributes that link a team's runs: a ``subagent`` stage names the run it started in
#: ``child_run``; that run names the stage back (``parent_run``, ``parent_stage``, ``parent_agent``).
PARENT_RUN, PARENT_STAGE, PARENT_AGENT, CHILD_RUN = "parent_run", "parent_stage", "parent_agent", "child_run"


@dataclass(frozen=True, slots=True)
class Run:
    """One request to an agent (one turn)."""

    id: str
    session_id: str | None
    agent: str
    status: str
    input: str
    output: str | None
    model: str | None
    started_at: float
    ended_at: float | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0
    forked_from_run: str | None = None
    forked_from_stage: str | None = None
    fork_edit: dict[str, Any] | None = None
    labels: tuple[str, ...] = ()
    attributes: dict[str, Any] = field(default_factory=dict)
    redaction: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def parent_run(self) -> str | None:
        """The run whose ``subagent`` stage started this one (None: a top-level run)."""
        parent = self.attributes.get(PARENT_RUN)
        return parent if isinstance(parent, str) and parent else None


@dataclass(frozen=True, slots=True)
class Stage:
    """A node of a run's flowchart."""

    id: str
    run_id: str
    seq: int
    kind: str
    name: str
    status: str
    started_at: float
    ended_at: float | None = None
    parent_id: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Edge:
    """How one stage follows another in a run's flowchart."""

    run_id: str
    src: str
    dst: str
    kind: str


def context_item_to_dict(ci: ContextItem) -> dict[str, Any]:
    """The JSON form of a context item (memory export, session envelopes, recorded exchanges)."""
    origin = ci.origin
    out: dict[str, Any] = {"kind": ci.item.kind, "body": ci.item.body, "origin": {"kind": origin.kind}}
    for key in ("run_id", "stage_id", "source"):
        value = getattr(origin, key)
        if value is not None:
            out["origin"][key] = value
    return out


def context_item_from_dict(data: dict[str, Any]) -> ContextItem:
    """A context item from its JSON form; a ValueError says what is missing."""
    try:
        origin = data["origin"]
        run_id, stage_id = origin.get("run_id"), origin.get("stage_id")
        # the kinds and ids interned: a conversation read back holds them once, not once per message
        return ContextItem(
            Item(kind_name(data["kind"]), dict(data["body"])),
            Origin(kind_name(origin["kind"]), run_id if run_id is None else sys.intern(str(run_id)),
                   stage_id if stage_id is None else sys.intern(str(stage_id)), origin.get("source")),
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a context item (needs kind, body and origin.kind): {exc!r}") from exc

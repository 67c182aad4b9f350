"""Conversation memory: several conversations of context items, windowed by a token budget.

Messages are kept as :class:`tracer.ContextItem`, so a message restored from a session store still
names the run and stage that first produced it. :meth:`ConversationMemory.context` returns what
fits the budget (oldest dropped first, a tool result never separated from its call) and what was
left out, which the recorder stores as "not in context".

A conversation may hold only its recent messages (a standing host's do): ``older``, a receipt
from the recorder (:class:`tracer.Recorded`), names its first ``older.count`` messages as a
recorded call left them out, and ``load_older`` reads them back when something needs them
(:meth:`ConversationMemory.hold_all`). :meth:`ConversationMemory.window` is :meth:`context` for
such a conversation. After a recorded call, ``recorded`` is the receipt for what its window left
out (whoever holds the conversation may let go of those messages).
"""

from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracer import (
    ContextItem,
    Item,
    ItemKind,
    Origin,
    OriginKind,
    Recorded,
    context_item_from_dict,
    context_item_to_dict,
)

from .errors import UserError

DROPPED_BY_WINDOW = "memory_window"


@dataclass(frozen=True)
class LeftBehind:
    """The first ``count`` messages of a conversation, named by the recorder's receipt for them:
    a recorded call's window left them out, under a memory of these settings (so a later window of
    the same settings never reaches back into them: it only moves forward)."""

    receipt: Recorded
    max_tokens: int
    max_messages: int | None

    @property
    def count(self) -> int:
        """How many messages it names."""
        return self.receipt.count


@dataclass(frozen=True)
class WindowRecord:
    """What the window left out of the latest recorded call of a conversation (see :mod:`agent._loop`).

    ``depth`` counts the runs since one recorded its whole list: a later run records only what fell
    out since, naming this call, until the chain is long enough that it records the whole list again.
    ``dropped`` is the list's held part when ``older`` names its first messages (see the module's
    docstring); ``receipt`` is the recorder's for the whole list, once the call was recorded.
    """

    run_id: str
    stage_id: str
    dropped: list[ContextItem]
    depth: int = 0
    older: LeftBehind | None = None
    receipt: Recorded | None = None

    @property
    def count(self) -> int:
        """How many messages the call's window left out."""
        return len(self.dropped) + (self.older.count if self.older is not None else 0)
_CALL_OVERHEAD_CHARS = 50


def estimate_item_tokens(ci: ContextItem) -> int:
    """About four characters a token; tool calls and results carry 50 characters of overhead."""
    chars = len(ci.item.text)
    if ci.item.kind in (ItemKind.TOOL_CALL, ItemKind.TOOL_RESULT):
        chars += _CALL_OVERHEAD_CHARS
    return (chars + 3) // 4


@dataclass
class Conversation:
    """One conversation: its messages (as context items), system prompt and metadata."""

    id: str
    system_prompt: str | None = None
    messages: list[ContextItem] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    # the first older.count messages, not held here (``messages`` are the ones after them)
    older: LeftBehind | None = field(default=None, repr=False, compare=False)
    load_older: Callable[[], Awaitable[Sequence[ContextItem]]] | None = field(default=None, repr=False, compare=False)
    recorded: LeftBehind | None = field(default=None, repr=False, compare=False)  # see the module's docstring

    @property
    def offset(self) -> int:
        """How many messages come before ``messages`` (those ``older`` names)."""
        return self.older.count if self.older is not None else 0

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form (what :meth:`ConversationMemory.export` writes)."""
        if self.older is not None:
            raise UserError(f"conversation {self.id!r} holds only its recent messages: "
                            "ConversationMemory.hold_all() reads the others back first")
        return {
            "format": "footprint.conversation/1",
            "id": self.id,
            "system_prompt": self.system_prompt,
            "metadata": self.metadata,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "messages": [context_item_to_dict(m) for m in self.messages],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Conversation:
        """A conversation from its JSON form; a ValueError says what is wrong."""
        if not isinstance(data, dict) or data.get("format") != "footprint.conversation/1":
            raise ValueError("not a footprint conversation (format footprint.conversation/1 expected)")
        try:
            messages = [context_item_from_dict(m) for m in data["messages"]]
            return cls(
                id=str(data["id"]), system_prompt=data.get("system_prompt"), messages=messages,
                metadata=dict(data.get("metadata") or {}), created_at=float(data.get("created_at") or time.time()),
                updated_at=float(data.get("updated_at") or time.time()),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"conversation {data.get('id')!r} is malformed: {exc}") from exc


@dataclass(frozen=True)
class MemoryStats:
    """A conversation's size and last activity."""

    message_count: int
    estimated_tokens: int
    last_activity: float


class ConversationMemory:
    """Conversations in memory, with a token budget (``max_tokens``) and a message cap per context."""

    def __init__(self, *, max_tokens: int = 100_000, max_messages: int | None = None) -> None:
        self.max_tokens = max_tokens
        if max_tokens < 1 or (max_messages is not None and max_messages < 1):
            raise UserError("ConversationMemory: max_tokens and max_messages must be at least 1")
        self.max_messages = max_messages
        self._conversations: dict[str, Conversation] = {}
        self._token_cache: dict[str, int] = {}  # item hash -> estimated tokens
        self._windows: dict[str, WindowRecord] = {}  # conversation -> its latest recorded window

    def create(
        self, system_prompt: str | None = None, metadata: dict[str, Any] | None = None, *, id: str | None = None
    ) -> Conversation:
        """A new empty conversation."""
        conv = Conversation(id or uuid.uuid4().hex, system_prompt, metadata=dict(metadata or {}))
        self._conversations[conv.id] = conv
        return conv

    def get(self, conversation_id: str) -> Conversation | None:
        """The conversation, or None."""
        return self._conversations.get(conversation_id)

    def require(self, conversation_id: str) -> Conversation:
        """The conversation; a :class:`UserError` names it when absent."""
        conv = self._conversations.get(conversation_id)
        if conv is None:
            raise UserError(f"no conversation {conversation_id!r} in memory")
        return conv

    def has(self, conversation_id: str) -> bool:
        """True when the conversation exists."""
        return conversation_id in self._conversations

    def delete(self, conversation_id: str) -> bool:
        """Remove a conversation; True when it existed."""
        self._windows.pop(conversation_id, None)
        return self._conversations.pop(conversation_id, None) is not None

    def clear(self) -> None:
        """Remove every conversation."""
        self._conversations.clear()
        self._windows.clear()

    def last_window(self, conversation_id: str) -> WindowRecord | None:
        """What the window left out of the conversation's latest recorded call (in this process)."""
        return self._windows.get(conversation_id)

    def remember_window(self, conversation_id: str, record: WindowRecord) -> None:
        """Keep what the window left out of a recorded call, for the next call to continue."""
        self._windows[conversation_id] = record

    def ids(self) -> list[str]:
        """Every conversation id."""
        return list(self._conversations)

    def fork(self, conversation_id: str) -> Conversation:
        """A copy under a new id, with ``forked_from`` in its metadata; later changes do not cross over."""
        source = self.require(conversation_id)
        now = time.time()
        # context items are immutable, so the copy shares them; the list and metadata are its own
        conv = Conversation(uuid.uuid4().hex, source.system_prompt, list(source.messages),
                            {**copy.deepcopy(source.metadata), "forked_from": source.id}, now, now,
                            older=source.older, load_older=source.load_older)
        self._conversations[conv.id] = conv
        return conv

    def add(self, conversation_id: str, *items: ContextItem) -> Conversation:
        """Append messages."""
        conv = self.require(conversation_id)
        conv.messages.extend(items)
        conv.updated_at = time.time()
        return conv

    def clear_messages(self, conversation_id: str) -> None:
        """Drop every message of a conversation, keeping it."""
        conv = self.require(conversation_id)
        conv.messages.clear()
        conv.older = conv.recorded = conv.load_older = None
        conv.updated_at = time.time()
        self._windows.pop(conversation_id, None)

    def update_system_prompt(self, conversation_id: str, system_prompt: str) -> None:
        """Replace the conversation's system prompt."""
        self.require(conversation_id).system_prompt = system_prompt

    def update_metadata(self, conversation_id: str, metadata: dict[str, Any]) -> None:
        """Merge into the conversation's metadata."""
        self.require(conversation_id).metadata.update(metadata)

    def context(self, conversation_id: str) -> tuple[list[ContextItem], list[ContextItem]]:
        """The messages that fit the budget, oldest dropped first, and those that were dropped.

        The current turn (the newest user message and everything after it) is always kept, and a
        window never begins with a tool call or result whose partner was dropped. The system
        prompt is not a message here: the prompt composer adds it to every context. A
        conversation holding only its recent messages takes :meth:`window`.
        """
        conv = self.require(conversation_id)
        if conv.older is not None:
            raise UserError(f"conversation {conversation_id!r} holds only its recent messages: "
                            "ConversationMemory.window() gives its context")
        messages = conv.messages
        start = self._start(messages, 0)
        assert start is not None  # (a conversation holding every message needs no other)
        if start == 0:
            return list(messages), []
        return messages[start:], messages[:start]

    async def window(self, conversation_id: str) -> tuple[list[ContextItem], list[ContextItem], LeftBehind | None]:
        """:meth:`context` for a conversation that may hold only its recent messages: what fits,
        the held part of what was left out, and the receipt naming the rest (None: all are held).

        When the window reaches into the messages not held (a smaller budget, a rewind), they are
        read back first (:meth:`hold_all`).
        """
        conv = self.require(conversation_id)
        if conv.older is not None and type(self).context is ConversationMemory.context:
            start = self._start(conv.messages, conv.offset, conv.older)
            if start is not None:
                at = start - conv.offset
                return conv.messages[at:], conv.messages[:at], conv.older
            await self.hold_all(conversation_id)
        kept, dropped = self.context(conversation_id)  # (a subclass may choose the window its own way)
        return kept, dropped, None

    async def hold_all(self, conversation_id: str) -> Conversation:
        """Read back the messages a conversation does not hold (``load_older``), so it holds all."""
        conv = self.require(conversation_id)
        if conv.older is None:
            return conv
        if conv.load_older is None:
            raise UserError(f"conversation {conversation_id!r} holds only its recent messages and has no "
                            "way to read the others back")
        older = list(await conv.load_older())
        if len(older) != conv.older.count:
            raise UserError(f"conversation {conversation_id!r}: {len(older)} older messages read back, "
                            f"{conv.older.count} expected")
        conv.messages[:0] = older
        # (and held so: a receipt it had is not let go by again until a call gives a new one)
        conv.older = conv.recorded = None
        return conv

    def _start(self, messages: list[ContextItem], offset: int, older: LeftBehind | None = None) -> int | None:
        """Where the window begins in the whole conversation, whose messages from ``offset`` on are
        ``messages`` (``older`` names the ones before); None when that depends on those."""
        # A window of the same settings began at ``offset`` before (it left ``older`` out), and
        # windows only move forward as messages are added: the budget's start, the count cap's and
        # the current turn's all do, and so does skipping tool messages. So this one begins at
        # ``offset`` or later, and what is not held never decides where.
        same = older is not None and (older.max_tokens, older.max_messages) == (self.max_tokens, self.max_messages)
        count = offset + len(messages)
        protect = count
        for index in range(len(messages) - 1, -1, -1):
            if messages[index].item.kind == ItemKind.USER:
                protect = offset + index
                break
        else:
            if offset and not same:
                return None  # (the current turn's message is not held)
        start = 0
        if self.max_messages is not None and count > self.max_messages:
            start = min(count - self.max_messages, protect)
        # the oldest messages go first: walk back from the newest while they fit the budget (a long
        # conversation's window costs what the window holds, not what the conversation does)
        floor = max(start, offset)
        fits, total = count, 0
        cached, budget = self._token_cache.get, self.max_tokens  # (the loop runs over the whole window)
        while fits > floor:
            ci = messages[fits - 1 - offset]
            tokens = cached(ci.item.hash)
            total += self._tokens(ci) if tokens is None else tokens
            if total > budget:
                break
            fits -= 1
        else:
            if floor > start:  # everything held fits: the window begins at ``offset`` at the earliest
                if not same:
                    return None
                fits = start = offset
        start = min(fits, protect) if fits > start else start
        # never begin mid-exchange: skip orphaned results and calls
        while start < protect and messages[start - offset].item.kind in (ItemKind.TOOL_RESULT, ItemKind.TOOL_CALL):
            start += 1
        return start

    def full_context(self, conversation_id: str) -> tuple[list[ContextItem], list[ContextItem]]:
        """:meth:`context` with the conversation's system prompt first (always kept; not counted)."""
        conv = self.require(conversation_id)
        kept, dropped = self.context(conversation_id)
        if not conv.system_prompt:
            return kept, dropped
        system = ContextItem(Item.of_text(ItemKind.SYSTEM, conv.system_prompt),
                             Origin(OriginKind.CONFIG, source=f"conversation:{conv.id}"))
        return [system, *kept], dropped

    def unanswered_calls(self, conversation_id: str) -> list[ContextItem]:
        """Tool calls of the current turn that have no result (a run cut off mid-batch), in order."""
        answered: set[Any] = set()
        pending: list[ContextItem] = []
        for ci in reversed(self.require(conversation_id).messages):
            kind = ci.item.kind
            if kind == ItemKind.USER:
                break
            if kind == ItemKind.TOOL_RESULT:
                answered.add(ci.item.body.get("call_id"))
            elif kind == ItemKind.TOOL_CALL and ci.item.body.get("id") not in answered \
                    and not ci.item.body.get("settled"):  # a provider-settled call owes no result
                pending.append(ci)
        pending.reverse()
        return pending

    def _tokens(self, ci: ContextItem) -> int:
        cached = self._token_cache.get(ci.item.hash)
        if cached is None:
            if len(self._token_cache) > 100_000:
                self._token_cache.clear()
            cached = self._token_cache[ci.item.hash] = estimate_item_tokens(ci)
        return cached

    def stats(self, conversation_id: str) -> MemoryStats:
        """Message count, estimated tokens (of the messages held) and last activity."""
        conv = self.require(conversation_id)
        return MemoryStats(conv.offset + len(conv.messages), sum(self._tokens(m) for m in conv.messages),
                           conv.updated_at)

    def export(self, conversation_id: str) -> str:
        """The conversation as JSON text."""
        return json.dumps(self.require(conversation_id).to_dict(), ensure_ascii=False)

    def import_(self, text: str) -> Conversation:
        """Load a conversation exported by :meth:`export` (replacing one with the same id)."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UserError(f"conversation import: not JSON ({exc.msg} at char {exc.pos})") from exc
        try:
            conv = Conversation.from_dict(data)
        except ValueError as exc:
            raise UserError(f"conversation import: {exc}") from exc
        self._conversations[conv.id] = conv
        return conv

    def put(self, conversation: Conversation) -> None:
        """Add or replace a whole conversation (session stores hydrate through this)."""
        self._conversations[conversation.id] = conversation

    def extend_all(self, conversation_id: str, items: Iterable[ContextItem]) -> None:
        """Append many messages."""
        self.add(conversation_id, *items)

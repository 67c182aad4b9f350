"""Remembered tool exchanges: the tool calls behind a web chat's replies, kept for a few turns.

A chat transcript holds what was written, not the tool calls behind a reply, so a tool's result
would be gone one turn later. That breaks a two-step write — turn N calls a tool that answers
with a preview and a confirmation id, turn N+1 the owner says "yes" and the model must call again
with that id — unless the agent keeps turn N's calls and results and puts them back.

Per chat the newest :data:`MAX_REMEMBERED_TOOL_TURNS` turns that called a tool are kept, each
anchored to the newest transcript line its turn answered; a turn without tool calls keeps
nothing. :func:`place_exchanges` puts each exchange back, whole, right before the first history
line newer than its anchor (normally the agent's own reply). One whose reply is not in the chat
yet goes last, unless its line is still pending (being answered again now: it is left out); one
whose line fell out of the history window is left out. The memory is process-local and bounded to
:data:`MAX_REMEMBERED_CHATS` chats, the chat written longest ago dropped first: after a restart the
model simply asks the tool for a fresh preview and the owner confirms once more.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tracer import ContextItem, ItemKind

#: Tool-calling turns remembered per chat.
MAX_REMEMBERED_TOOL_TURNS = 3
#: Chats remembered at once; the chat written longest ago is forgotten first.
MAX_REMEMBERED_CHATS = 1000


@dataclass(frozen=True)
class ToolExchange:
    """One turn's tool calls and results, in order, anchored to the newest line the turn answered.

    ``items`` keep the context items the run produced, so their origins still name that run's
    inference and tool stages (``why`` walks back to the run that made the call).
    """

    anchor: int
    items: tuple[ContextItem, ...]

    @property
    def tools(self) -> tuple[str, ...]:
        """The names of the tools called, in order."""
        return tuple(str(ci.item.body.get("name", "")) for ci in self.items if ci.item.kind == ItemKind.TOOL_CALL)


def complete_exchange(items: Iterable[ContextItem]) -> tuple[ContextItem, ...]:
    """The tool calls that have a result, and their results, in order; everything else dropped.

    A call without a result (the run paused or failed in the middle) could not be sent to a model
    that requires every call to be answered, and a result without its call means nothing.
    """
    items = [ci for ci in items if ci.item.kind in (ItemKind.TOOL_CALL, ItemKind.TOOL_RESULT)]
    call_ids = {ci.item.body.get("id") for ci in items if ci.item.kind == ItemKind.TOOL_CALL}
    answered = {ci.item.body.get("call_id") for ci in items if ci.item.kind == ItemKind.TOOL_RESULT} & call_ids
    return tuple(
        ci for ci in items
        if (ci.item.body.get("id") if ci.item.kind == ItemKind.TOOL_CALL else ci.item.body.get("call_id")) in answered
    )


class RememberedToolExchanges:
    """Per chat, the newest ``per_chat`` tool exchanges; at most ``max_chats`` chats."""

    def __init__(self, *, per_chat: int = MAX_REMEMBERED_TOOL_TURNS, max_chats: int = MAX_REMEMBERED_CHATS) -> None:
        if per_chat < 1 or max_chats < 1:
            raise ValueError("remembered tool exchanges: per_chat and max_chats must be at least 1")
        self.per_chat = per_chat
        self.max_chats = max_chats
        self._chats: OrderedDict[str, deque[ToolExchange]] = OrderedDict()

    def remember(self, chat_id: str, anchor: int, items: Iterable[ContextItem]) -> ToolExchange | None:
        """Keep a turn's exchange (None, and nothing kept or dropped, when it called no tool)."""
        kept = complete_exchange(items)
        if not kept:
            return None
        exchange = ToolExchange(anchor, kept)
        chat = self._chats.get(chat_id)
        if chat is None:
            chat = self._chats[chat_id] = deque(maxlen=self.per_chat)
        chat.append(exchange)
        self._chats.move_to_end(chat_id)  # "written longest ago" is what gets dropped
        while len(self._chats) > self.max_chats:
            self._chats.popitem(last=False)
        return exchange

    def exchanges(self, chat_id: str) -> tuple[ToolExchange, ...]:
        """The chat's exchanges, oldest first (reading does not count as writing)."""
        return tuple(self._chats.get(chat_id, ()))

    def forget(self, chat_id: str) -> bool:
        """Drop a chat's exchanges; True when there were some."""
        return self._chats.pop(chat_id, None) is not None

    def chats(self) -> list[str]:
        """The remembered chats, written longest ago first."""
        return list(self._chats)

    def __len__(self) -> int:
        return len(self._chats)


def place_exchanges(
    history: Sequence[tuple[int, ContextItem]],
    exchanges: Sequence[ToolExchange],
    *,
    window_start: int,
    pending_from: int,
) -> list[ContextItem]:
    """The history with each exchange put back where it belongs.

    ``history`` is the transcript window before the line being answered, as (seq, item) in order;
    ``window_start`` is the oldest seq the window kept; lines from ``pending_from`` on are the ones
    this turn answers. An exchange anchored before the window is left out, one anchored on a
    pending line is left out, and every other goes right before the first history line newer than
    its anchor, or last. Exchanges meeting at one place keep their age order.
    """
    before: dict[int, list[ToolExchange]] = {}
    last: list[ToolExchange] = []
    for exchange in exchanges:
        if exchange.anchor < window_start or exchange.anchor >= pending_from:
            continue
        position = next((i for i, (seq, _) in enumerate(history) if seq > exchange.anchor), None)
        (last if position is None else before.setdefault(position, [])).append(exchange)
    out: list[ContextItem] = []
    for index, (_, item) in enumerate(history):
        for exchange in before.get(index, ()):
            out.extend(exchange.items)
        out.append(item)
    for exchange in last:
        out.extend(exchange.items)
    return out

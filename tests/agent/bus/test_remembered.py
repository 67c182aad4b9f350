"""Remembered tool exchanges: what is kept, and where it goes back into the history."""

from __future__ import annotations

from agent.bus import (
    MAX_REMEMBERED_CHATS,
    MAX_REMEMBERED_TOOL_TURNS,
    RememberedToolExchanges,
    complete_exchange,
    place_exchanges,
)
from agent.bus._remembered import ToolExchange
from tracer import ContextItem, Item, ItemKind, Origin, OriginKind


def line(seq: int, text: str | None = None) -> tuple[int, ContextItem]:
    return seq, ContextItem(Item.of_text(ItemKind.USER, text or f"line {seq}"), Origin(OriginKind.USER))


def call(call_id: str, name: str = "t") -> ContextItem:
    return ContextItem(Item(ItemKind.TOOL_CALL, {"id": call_id, "name": name, "arguments": "{}"}),
                       Origin(OriginKind.STAGE, "r-1", "s-1"))


def result(call_id: str) -> ContextItem:
    return ContextItem(Item(ItemKind.TOOL_RESULT, {"call_id": call_id, "name": "t", "content": "ok", "is_error": False}),
                       Origin(OriginKind.STAGE, "r-1", "s-2"))


def texts(items: list[ContextItem]) -> list[str]:
    return [ci.item.text if ci.item.kind == ItemKind.USER else f"{ci.item.kind}:{ci.item.body.get('id') or ci.item.body.get('call_id')}"
            for ci in items]


def test_the_constants_are_the_seeds() -> None:
    assert (MAX_REMEMBERED_TOOL_TURNS, MAX_REMEMBERED_CHATS) == (3, 1000)


def test_an_exchange_goes_right_before_the_first_line_newer_than_its_anchor() -> None:
    history = [line(1), line(2), line(3)]
    placed = place_exchanges(history, [ToolExchange(1, (call("a"), result("a")))], window_start=1, pending_from=4)
    assert texts(placed) == ["line 1", "tool_call:a", "tool_result:a", "line 2", "line 3"]


def test_one_whose_reply_is_not_in_the_chat_yet_goes_last() -> None:
    placed = place_exchanges([line(1), line(2)], [ToolExchange(2, (call("a"), result("a")))],
                             window_start=1, pending_from=3)
    assert texts(placed) == ["line 1", "line 2", "tool_call:a", "tool_result:a"]


def test_one_whose_line_left_the_window_or_is_pending_is_left_out() -> None:
    exchanges = [ToolExchange(1, (call("old"), result("old"))), ToolExchange(5, (call("p"), result("p"))),
                 ToolExchange(3, (call("ok"), result("ok")))]
    placed = place_exchanges([line(3), line(4), line(5), line(6)], exchanges, window_start=3, pending_from=5)
    assert texts(placed) == ["line 3", "tool_call:ok", "tool_result:ok", "line 4", "line 5", "line 6"]


def test_exchanges_meeting_at_one_place_keep_their_age_order() -> None:
    exchanges = [ToolExchange(1, (call("a"), result("a"))), ToolExchange(2, (call("b"), result("b")))]
    placed = place_exchanges([line(1), line(3)], exchanges, window_start=1, pending_from=4)
    assert texts(placed) == ["line 1", "tool_call:a", "tool_result:a", "tool_call:b", "tool_result:b", "line 3"]


def test_only_complete_call_result_pairs_are_kept() -> None:
    items = [ContextItem(Item.of_text(ItemKind.ASSISTANT, "let me check"), Origin(OriginKind.STAGE)),
             call("a"), call("b"), result("a"), result("zz")]
    assert texts(list(complete_exchange(items))) == ["tool_call:a", "tool_result:a"]


def test_three_tool_turns_per_chat_and_a_turn_without_tools_keeps_nothing() -> None:
    memory = RememberedToolExchanges()
    for anchor in range(1, 5):
        memory.remember("chat", anchor, [call(f"c{anchor}"), result(f"c{anchor}")])
    assert memory.remember("chat", 9, [ContextItem(Item.of_text(ItemKind.ASSISTANT, "hi"), Origin("stage"))]) is None
    assert [e.anchor for e in memory.exchanges("chat")] == [2, 3, 4]
    assert memory.exchanges("other") == ()


def test_the_chat_written_longest_ago_is_dropped_first() -> None:
    memory = RememberedToolExchanges()
    for i in range(MAX_REMEMBERED_CHATS):
        memory.remember(f"chat-{i}", 1, [call("a"), result("a")])
    memory.remember("chat-0", 2, [call("b"), result("b")])  # chat-0 is written again: now the newest
    memory.exchanges("chat-1")  # reading is not writing
    memory.remember("chat-new", 1, [call("c"), result("c")])
    assert len(memory) == MAX_REMEMBERED_CHATS
    assert memory.exchanges("chat-1") == () and len(memory.exchanges("chat-0")) == 2
    assert memory.chats()[0] == "chat-2" and memory.chats()[-1] == "chat-new"
    assert memory.forget("chat-new") and not memory.forget("chat-new")

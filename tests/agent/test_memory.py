"""ConversationMemory: conversations, the token window, fork, export/import, stats."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent import Conversation, ConversationMemory, LeftBehind, estimate_item_tokens
from agent.errors import UserError
from tracer import ContextItem, Item, ItemKind, Origin, OriginKind, Recorded

STAGE = Origin(OriginKind.STAGE, "r-1", "s-1")


def user(text: str) -> ContextItem:
    return ContextItem(Item.of_text(ItemKind.USER, text), Origin(OriginKind.USER, "r-1", "s-0", "input"))


def assistant(text: str) -> ContextItem:
    return ContextItem(Item.of_text(ItemKind.ASSISTANT, text), STAGE)


def call(call_id: str, name: str = "t") -> ContextItem:
    return ContextItem(Item(ItemKind.TOOL_CALL, {"id": call_id, "name": name, "arguments": "{}"}), STAGE)


def result(call_id: str, content: str = "ok", name: str = "t") -> ContextItem:
    body = {"call_id": call_id, "name": name, "content": content, "is_error": False}
    return ContextItem(Item(ItemKind.TOOL_RESULT, body), STAGE)


def test_several_conversations() -> None:
    memory = ConversationMemory()
    a = memory.create("You are A.", {"owner": "x"})
    b = memory.create(id="b")
    memory.add(a.id, user("hi"))
    assert memory.has(a.id) and memory.has("b") and set(memory.ids()) == {a.id, "b"}
    assert memory.require(a.id).messages == [user("hi")] and memory.require("b").messages == []
    assert memory.get("nope") is None
    with pytest.raises(UserError, match="no conversation 'nope'"):
        memory.add("nope", user("x"))
    memory.update_system_prompt(a.id, "You are A2.")
    memory.update_metadata(a.id, {"topic": "y"})
    assert a.system_prompt == "You are A2." and a.metadata == {"owner": "x", "topic": "y"}
    memory.clear_messages(a.id)
    assert a.messages == [] and memory.has(a.id)
    assert memory.delete("b") is True and memory.delete("b") is False
    memory.clear()
    assert memory.ids() == []
    assert b.id == "b"


def test_token_estimate() -> None:
    assert estimate_item_tokens(user("abcdefgh")) == 2
    # tool calls and results carry 50 characters of overhead
    assert estimate_item_tokens(result("c1", "x" * 10)) == (10 + 50 + 3) // 4


def test_window_drops_the_oldest_first_and_reports_what_it_dropped() -> None:
    memory = ConversationMemory(max_tokens=10)
    conv = memory.create("system prompt")
    old = [user("a" * 16), assistant("b" * 16), user("c" * 16), assistant("d" * 16)]
    memory.add(conv.id, *old, user("e" * 16))
    kept, dropped = memory.context(conv.id)
    assert kept == [assistant("d" * 16), user("e" * 16)]  # 4 + 4 tokens fit in 10
    assert dropped == old[:3]


def _window_by_the_rule(messages: list[ContextItem], max_tokens: int, max_messages: int | None) -> int:
    """Where the window starts, by the rule as written: cap the count, drop the oldest until the rest
    fits (never the current turn), never begin with a call or result."""
    protect = max((i for i, m in enumerate(messages) if m.item.kind == ItemKind.USER), default=len(messages))
    start = 0
    if max_messages is not None and len(messages) > max_messages:
        start = min(len(messages) - max_messages, protect)
    while sum(estimate_item_tokens(m) for m in messages[start:]) > max_tokens and start < protect:
        start += 1
    while start < protect and messages[start].item.kind in (ItemKind.TOOL_RESULT, ItemKind.TOOL_CALL):
        start += 1
    return start


_message = st.one_of(
    st.builds(lambda n: user("u" * n), st.integers(0, 40)),
    st.builds(lambda n: assistant("a" * n), st.integers(0, 40)),
    st.builds(lambda n: call(f"c{n}"), st.integers(0, 3)),
    st.builds(lambda n: result(f"c{n}", "r" * n), st.integers(0, 3)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_message, max_size=30), st.integers(1, 60), st.one_of(st.none(), st.integers(1, 12)))
def test_the_window_follows_the_rule_on_generated_conversations(
    messages: list[ContextItem], max_tokens: int, max_messages: int | None
) -> None:
    memory = ConversationMemory(max_tokens=max_tokens, max_messages=max_messages)
    conv = memory.create()
    memory.add(conv.id, *messages)
    kept, dropped = memory.context(conv.id)
    start = _window_by_the_rule(messages, max_tokens, max_messages)
    assert (kept, dropped) == (messages[start:], messages[:start])


def test_full_context_puts_the_system_prompt_first_and_always_keeps_it() -> None:
    memory = ConversationMemory(max_tokens=4)
    conv = memory.create("You are terse. " * 20, id="c")
    memory.add(conv.id, user("a" * 16), assistant("b" * 16), user("c" * 8))
    kept, dropped = memory.full_context(conv.id)
    assert kept[0].item.kind == "system" and kept[0].item.text.startswith("You are terse.")
    assert kept[0].origin.source == "conversation:c"
    assert kept[1:] == [user("c" * 8)] and len(dropped) == 2
    assert memory.full_context(memory.create().id) == ([], [])


def test_window_keeps_everything_under_the_budget() -> None:
    memory = ConversationMemory()
    conv = memory.create()
    memory.add(conv.id, user("hi"), assistant("hello"))
    assert memory.context(conv.id) == ([user("hi"), assistant("hello")], [])


def test_window_never_starts_mid_exchange() -> None:
    memory = ConversationMemory(max_tokens=30)  # dropping q1 and the call fits; the result must go too
    conv = memory.create()
    memory.add(conv.id, user("q1"), call("c1"), result("c1", "r" * 40), assistant("a1"), user("q2"))
    kept, dropped = memory.context(conv.id)
    assert kept[0].item.kind not in ("tool_call", "tool_result")
    assert kept == [assistant("a1"), user("q2")]
    assert len(dropped) == 3


def test_the_current_turn_is_never_windowed_out() -> None:
    memory = ConversationMemory(max_tokens=5)
    conv = memory.create()
    memory.add(conv.id, user("old question"), assistant("old answer"), user("x" * 40), call("c1"), result("c1"))
    kept, dropped = memory.context(conv.id)
    assert kept == [user("x" * 40), call("c1"), result("c1")]
    assert dropped == [user("old question"), assistant("old answer")]


def test_message_cap() -> None:
    memory = ConversationMemory(max_messages=2)
    conv = memory.create()
    memory.add(conv.id, user("1"), assistant("2"), user("3"), assistant("4"))
    kept, dropped = memory.context(conv.id)
    assert kept == [user("3"), assistant("4")] and dropped == [user("1"), assistant("2")]


def test_bad_limits_are_refused() -> None:
    with pytest.raises(UserError):
        ConversationMemory(max_tokens=0)
    with pytest.raises(UserError):
        ConversationMemory(max_messages=0)


def test_unanswered_calls() -> None:
    memory = ConversationMemory()
    conv = memory.create()
    memory.add(conv.id, user("q"), call("c1"), call("c2"), result("c2"))
    assert memory.unanswered_calls(conv.id) == [call("c1")]
    memory.add(conv.id, result("c1"))
    assert memory.unanswered_calls(conv.id) == []


def test_fork_is_independent_and_names_its_source() -> None:
    memory = ConversationMemory()
    conv = memory.create("sys", {"tags": ["a"]})
    memory.add(conv.id, user("hi"))
    fork = memory.fork(conv.id)
    assert fork.id != conv.id and fork.metadata == {"tags": ["a"], "forked_from": conv.id}
    assert fork.messages == conv.messages and fork.system_prompt == "sys"
    memory.add(fork.id, assistant("only in the fork"))
    fork.metadata["tags"].append("b")
    assert conv.messages == [user("hi")] and conv.metadata == {"tags": ["a"]}


def test_export_and_import_round_trip_with_origins() -> None:
    memory = ConversationMemory()
    conv = memory.create("sys", {"k": 1}, id="c-1")
    memory.add(conv.id, user("hi"), call("c1"), result("c1", "done"))
    text = memory.export(conv.id)
    data = json.loads(text)
    assert data["format"] == "footprint.conversation/1" and data["messages"][0]["origin"]["source"] == "input"
    other = ConversationMemory()
    restored = other.import_(text)
    assert restored.id == "c-1" and restored.system_prompt == "sys" and restored.metadata == {"k": 1}
    assert restored.messages == conv.messages
    assert [m.origin for m in restored.messages] == [m.origin for m in conv.messages]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "not JSON"),
        ('{"format": "other"}', "not a footprint conversation"),
        ('{"format": "footprint.conversation/1", "id": "x", "messages": [{"kind": "user"}]}', "is malformed"),
    ],
)
def test_import_says_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        ConversationMemory().import_(text)


def test_stats() -> None:
    memory = ConversationMemory()
    conv = memory.create()
    memory.add(conv.id, user("a" * 8), assistant("b" * 4))
    stats = memory.stats(conv.id)
    assert stats.message_count == 2 and stats.estimated_tokens == 3
    assert stats.last_activity == conv.updated_at


def test_put_replaces_a_whole_conversation() -> None:
    memory = ConversationMemory()
    memory.put(Conversation("s1", "sys", [user("restored")]))
    assert memory.require("s1").messages == [user("restored")]


# ---------------------------------------------------------------------- a conversation holding its recent part


def _receipt(count: int, max_tokens: int = 100, max_messages: int | None = None) -> LeftBehind:
    return LeftBehind(Recorded(count, "memory_window", None, "s-x", object(), [], 0), max_tokens, max_messages)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["user", "assistant", "tool"]), min_size=1, max_size=40),
       st.integers(5, 120), st.one_of(st.none(), st.integers(1, 12)), st.integers(0, 40), st.integers(0, 6))
async def test_a_conversation_holding_its_recent_part_gets_the_window_the_whole_one_does(
    shape: list[str], max_tokens: int, max_messages: int | None, cut: int, more: int,
) -> None:
    """Whatever the budget: the window over the messages held is the whole conversation's, and when
    it would reach into what is not held, those are read back first."""
    messages: list[ContextItem] = []
    for n, kind in enumerate(shape):
        if kind == "tool":
            messages += [call(f"c{n}"), result(f"c{n}", "r" * (n % 7))]
        else:
            messages.append(user(f"u{n} " + "x" * (n % 11)) if kind == "user" else assistant(f"a{n} " + "y" * (n % 5)))
    whole = ConversationMemory(max_tokens=max_tokens, max_messages=max_messages)
    whole.put(Conversation("c", messages=list(messages)))
    want_kept, want_dropped = whole.context("c")
    # a holder lets go of the first messages a recorded window left out (a window over fewer messages)
    earlier = ConversationMemory(max_tokens=max_tokens + more, max_messages=max_messages)
    earlier.put(Conversation("c", messages=messages[:max(1, len(messages) - cut)]))
    held_from = len(earlier.context("c")[1])
    reads: list[int] = []

    async def load() -> list[ContextItem]:
        reads.append(held_from)
        return messages[:held_from]

    part = ConversationMemory(max_tokens=max_tokens, max_messages=max_messages)
    left = _receipt(held_from, max_tokens + more, max_messages) if held_from else None
    part.put(Conversation("c", messages=messages[held_from:], older=left, load_older=load))
    kept, dropped, older = await part.window("c")
    assert kept == want_kept
    if older is None:
        assert dropped == want_dropped and part.require("c").messages == messages
    else:
        assert not reads and older.count == held_from and dropped == want_dropped[held_from:]
        assert want_dropped[:held_from] == messages[:held_from]
    # a window of the same settings as the one that left them out never reaches back into them
    assert more or not reads
    assert part.stats("c").message_count == len(messages)


async def test_a_conversation_holding_its_recent_part_is_not_exported_and_says_so() -> None:
    memory = ConversationMemory()
    memory.put(Conversation("c", messages=[user("recent")], older=_receipt(4)))
    with pytest.raises(UserError, match="holds only its recent messages"):
        memory.export("c")
    with pytest.raises(UserError, match="holds only its recent messages"):
        memory.context("c")
    with pytest.raises(UserError, match="no way to read the others back"):
        await memory.hold_all("c")
    memory.require("c").load_older = lambda: _messages([user("a")])
    with pytest.raises(UserError, match="1 older messages read back, 4 expected"):
        await memory.hold_all("c")


async def _messages(items: list[ContextItem]) -> list[ContextItem]:
    return items

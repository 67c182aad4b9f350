"""The envelope's stored form: built incrementally, the same text as encoding it whole."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent import Conversation
from hosting import Envelope
from tracer import ContextItem, Item, ItemKind, Origin, OriginKind

_json_leaf = st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats(allow_nan=False) | st.text()
_json = st.recursive(_json_leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner,
                                                                                                 max_size=3),
                     max_leaves=8)


@st.composite
def _messages(draw: st.DrawFn, max_size: int = 6) -> list[ContextItem]:
    out = []
    for _ in range(draw(st.integers(0, max_size))):
        kind = draw(st.sampled_from([ItemKind.USER, ItemKind.ASSISTANT, ItemKind.TOOL_CALL, ItemKind.TOOL_RESULT]))
        if kind in (ItemKind.USER, ItemKind.ASSISTANT):
            item = Item.of_text(kind, draw(st.text()))
        else:
            item = Item(kind, {"id": draw(st.text(max_size=8)), "name": "t", "arguments": draw(_json)})
        origin = Origin(draw(st.sampled_from([OriginKind.USER, OriginKind.STAGE, OriginKind.HOOK])),
                        draw(st.none() | st.text(max_size=12)), draw(st.none() | st.text(max_size=12)),
                        draw(st.none() | st.sampled_from(["input", "host:sealed"])))
        out.append(ContextItem(item, origin))
    return out


_extras = st.fixed_dictionaries({
    "pause": st.none(),  # a paused run must be a real one to decode; encoding it is what _any_pause tests
    "status": st.none() | st.sampled_from(["answered", "awaiting", "running", "failed"]),
    "last_run_id": st.none() | st.text(max_size=10),
    "turn": st.none() | st.dictionaries(st.text(max_size=5), _json, max_size=3),
    "tool_results": st.dictionaries(st.text(max_size=5), st.dictionaries(st.text(max_size=5), _json, max_size=2),
                                    max_size=2),
})


def _fresh(session_id: str, messages: list[ContextItem]) -> Envelope:
    conversation = Conversation(session_id, "You are terse.", list(messages), metadata={"k": "v"})
    return Envelope(session_id, conversation.to_dict(), messages=tuple(messages))


@settings(max_examples=150, deadline=None)
@given(_messages(), _extras, st.none() | st.dictionaries(st.text(max_size=5), _json, max_size=3),
       st.floats(allow_nan=False, allow_infinity=False, min_value=0, max_value=2e9))
def test_encode_is_the_whole_encoding(messages: list[ContextItem], extras: dict[str, Any],
                                      any_pause: dict[str, Any] | None, created: float) -> None:
    envelope = Envelope("s-1", _fresh("s-1", messages).conversation, created_at=created, updated_at=created,
                        **extras)
    assert envelope.encode() == envelope.encode_whole()
    assert envelope.encode() == envelope.encode_whole()  # again, from what the first encode kept
    back = Envelope.decode("s-1", envelope.encode(), version=1, updated_at=created)
    assert back.conversation == envelope.conversation and back.turn == envelope.turn
    paused = envelope.replace(pause=any_pause)
    assert paused.encode() == paused.encode_whole()
    assert json.loads(paused.encode())["pause"] == any_pause


@settings(max_examples=100, deadline=None)
@given(_messages(), st.lists(st.tuples(_messages(max_size=3), st.integers(0, 3), _extras), min_size=1, max_size=5))
def test_successors_keep_the_stored_form_exact(first: list[ContextItem],
                                               turns: list[tuple[list[ContextItem], int, dict[str, Any]]]) -> None:
    """A session saved turn after turn — messages added, and sometimes a tail dropped — encodes
    each time exactly as the whole conversation would, and decodes to the conversation it holds."""
    envelope = _fresh("s-2", first)
    envelope.encode()
    conversation = envelope.conversation_obj()
    for added, dropped, extras in turns:
        if dropped:
            del conversation.messages[max(0, len(conversation.messages) - dropped):]
        conversation.messages.extend(added)
        envelope = envelope.successor(conversation, **extras).replace(version=envelope.version + 1)
        assert envelope.conversation == conversation.to_dict()
        assert envelope.encode() == envelope.encode_whole()
        stored = envelope.encode()
        back = Envelope.decode("s-2", stored, version=envelope.version, updated_at=1.0)
        assert back.conversation_obj().messages == conversation.messages
        assert json.loads(stored)["turn"] == extras["turn"]
        envelope = envelope.copy()  # as a store's read cache hands it back
        conversation = envelope.conversation_obj()


def test_successor_reuses_the_messages_it_held() -> None:
    first = [ContextItem(Item.of_text(ItemKind.USER, "hello"), Origin(OriginKind.USER))]
    envelope = _fresh("s-3", first)
    envelope.encode()
    conversation = envelope.conversation_obj()
    conversation.messages.append(ContextItem(Item.of_text(ItemKind.ASSISTANT, "hi"), Origin(OriginKind.STAGE)))
    nxt = envelope.successor(conversation, pause=None, status="answered", last_run_id="r", turn=None,
                             tool_results={})
    assert nxt.conversation["messages"][0] is envelope.conversation["messages"][0]
    assert nxt.version == envelope.version and nxt.created_at == envelope.created_at
    assert nxt.encode() == nxt.encode_whole()


@given(_messages(max_size=3))
def test_a_conversation_of_another_shape_is_encoded_whole(messages: list[ContextItem]) -> None:
    dicts = _fresh("s-4", messages).conversation["messages"]
    for conversation in ({"messages": dicts}, {"messages": dicts, "id": "s-4"}, {"id": "s-4", "messages": "odd"},
                         {"id": "s-4", 7: [1.5, None], "messages": dicts}):
        envelope = Envelope("s-4", conversation)  # type: ignore[arg-type]
        assert envelope.encode() == envelope.encode_whole()


def test_replace_keeps_fields_and_refuses_unknown_ones() -> None:
    envelope = _fresh("s-5", [])
    assert envelope.replace(version=3).version == 3 and envelope.version == 0
    with pytest.raises(TypeError, match="versoin"):
        envelope.replace(versoin=3)

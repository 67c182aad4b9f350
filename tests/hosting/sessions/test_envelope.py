"""The envelope in memory: successors know what is stored, the whole-envelope text of earlier versions reads back."""

from __future__ import annotations

import json

import pytest

from agent import Conversation
from hosting import Envelope, UnreadableEnvelopeError
from tracer import ContextItem, Item, ItemKind, Origin, OriginKind, context_item_to_dict


def _fresh(session_id: str, messages: list[ContextItem]) -> Envelope:
    conversation = Conversation(session_id, "You are terse.", list(messages), metadata={"k": "v"})
    return Envelope(session_id, conversation.to_dict(), messages=tuple(messages))


def test_a_successor_holds_the_new_conversation_and_knows_what_is_stored() -> None:
    first = [ContextItem(Item.of_text(ItemKind.USER, "hello"), Origin(OriginKind.USER))]
    envelope = _fresh("s-3", first).replace(version=4)
    conversation = envelope.conversation_obj()
    conversation.messages.append(ContextItem(Item.of_text(ItemKind.ASSISTANT, "hi"), Origin(OriginKind.STAGE)))
    nxt = envelope.successor(conversation, pause=None, status="answered", last_run_id="r", turn=None,
                             tool_results={})
    assert nxt.stored == tuple(first) and nxt.message_count == 2
    assert nxt.version == 4 and nxt.created_at == envelope.created_at
    assert _fresh("s-4", first).successor(conversation, pause=None, status=None, last_run_id=None, turn=None,
                                          tool_results={}).stored == ()  # version 0: nothing is stored


def test_the_whole_envelope_text_of_earlier_versions_decodes() -> None:
    message = ContextItem(Item.of_text(ItemKind.USER, "hello"), Origin(OriginKind.USER, source="input"))
    conversation = Conversation("old", "You are terse.", [message]).to_dict()
    conversation["messages"] = [context_item_to_dict(message)]
    text = json.dumps({"format": "footprint.session/1", "session_id": "old", "conversation": conversation,
                       "pause": None, "status": "answered", "last_run_id": "r1", "turn": {"state": "done"},
                       "tool_results": {}, "created_at": 5.0})
    envelope = Envelope.decode("old", text, version=3, updated_at=9.0)
    assert envelope.conversation_obj().messages == [message]
    assert (envelope.version, envelope.created_at, envelope.turn) == (3, 5.0, {"state": "done"})
    with pytest.raises(UnreadableEnvelopeError, match=r"'other'.*belongs to session 'old'"):
        Envelope.decode("other", text, version=1, updated_at=0)
    with pytest.raises(UnreadableEnvelopeError, match="not JSON"):
        Envelope.decode("old", text[:40], version=1, updated_at=0)


def test_replace_keeps_fields_and_refuses_unknown_ones() -> None:
    envelope = _fresh("s-5", [])
    assert envelope.replace(version=3).version == 3 and envelope.version == 0
    with pytest.raises(TypeError, match="versoin"):
        envelope.replace(versoin=3)

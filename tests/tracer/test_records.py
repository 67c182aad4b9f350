"""Records: content addresses, readable text, the JSON form of a context item."""

from __future__ import annotations

import pytest

from tracer import ContextItem, Item, Origin, content_hash, context_item_from_dict, context_item_to_dict


def test_the_address_is_the_hash_of_the_canonical_form() -> None:
    a = Item("tool_call", {"name": "f", "arguments": {"b": 1, "a": "ü"}})
    b = Item("tool_call", {"arguments": {"a": "ü", "b": 1}, "name": "f"})
    assert a.hash == b.hash == content_hash("tool_call", a.body)
    assert a.canonical_body == '{"arguments":{"a":"ü","b":1},"name":"f"}'
    assert Item.of_text("user", "hi").hash != Item.of_text("assistant", "hi").hash
    assert len(a.hash) == 32 and int(a.hash, 16) >= 0
    assert Item("user", {"text": "x"}, "given").hash == "given"  # a stored item keeps its address


def test_text_of_each_kind() -> None:
    assert Item("tool_call", {"name": "f", "arguments": {"x": 1}}).text == 'f({"x":1})'
    assert Item("tool_call", {"name": "f", "arguments": '{"x": 1}'}).text == 'f({"x": 1})'
    assert Item("tool_result", {"content": "ok"}).text == "ok"
    assert Item("tool_definition", {"name": "f", "description": "does f"}).text == "f: does f"
    assert Item("settings", {"model": "m"}).text == '{"model":"m"}'
    assert Item.of_text("memory", "fact", key="k").text == "fact"


def test_context_item_json_form_round_trips() -> None:
    ci = ContextItem(Item.of_text("memory", "fact", key="k"), Origin("memory", "r1", "s1", "k"))
    assert context_item_from_dict(context_item_to_dict(ci)) == ci
    assert context_item_to_dict(ContextItem(Item.of_text("user", "x"), Origin("user")))["origin"] == {"kind": "user"}
    with pytest.raises(ValueError, match="not a context item"):
        context_item_from_dict({"kind": "user"})

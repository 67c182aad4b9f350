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


def test_left_out_is_the_pairs_it_stands_for() -> None:
    from tracer import LeftOut

    a, b, c = (ContextItem(Item.of_text("user", t), Origin("user")) for t in "abc")
    left = LeftOut(([a, b], "memory_window"), ([], "unused"), ((c,), "prompt_length_cap"))
    pairs = [(a, "memory_window"), (b, "memory_window"), (c, "prompt_length_cap")]
    assert list(left) == pairs and left == pairs and len(left) == 3 and bool(left)
    assert [left[i] for i in range(3)] == pairs and left[-1] == pairs[-1] and left[1:] == pairs[1:]
    assert left.items() == [a, b, c] and left.reasons() == ["memory_window", "prompt_length_cap"]
    with pytest.raises(IndexError):
        left[3]
    left.extend([(a, "cap")])
    assert len(left) == 4 and left[3] == (a, "cap") and left.reasons()[-1] == "cap"
    assert not LeftOut() and list(LeftOut(([], "x"))) == []

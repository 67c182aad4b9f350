"""The prebuilt JSON encoders write exactly what json.dumps writes, errors included."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracer._json import canonical_json, compact_json, encode_json

_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_values)
def test_both_encoders_match_json_dumps(value: Any) -> None:
    assert canonical_json(value) == json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert encode_json(value) == json.dumps(value, default=str)


def test_what_json_dumps_refuses_they_refuse_the_same_way() -> None:
    circular: list[Any] = []
    circular.append(circular)
    for encode in (canonical_json, encode_json):
        with pytest.raises(ValueError, match="Circular reference"):
            encode(circular)
    with pytest.raises(TypeError, match="not JSON serializable"):
        canonical_json({"when": object()})
    assert encode_json({"when": 1j}) == json.dumps({"when": 1j}, default=str)  # default=str turns it into text


_flat = st.dictionaries(
    st.text(max_size=8), st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(), max_size=8)


@settings(max_examples=300, deadline=None)
@given(_flat)
def test_compact_json_reads_back_as_json_dumps_does(value: dict[str, Any]) -> None:
    """compact_json() writes a flat object compactly; it reads back as json.dumps's text reads back
    (or gives None for a string UTF-8 cannot hold)."""
    text = compact_json(value)
    if text is None:
        assert any(isinstance(v, str) and not v.isascii() for v in [*value, *value.values()])
    else:
        assert json.loads(text) == json.loads(json.dumps(value))


def test_compact_json_writes_no_spaces_and_refuses_a_lone_surrogate() -> None:
    assert compact_json({"a": 1, "b": "x", "c": None, "d": True, "e": 0.5}) == '{"a":1,"b":"x","c":null,"d":true,"e":0.5}'
    assert compact_json({"a": "\ud800"}) is None

"""The prebuilt JSON encoders write exactly what json.dumps writes, errors included."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracer._json import canonical_json, encode_json

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

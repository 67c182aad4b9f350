"""JSON text the way ``json.dumps`` writes it, without building an encoder on every call.

``json.dumps`` makes a new ``JSONEncoder`` and a new C encoder for each value; recording encodes
every item's canonical form (its content address) and every stage's attributes, so building the C
encoder once saves a third of that work. A circular value falls back to ``json`` itself, which says
so as it always does.

:func:`compact_json` writes a flat object (a stage's attributes, usually) with msgspec's compiled
encoder, eight times faster; it reads back as the same value ``json.dumps`` would give.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import msgspec


def _unsupported(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _encoder(fallback: json.JSONEncoder, ensure_ascii: bool) -> Callable[[Any], str]:
    """``fallback.encode`` with its C encoder built once (``fallback`` when there is no C encoder)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - a Python without the C accelerator
        return fallback.encode
    key_separator, item_separator = fallback.key_separator, fallback.item_separator
    basestring = json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
    encoder = make(None, fallback.default, basestring, None, key_separator, item_separator,
                   fallback.sort_keys, fallback.skipkeys, fallback.allow_nan)

    def encode(value: Any) -> str:
        try:
            return "".join(encoder(value, 0))
        except RecursionError:  # a circular value: json.dumps says so with a ValueError
            return fallback.encode(value)

    return encode


# json.dumps(value, default=str)
encode_json = _encoder(json.JSONEncoder(default=str), ensure_ascii=True)

# json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
canonical_json = _encoder(
    json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_unsupported),
    ensure_ascii=False,
)
canonical_json.__doc__ = "The canonical text of a JSON value: sorted keys, no spaces, UTF-8 kept."


#: how deep :func:`capped` keeps a value
CAPPED_LEVELS = 64


def capped(value: Any, levels: int = CAPPED_LEVELS, _inside: frozenset[int] = frozenset()) -> Any:
    """``value`` with what lies deeper than ``levels`` lists, tuples and dicts, and each container
    met again inside itself, as a short text saying so: a value JSON cannot write (nested past
    Python's stack, or circular) written as far as it can be read."""
    if isinstance(value, dict | list | tuple):
        kind = type(value).__name__
        if id(value) in _inside:
            return f"<circular reference to a {kind}>"
        if levels <= 0:
            return f"<{kind} nested deeper than {CAPPED_LEVELS} levels>"
        inside = _inside | {id(value)}
        if isinstance(value, dict):
            return {k: capped(v, levels - 1, inside) for k, v in value.items()}
        return [capped(v, levels - 1, inside) for v in value]
    return value


def utf8_text(text: str) -> str:
    """``text`` as it can be written in UTF-8: each lone surrogate as its ``\\udXXX`` escape.

    A str can hold a lone surrogate (``"\\ud800"`` in JSON reads as one) that no UTF-8 writer
    takes: the store, the journal and a hash would each refuse the whole value.
    """
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode(errors="backslashreplace").decode()
    return text


def utf8_value(value: Any) -> Any:
    """``value`` with every str in it (dict keys too) as :func:`utf8_text` writes it; the very
    object when nothing needed it (lists, tuples and dicts are copied only where one did)."""
    if isinstance(value, str):
        return utf8_text(value)
    if isinstance(value, dict):
        pairs = [(utf8_value(k), utf8_value(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, value.items(), strict=True)):
            return value
        return dict(pairs)
    if isinstance(value, list | tuple):
        items = [utf8_value(v) for v in value]
        if all(v is v0 for v, v0 in zip(items, value, strict=True)):
            return value
        return tuple(items) if isinstance(value, tuple) else items
    return value


_msgspec_json = msgspec.json.Encoder()


def compact_json(value: dict[str, Any]) -> str | None:
    """Compact JSON text of a flat object — string keys; strings, ints, bools, None and finite
    floats — which the caller has checked it is: ``json.loads`` reads it back as it reads back
    ``json.dumps(value)``. None when a string cannot be written as UTF-8 (a lone surrogate)."""
    try:
        return _msgspec_json.encode(value).decode()
    except UnicodeEncodeError:
        return None


def finite(value: Any) -> Any:
    """``value`` with each NaN and infinite float as None: JSON has no such numbers (``json.dumps``
    writes ``NaN`` and ``Infinity``, which a strict parser — a browser's, jq's — refuses). Lists,
    tuples and dicts are copied where they hold one; anything else is returned as it is."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


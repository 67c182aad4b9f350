"""What a tool returns, as the text the model sees: converted, made safe to store, and bounded.

    value -> result_text(value) -> storable text -> cut_result(text, limit) -> the tool result item

:func:`result_text` gives any Python value a text: JSON for what JSON can say (an enum as its value,
a dataclass or pydantic model as its fields, a set as a sorted list, a date in ISO 8601, a numpy-like
array as its list, NaN and infinities as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``),
and in place of what it cannot (a cycle, a too deep nesting, an object whose text raises) a marker
in angle brackets saying what was there. A value whose text cannot be read at all is a
:class:`UnreadableResultError`: an error result the model sees. :func:`storable` makes any text
writable as UTF-8 (a lone surrogate becomes its ``\\udXXX`` escape), so no tool can crash the store.

:func:`cut_result` keeps a result within a bound of characters: its head and its tail, cut at a line
or a word where one is near, with a note in between saying how much was left out. Cut points move
out of anything the recorder's redaction policy would mask (a key, a password field, a private key
block), so neither half of a secret is left in the clear in the recording.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import enum
import functools
import json
import math
import pathlib
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tracer import RedactionPolicy, utf8_text

from ._schema import is_pydantic
from .errors import UnreadableResultError

#: The most characters of one tool result the model is shown, unless the tool or the agent says otherwise.
DEFAULT_MAX_RESULT_CHARS = 20_000
#: The smallest bound a tool or an agent may set (the note saying what was left out needs room).
MIN_RESULT_CHARS = 200
#: The most characters of a result the recording keeps beside what the model saw, when it was cut.
RECORDED_RESULT_CHARS = 1_000_000
#: How deep a returned value is followed; deeper containers are shown as a marker.
MAX_DEPTH = 64
#: How many values of one result are converted; the rest of each container is shown as a marker.
MAX_NODES = 200_000
# how far a cut point looks back (the head's end) or ahead (the tail's start) for a line or a word
_LOOK = 2_000
# how far around a cut point a secret is looked for (a longer secret is not one a policy masks)
_SECRET_REACH = 65_536
_TOKEN_CHAR = re.compile(r"[A-Za-z0-9_\-./+=~]")


def result_text(value: Any) -> str:
    """A tool's return value as the text the model sees (see the module docstring).

    A string is returned as it is, bytes are decoded (what is not UTF-8 as ``\\xNN``), anything else
    becomes JSON; an object JSON has no form for becomes its text, quoted as a JSON string.
    """
    if type(value) is str:
        return value
    if isinstance(value, str):  # a subclass: its own __str__ is not asked (it may raise)
        return str.__str__(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode(errors="backslashreplace")
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, default=_fast_plain)
    except (TypeError, ValueError, RecursionError, _NotPlain):
        pass  # a cycle, NaN, a number too long, an object with no plain form: the careful walk
    walk = _Walk()
    converted = walk.value(value, 0)
    if walk.unreadable is not None and converted is walk.unreadable_marker:
        raise UnreadableResultError(
            f"the tool returned {_type_name(value)}, which has no text: {walk.unreadable}; "
            f"the tool's author should return a str, a dict or a list")
    return json.dumps(converted, ensure_ascii=False)


#: ``text`` as it can be written in UTF-8: each lone surrogate as its ``\\udXXX`` escape
storable = utf8_text


class _NotPlain(Exception):
    """An object the fast path leaves to the careful walk."""


def _fast_plain(value: Any) -> Any:
    """``json.dumps``'s default on the fast path: the plain form of the common kinds (or give up)."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID | pathlib.PurePath):
        return str(value)
    if isinstance(value, decimal.Decimal) and value.is_finite():
        return float(value)
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode(errors="backslashreplace")
    if isinstance(value, set | frozenset):
        return _sorted(value)
    if isinstance(value, tuple):
        return list(value)
    raise _NotPlain  # a dataclass, a pydantic model, an array, any other object: the walk sees to each


def _sorted(values: Iterable[Any]) -> list[Any]:
    items = list(values)
    try:
        return sorted(items)
    except Exception:  # mixed kinds, or a comparison that raises: as they came
        return items


def _type_name(value: Any) -> str:
    kind = type(value)
    module = getattr(kind, "__module__", "") or ""
    name = getattr(kind, "__qualname__", None) or getattr(kind, "__name__", "object")
    return f"a {name}" if module in ("builtins", "") else f"a {module}.{name}"


def _short(value: Any) -> str:
    """The name of ``value``'s type, as a marker says it."""
    return str(getattr(type(value), "__qualname__", None) or getattr(type(value), "__name__", "object"))


class _Walk:
    """One careful conversion: cycles and depth are marked, the number of values is bounded."""

    def __init__(self) -> None:
        self.path: set[int] = set()  # ids of the containers being converted (a cycle comes back to one)
        self.nodes = 0
        self.unreadable: str | None = None  # why the top value had no text
        self.unreadable_marker: str | None = None

    def value(self, value: Any, depth: int) -> Any:
        self.nodes += 1
        try:
            return self._value(value, depth)
        except RecursionError:
            return f"<{_short(value)} nested too deep>"
        except Exception as exc:  # a property, a __iter__ or a dump that raises: that value is marked
            return f"<{_short(value)} that could not be converted: {type(exc).__name__}>"

    def _value(self, value: Any, depth: int) -> Any:
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, int) and not isinstance(value, enum.Enum):
            return _int(value)
        if isinstance(value, float):
            return float(value) if math.isfinite(value) else _FLOAT_NAMES[str(float(value))]
        if isinstance(value, str):
            return str.__str__(value)
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes(value).decode(errors="backslashreplace")
        if isinstance(value, enum.Enum):
            return self.value(value.value, depth)
        if isinstance(value, datetime.date | datetime.time):
            return value.isoformat()
        if isinstance(value, uuid.UUID | pathlib.PurePath):
            return str(value)
        if isinstance(value, decimal.Decimal):
            return float(value) if value.is_finite() else _FLOAT_NAMES.get(str(float(value)), str(value))
        if depth >= MAX_DEPTH:
            return f"<{_short(value)} nested deeper than {MAX_DEPTH} levels>"
        if id(value) in self.path:
            return f"<circular reference to a {_short(value)}>"
        if isinstance(value, Mapping):
            return self._inside(value, depth, lambda: {self._key(k, depth): self.value(v, depth + 1)
                                                       for k, v in self._bounded(value.items(), pairs=True)})
        if isinstance(value, list | tuple | set | frozenset) or _is_sequence_like(value):
            items = _sorted(value) if isinstance(value, set | frozenset) else value
            return self._inside(value, depth, lambda: [self.value(v, depth + 1) for v in self._bounded(items)])
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self._inside(value, depth, lambda: {
                f.name: self.value(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value)})
        if is_pydantic(type(value)):
            return self._inside(value, depth, lambda: self._model(value, depth))
        tolist = getattr(value, "tolist", None)  # numpy arrays and scalars, pandas series, array.array
        if callable(tolist) and not isinstance(value, type):
            return self._inside(value, depth, lambda: self.value(tolist(), depth + 1))
        return self._text(value, depth)

    def _inside(self, container: Any, depth: int, convert: Any) -> Any:
        self.path.add(id(container))
        try:
            return convert()
        finally:
            self.path.discard(id(container))

    def _bounded(self, items: Iterable[Any], *, pairs: bool = False) -> Iterable[Any]:
        """``items``, until this walk has converted :data:`MAX_NODES` values (then one marker)."""
        for n, item in enumerate(items):
            if self.nodes >= MAX_NODES:
                marker = f"<{_count(items, n)} more not converted: the result is too large>"
                yield ("…", marker) if pairs else marker
                return
            yield item

    def _model(self, value: Any, depth: int) -> Any:
        try:
            dumped = value.model_dump()  # (not mode="json": it makes NaN null; the walk says it as elsewhere)
        except Exception:  # a cycle, a field pydantic cannot dump: field by field
            return {name: self.value(getattr(value, name, None), depth + 1) for name in type(value).model_fields}
        return self.value(dumped, depth + 1)

    def _key(self, key: Any, depth: int) -> str:
        """A key as JSON's: a str as it is, a number, a bool or None as ``json.dumps`` writes it, anything
        else as the JSON text of its value."""
        if isinstance(key, str):
            return str.__str__(key)
        converted = self.value(key, depth + 1)
        return converted if isinstance(converted, str) else json.dumps(converted, ensure_ascii=False)

    def _text(self, value: Any, depth: int) -> str:
        """An object JSON has no form for, as its text (``str``, else ``repr``), or a marker."""
        problems = []
        for render in (str, repr):
            try:
                text = render(value)
            except Exception as exc:
                problems.append(f"its __{render.__name__}__ raised {type(exc).__name__}")
                continue
            if isinstance(text, str):
                return str.__str__(text)
        marker = f"<{_short(value)} whose text could not be read>"
        if depth == 0:
            self.unreadable, self.unreadable_marker = " and ".join(problems), marker
        return marker


_FLOAT_NAMES = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


_LONG_INT = 10**4000


def _int(value: int) -> int | str:
    if -_LONG_INT < value < _LONG_INT:  # (str() of a longer one is refused: sys.get_int_max_str_digits)
        return int(value)
    return f"<an integer of about {int(abs(value).bit_length() * math.log10(2)) + 1:,} digits>"


def _is_sequence_like(value: Any) -> bool:
    """A deque or a range: shown as a list (an iterator or a generator is not drawn: it is shown as its text)."""
    return isinstance(value, collections.deque | range)


def _count(items: Iterable[Any], done: int) -> str:
    size = getattr(items, "__len__", None)
    if callable(size):
        try:
            return f"{int(size()) - done:,}"
        except Exception:
            pass
    return "the"


# ---------------------------------------------------------------------------------------- cutting


@dataclass(frozen=True)
class Cut:
    """A result cut to a bound: the text the model sees, and how much of the original it left out.

    A tool may return one to give its own cut (a replay serves a recorded cut so): ``text`` reaches
    the model, ``uncut`` (when not None) is recorded beside it, ``record()`` on the tool stage.
    """

    text: str
    chars: int  # the original's length
    left_out: int  # characters of the original not in ``text``
    limit: int  # the bound it was cut to
    uncut: str | None = None  # what the recording keeps of the original (None: nothing)

    def record(self) -> dict[str, int]:
        """What the tool stage records about the cut (``result_cut``)."""
        return {"chars": self.chars, "shown": self.chars - self.left_out, "left_out": self.left_out,
                "limit": self.limit}


def cut_note(left_out: int, chars: int) -> str:
    """The line the model sees where a result was cut."""
    return f"\n[… {left_out:,} of {chars:,} characters of this result left out …]\n"


def cut_result(text: str, limit: int, policy: RedactionPolicy | None = None) -> Cut | None:
    """``text`` within ``limit`` characters, note included: its head (about three quarters) and tail,
    or None when it fits. A cut point moves back (the head's end) or ahead (the tail's start) to a
    line break, else a space, else a character no token holds, when one is within reach; and out of
    any match of ``policy``'s patterns and sensitive keys, so no secret is cut in two."""
    total = len(text)
    if total <= limit:
        return None
    budget = max(limit - len(cut_note(total, total)), 2)
    head = budget * 3 // 4
    tail = budget - head
    end, start = _back(text, head), _ahead(text, total - tail)
    if policy is not None and not policy.is_noop:
        end, start = _outside_secrets(text, end, start, policy)
    if start <= end:  # (a secret spans the whole middle: show none of it)
        start = end
    return Cut(f"{text[:end]}{cut_note(start - end, total)}{text[start:]}", total, start - end, limit)


def _back(text: str, end: int) -> int:
    """The head's end moved back to just after a line break, else a space, else a non-token character."""
    low = max(end - min(_LOOK, end // 4), 0)
    found = text.rfind("\n", low, end)
    if found < 0:
        found = _rfind_space(text, low, end)
    if found >= 0:
        return found + 1
    for i in range(end - 1, low - 1, -1):
        if not _TOKEN_CHAR.match(text[i]):
            return i + 1
    return end


def _ahead(text: str, start: int) -> int:
    """The tail's start moved ahead to just after a line break, else a space, else a non-token character."""
    high = min(start + min(_LOOK, (len(text) - start) // 4), len(text))
    found = text.find("\n", start, high)
    if found < 0:
        found = _find_space(text, start, high)
    if found >= 0:
        return found + 1
    for i in range(start, high):
        if not _TOKEN_CHAR.match(text[i]):
            return i + 1
    return start


def _rfind_space(text: str, low: int, high: int) -> int:
    return max(text.rfind(" ", low, high), text.rfind("\t", low, high))


def _find_space(text: str, low: int, high: int) -> int:
    found = [i for i in (text.find(" ", low, high), text.find("\t", low, high)) if i >= 0]
    return min(found) if found else -1


def _outside_secrets(text: str, end: int, start: int, policy: RedactionPolicy) -> tuple[int, int]:
    """``end`` moved back before, ``start`` ahead past, every secret they fall inside."""
    patterns = _secret_patterns(policy.patterns, policy.keys)
    key_field = patterns[-1] if policy.keys else None
    for _ in range(8):  # a moved point may land in another secret: until they rest
        moved = False
        for point_is_end, point in ((True, end), (False, start)):
            low, high = max(point - _SECRET_REACH, 0), min(point + _SECRET_REACH, len(text))
            window = text[low:high]
            for pattern in patterns:
                for match in pattern.finditer(window):
                    s, e = match.start() + low, _value_end(text, match.end() + low)
                    if pattern is key_field:  # the key's own start: db_password, x-api-key
                        s = _word_start(text, s)
                    if s < point < e:
                        point = s if point_is_end else e
                        moved = True
            if point_is_end:
                end = point
            else:
                start = point
        if not moved:
            break
    return end, start


@functools.lru_cache(maxsize=16)
def _secret_patterns(patterns: tuple[str, ...], keys: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    """The policy's patterns, and a field of each sensitive key in JSON or ``name=value`` text."""
    compiled = [re.compile(p) for p in patterns]
    spellings = {s for key in keys for s in _spellings(key)}
    if spellings:
        names = "|".join(re.escape(s) for s in sorted(spellings, key=len, reverse=True))
        # from the sensitive spelling on (a leading [\w-]* made the search quadratic in a long
        # run of letters: a 30,000-character token took minutes); the key's start is found after
        compiled.append(re.compile(
            rf"(?i)(?:{names})\\?[\"']?\s*[:=]\s*"
            r"(?:\\?\"(?:[^\"\\]|\\.)*\\?\"|'[^']*'|[^\s,;&{}\[\]][^\s,;&}\]]*)?"))
    return tuple(compiled)


def _word_start(text: str, start: int) -> int:
    """``start`` moved back over the letters, digits, ``_`` and ``-`` before it (at most 256)."""
    low = max(start - 256, 0)
    while start > low and (text[start - 1].isalnum() or text[start - 1] in "_-"):
        start -= 1
    return start


def _value_end(text: str, end: int) -> int:
    """Where a sensitive key's value ends: past the object or array that opens at ``end``, if one does
    (the recorder masks such a value whole), else ``end``."""
    if end >= len(text) or text[end] not in "{[":
        return end
    depth, quoted, escaped = 0, False, False
    for i in range(end, min(len(text), end + _SECRET_REACH)):
        char = text[i]
        if quoted:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                quoted = False
        elif char == '"':
            quoted = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return min(len(text), end + _SECRET_REACH)


def _spellings(key: str) -> set[str]:
    words = [w for w in re.split(r"[_\-]", key) if w]
    return {joiner.join(words) for joiner in ("_", "-", "")} if words else set()

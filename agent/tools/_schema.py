"""JSON schemas for tools: derived from a typed function, and a fast validity check.

:func:`schema_of` turns a parameter annotation into a JSON schema (the docstring's part is
:mod:`._docstrings`, the arguments' conversion :mod:`._converters`), and :func:`surely_valid` is a
fast path that confirms arguments match the simple schemas tools use (the full validator decides
and explains whenever it is not sure).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import datetime
import decimal
import enum
import json
import pathlib
import types
import typing
import uuid
from collections.abc import Callable
from typing import Any

from ._constraints import constrained

# The keywords surely_valid understands; annotations (description, default, title...) change nothing.
_SIMPLE_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "items", "enum",
                              "description", "default", "title", "examples", "deprecated"})


def _is_type(kind: str, value: Any) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "null":
        return value is None
    return False


def surely_valid(schema: Any, value: Any) -> bool:
    """True only when ``value`` certainly matches ``schema``: a fast path for the simple schemas tools use.

    It understands a subset of JSON Schema and is stricter than it (``1.0`` is no integer here);
    False means "not sure", and the full validator decides and explains.
    """
    if not isinstance(schema, dict) or not schema.keys() <= _SIMPLE_KEYWORDS:
        return False
    if "enum" in schema and not any(type(value) is type(option) and value == option for option in schema["enum"]):
        return False
    kind = schema.get("type")
    if kind is not None and not any(_is_type(k, value) for k in (kind if isinstance(kind, list) else (kind,))):
        return False
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        if any(name not in value for name in schema.get("required") or ()):
            return False
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            sub = properties.get(name)
            if sub is None:
                if extra is False or (extra is not True and not surely_valid(extra, item)):
                    return False
            elif not surely_valid(sub, item):
                return False
    if isinstance(value, list) and "items" in schema:
        return all(surely_valid(schema["items"], item) for item in value)
    return True


def kind_text(schema: dict[str, Any], joiner: str) -> str | None:
    """What a parameter's schema takes, for a reader: ``integer``, ``date string``, ``integer|null``
    (types joined by ``joiner``; the options of an ``anyOf`` too). None when it names no type (an
    enum, or any value)."""
    kind = schema.get("type")
    if isinstance(kind, str):
        return f"{schema['format']} {kind}" if isinstance(schema.get("format"), str) else kind
    if isinstance(kind, list):
        return joiner.join(map(str, kind))
    options = schema.get("anyOf")
    if isinstance(options, list) and options:
        return joiner.join(dict.fromkeys(kind_text(o, joiner) or ("enum" if "enum" in o else "any") for o in options))
    return None


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` or null (a union's options and null side by side: one list of options to explain)."""
    kind = schema.get("type")
    if isinstance(kind, str) and set(schema) <= {"type", "items", "additionalProperties"}:
        return {**schema, "type": [kind, "null"]}
    if set(schema) == {"anyOf"} and isinstance(schema["anyOf"], list):
        return {"anyOf": [*schema["anyOf"], {"type": "null"}]}
    return {"anyOf": [schema, {"type": "null"}]}


class NoSchema(TypeError):
    """An annotation no JSON value can stand for (a callable, a class JSON has no shape for)."""

    def __init__(self, annotation: Any) -> None:
        super().__init__(annotation_text(annotation))
        self.annotation = annotation


def annotation_text(annotation: Any) -> str:
    """An annotation as a reader writes it: ``Session``, ``list[int]``, ``Callable[[int], int]``."""
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__qualname__
    return repr(annotation).replace("typing.", "").replace("collections.abc.", "")


# Standard library types a JSON string or number carries: (schema, how the value becomes the type).
# datetime comes before date: it is one.
_TEXT_TYPES: tuple[tuple[type, dict[str, Any], Callable[[Any], Any] | None], ...] = (
    (datetime.datetime, {"type": "string", "format": "date-time"}, datetime.datetime.fromisoformat),
    (datetime.date, {"type": "string", "format": "date"}, datetime.date.fromisoformat),
    (datetime.time, {"type": "string", "format": "time"}, datetime.time.fromisoformat),
    (uuid.UUID, {"type": "string", "format": "uuid"}, uuid.UUID),
    (pathlib.PurePath, {"type": "string"}, None),  # None: the annotated class itself (Path, PurePosixPath...)
    (bytes, {"type": "string"}, lambda value: value.encode()),
    (decimal.Decimal, {"type": "number"}, lambda value: decimal.Decimal(str(value))),
)
# Abstract containers a function may be annotated with; it receives a list or a dict.
SEQUENCES = (collections.abc.Sequence, collections.abc.MutableSequence, collections.abc.Iterable,
              collections.abc.Collection, collections.abc.Set, collections.abc.MutableSet)
MAPPINGS = (collections.abc.Mapping, collections.abc.MutableMapping)


def text_type(annotation: Any) -> tuple[dict[str, Any], Callable[[Any], Any]] | None:
    """The schema of a standard library type a JSON string or number carries, and how the value
    becomes one (None when ``annotation`` is none of them)."""
    if not isinstance(annotation, type):
        return None
    for cls, schema, convert in _TEXT_TYPES:
        if issubclass(annotation, cls):
            return dict(schema), convert or annotation
    return None


def literal_value(option: Any) -> Any:
    """A ``Literal`` option as JSON says it (an Enum member as its value)."""
    return option.value if isinstance(option, enum.Enum) else option


def schema_of(annotation: Any, _seen: frozenset[type] = frozenset()) -> dict[str, Any]:
    """The JSON schema of a parameter annotation ({} for Any, ``object`` or a type variable).

    A dataclass or a TypedDict is an object of its fields (a field of its own type, a tree, is an
    object of any shape); a pydantic model is its own JSON schema with its definitions inlined; a
    date, a time, a UUID or a path is a string, a Decimal a number; ``Annotated`` adds its text and
    its constraints (see :mod:`._constraints`). :class:`NoSchema` when no JSON value can stand for
    the annotation (a callable, a class of no known shape); :class:`UnsaidConstraint` for a
    constraint no JSON schema can say.
    """
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:  # its text describes it; its constraints bound it
        return constrained(dict(schema_of(args[0], _seen)), args[1:], annotation)
    supertype = getattr(annotation, "__supertype__", None)  # a typing.NewType
    if supertype is not None:
        return schema_of(supertype, _seen)
    simple = {str: "string", bool: "boolean", int: "integer", float: "number", type(None): "null", None: "null"}
    if annotation in simple:
        return {"type": simple[annotation]}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return {"enum": [member.value for member in annotation]}
    if is_pydantic(annotation):
        return _inlined(annotation.model_json_schema())
    if is_record_class(annotation):
        return _object_schema(annotation, _seen)
    if (text := text_type(annotation)) is not None:
        return text[0]
    if origin is typing.Literal:
        return {"enum": [literal_value(a) for a in args]}
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return {"type": "array", "items": schema_of(args[0], _seen)}
    if origin is tuple and args:
        return {"type": "array", "prefixItems": [schema_of(a, _seen) for a in args], "minItems": len(args),
                "maxItems": len(args)}
    container = origin or annotation
    if container in (list, tuple, set, frozenset, *SEQUENCES):
        return {"type": "array", "items": schema_of(args[0], _seen) if args else {}}
    if container in (dict, *MAPPINGS):
        schema: dict[str, Any] = {"type": "object"}
        if len(args) == 2 and args[0] is int:  # JSON keys are text: these are integers written out
            schema["propertyNames"] = {"pattern": r"^-?[0-9]+$"}
        if len(args) == 2 and args[1] is not Any:
            schema["additionalProperties"] = schema_of(args[1], _seen)
        return schema
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        inner = schema_of(options[0], _seen) if len(options) == 1 else {"anyOf": [schema_of(a, _seen) for a in options]}
        return nullable(inner) if len(options) < len(args) else inner
    if annotation is Any or annotation is object or isinstance(annotation, typing.TypeVar):
        return {}
    if origin is not None or isinstance(annotation, type) or callable(annotation):
        raise NoSchema(annotation)  # Callable[...], type[X], a class: nothing a model can write
    return {}


def is_record_class(annotation: Any) -> bool:
    """A dataclass or a TypedDict (the class, not an instance; typing_extensions' too): an object of its fields."""
    return isinstance(annotation, type) and (dataclasses.is_dataclass(annotation) or typing.is_typeddict(annotation)
                                             or (issubclass(annotation, dict) and hasattr(annotation, "__required_keys__")
                                                 and hasattr(annotation, "__total__")))


def is_pydantic(annotation: Any) -> bool:
    """A pydantic model class (told by its methods: pydantic is not imported here)."""
    return isinstance(annotation, type) and all(
        callable(getattr(annotation, m, None)) for m in ("model_json_schema", "model_validate"))


def record_hints(cls: type) -> tuple[dict[str, Any], dict[str, bool]]:
    """A dataclass's or a TypedDict's field types, and the TypedDict fields marked ``Required[...]``
    (True) or ``NotRequired[...]`` (False; PEP 655), the marks taken off the types."""
    try:
        hints = typing.get_type_hints(cls, include_extras=True)  # extras: an Annotated field's description
    except Exception:  # a name its module cannot resolve (a class defined in a function): any value
        return {}, {}
    marks: dict[str, bool] = {}
    for name, hint in hints.items():
        hints[name], mark = _unmarked(hint)
        if mark is not None:
            marks[name] = mark
    return hints, marks


def _unmarked(hint: Any) -> tuple[Any, bool | None]:
    """``hint`` without its ``Required[...]`` or ``NotRequired[...]`` (inside an ``Annotated`` too), and which."""
    origin = typing.get_origin(hint)
    if origin in (typing.Required, typing.NotRequired):  # typing_extensions' are these on Python 3.11+
        return _unmarked(typing.get_args(hint)[0])[0], origin is typing.Required
    if origin is typing.Annotated:
        inner, mark = _unmarked(typing.get_args(hint)[0])
        if mark is not None:
            return typing.Annotated[(inner, *typing.get_args(hint)[1:])], mark
    return hint, None


def _object_schema(cls: type, seen: frozenset[type]) -> dict[str, Any]:
    """A dataclass's or a TypedDict's fields as an object schema."""
    if cls in seen:
        return {"type": "object"}
    hints, marks = record_hints(cls)
    defaults: dict[str, Any] = {}
    if dataclasses.is_dataclass(cls):
        fields = [f for f in dataclasses.fields(cls) if f.init]
        names = [f.name for f in fields]
        required = [f.name for f in fields
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        defaults = {f.name: f.default for f in fields if f.default is not dataclasses.MISSING and f.default is not None}
    else:
        names = list(hints)
        # the marks decide where there are any: the class's own keys miss them when its annotations are
        # text (from __future__ import annotations) on Python 3.11
        required = [n for n in names if marks.get(n, n in getattr(cls, "__required_keys__", ()))]
    properties = {}
    for name in names:
        properties[name] = schema_of(hints.get(name, Any), seen | {cls})
        if name in defaults:
            with_default(properties[name], defaults[name])
    out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = required
    return out


def json_value(value: Any) -> Any:
    """``value`` as JSON says it, for what JSON has no type for: an enum member as its value, a
    date or a time in ISO 8601, a UUID, a path or a Decimal as text or a number, a tuple or a set as a
    list, bytes as text, a dataclass or a pydantic model as its fields. Anything else as it is."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID | pathlib.PurePath):
        return str(value)
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytes):
        return value.decode(errors="backslashreplace")
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if is_pydantic(type(value)):
        return value.model_dump(mode="json")
    return value


def with_default(schema: dict[str, Any], default: Any) -> None:
    """Show ``default`` in ``schema`` when JSON can say it (see :func:`json_value`); a default of
    another kind — an object, NaN — is left out: the function still applies it when the argument is
    not given."""
    try:
        text = json.dumps(default, allow_nan=False, default=_json_or_fail)
    except (TypeError, ValueError, RecursionError):
        return
    schema["default"] = json.loads(text)


def _json_or_fail(value: Any) -> Any:
    converted = json_value(value)
    if converted is value:
        raise TypeError(f"{type(value).__name__} is not JSON")
    return converted


def _inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """A pydantic schema with each ``$ref`` to its ``$defs`` replaced by the definition (a tool's
    parameter is part of a larger schema, where those references would not resolve); a model that
    contains itself is, there, an object of any shape."""
    defs = schema.pop("$defs", {})

    def inline(value: Any, seen: frozenset[str]) -> Any:
        if isinstance(value, dict):
            ref = value.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                name = ref.removeprefix("#/$defs/")
                extra = {k: inline(v, seen) for k, v in value.items() if k != "$ref"}
                if name in seen or name not in defs:
                    return {"type": "object", **extra}
                return {**inline(defs[name], seen | {name}), **extra}
            return {k: inline(v, seen) for k, v in value.items()}
        if isinstance(value, list):
            return [inline(v, seen) for v in value]
        return value

    return dict(inline(schema, frozenset()))

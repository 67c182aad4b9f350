"""JSON schemas for tools: derived from a typed function and its docstring, and a fast validity check.

:func:`schema_of` turns a parameter annotation into a JSON schema, :func:`docstring_parts` reads a
function's description and per-parameter text (Google or Sphinx style), and :func:`surely_valid`
is a fast path that confirms arguments match the simple schemas tools use (the full validator
decides and explains whenever it is not sure).
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import re
import types
import typing
from collections.abc import Callable
from typing import Any, cast

# The keywords surely_valid understands; annotations (description, default, title) change nothing.
_SIMPLE_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "items", "enum",
                              "description", "default", "title"})


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


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params|Returns?|Yields?|Raises|Examples?|Notes?|See Also):\s*$")
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM = re.compile(r"^:param\s+(?:[\w\[\], |]+\s+)?(\w+):\s*(.*)$")


def docstring_parts(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """The description (text before the first section) and each parameter's description.

    Reads Google style (``Args:`` then ``name: text``, continuation lines indented deeper) and
    Sphinx style (``:param name: text``).
    """
    doc = inspect.getdoc(fn) or ""
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in doc.splitlines():
        stripped = line.strip()
        header = _SECTION.match(stripped) if not line.startswith(" ") else None
        if header:
            section, current = header.group(1), None
            continue
        sphinx = _SPHINX_PARAM.match(stripped)
        if sphinx:
            section, current = "Sphinx", sphinx.group(1)
            params[current] = sphinx.group(2).strip()
            continue
        if stripped.startswith(":") and section in (None, "Sphinx"):
            section, current = "Sphinx", None  # :returns:, :raises: ... end the description
            continue
        if section is None:
            description.append(stripped)
        elif section in ("Args", "Arguments", "Parameters", "Params"):
            match = _ARG_LINE.match(stripped)
            if match and len(line) - len(line.lstrip()) <= 4:
                current = match.group(1).lstrip("*")
                params[current] = match.group(2).strip()
            elif current and stripped:
                params[current] = f"{params[current]} {stripped}".strip()
        elif section == "Sphinx" and current and stripped:
            params[current] = f"{params[current]} {stripped}".strip()
    return "\n".join(_paragraphs(description)), params


def _paragraphs(lines: list[str]) -> list[str]:
    out: list[str] = []
    block: list[str] = []
    for line in [*lines, ""]:
        if line:
            block.append(line)
        elif block:
            out.append(" ".join(block))
            block = []
    return out


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    kind = schema.get("type")
    if isinstance(kind, str) and set(schema) <= {"type", "items", "additionalProperties"}:
        return {**schema, "type": [kind, "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def schema_of(annotation: Any, _seen: frozenset[type] = frozenset()) -> dict[str, Any]:
    """The JSON schema of a parameter annotation ({} for Any or a type it cannot describe).

    A dataclass or a TypedDict is an object of its fields (a field of its own type, a tree, is an
    object of any shape); a pydantic model is its own JSON schema with its definitions inlined.
    """
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        described = dict(schema_of(args[0], _seen))
        notes = [a for a in args[1:] if isinstance(a, str)]
        if notes:
            described["description"] = " ".join(notes)
        return described
    simple = {str: "string", bool: "boolean", int: "integer", float: "number"}
    if annotation in simple:
        return {"type": simple[annotation]}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return {"enum": [member.value for member in annotation]}
    if is_pydantic(annotation):
        return _inlined(annotation.model_json_schema())
    if _is_record_class(annotation):
        return _object_schema(annotation, _seen)
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return {"type": "array", "items": schema_of(args[0], _seen)}
    if origin is tuple and args:
        return {"type": "array", "prefixItems": [schema_of(a, _seen) for a in args], "minItems": len(args),
                "maxItems": len(args)}
    if origin in (list, tuple, set, frozenset) or annotation in (list, tuple, set, frozenset):
        return {"type": "array", "items": schema_of(args[0], _seen) if args else {}}
    if origin is dict or annotation is dict:
        schema: dict[str, Any] = {"type": "object"}
        if len(args) == 2 and args[1] is not Any:
            schema["additionalProperties"] = schema_of(args[1], _seen)
        return schema
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        inner = schema_of(options[0], _seen) if len(options) == 1 else {"anyOf": [schema_of(a, _seen) for a in options]}
        return _nullable(inner) if len(options) < len(args) else inner
    return {}


def _is_record_class(annotation: Any) -> bool:
    """A dataclass or a TypedDict (the class, not an instance): an object of its fields."""
    return isinstance(annotation, type) and (dataclasses.is_dataclass(annotation) or typing.is_typeddict(annotation))


def is_pydantic(annotation: Any) -> bool:
    """A pydantic model class (told by its methods: pydantic is not imported here)."""
    return isinstance(annotation, type) and all(
        callable(getattr(annotation, m, None)) for m in ("model_json_schema", "model_validate"))


def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls, include_extras=True)
    except Exception:  # a name its module cannot resolve (a class defined in a function): any value
        return {}


def _object_schema(cls: type, seen: frozenset[type]) -> dict[str, Any]:
    """A dataclass's or a TypedDict's fields as an object schema."""
    if cls in seen:
        return {"type": "object"}
    hints = _hints(cls)
    defaults: dict[str, Any] = {}
    if dataclasses.is_dataclass(cls):
        fields = [f for f in dataclasses.fields(cls) if f.init]
        names = [f.name for f in fields]
        required = [f.name for f in fields
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        defaults = {f.name: f.default for f in fields if f.default not in (dataclasses.MISSING, None)}
    else:
        names = list(hints)
        required = [n for n in names if n in getattr(cls, "__required_keys__", ())]
    properties = {}
    for name in names:
        properties[name] = schema_of(hints.get(name, Any), seen | {cls})
        if name in defaults:
            default = defaults[name]
            properties[name]["default"] = default.value if isinstance(default, enum.Enum) else default
    out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = required
    return out


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


def converter_of(annotation: Any) -> Callable[[Any], Any] | None:
    """How a parameter's JSON value becomes the annotated type, or None when it is used as it is:
    an Enum member from its value, a dataclass or a pydantic model from its object, a tuple or a
    set from its array — also inside optional types, lists, tuples, sets and dict values."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return converter_of(args[0])
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return annotation
    if is_pydantic(annotation):
        return cast(Callable[[Any], Any], annotation.model_validate)
    if _is_record_class(annotation):
        return _object_converter(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        inner = converter_of(options[0]) if len(options) == 1 else None
        return None if inner is None else (lambda value: None if value is None else inner(value))
    container = origin or annotation
    if container is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        each = [converter_of(a) or _same for a in args]
        return lambda value: tuple(convert(v) for convert, v in zip(each, value, strict=False))
    if container in (list, tuple, set, frozenset):
        item = converter_of(args[0]) if args else None
        if item is None and container is list:
            return None
        convert_item = item or _same
        return lambda value: container(convert_item(v) for v in value)
    if container is dict and len(args) == 2:
        item = converter_of(args[1])
        return None if item is None else (lambda value: {k: item(v) for k, v in value.items()})
    return None


def _same(value: Any) -> Any:
    return value


def _object_converter(cls: type) -> Callable[[Any], Any]:
    """A dataclass from its object (a TypedDict stays a dict), each field converted; the fields'
    converters are found on the first call, so a class that contains itself is no endless loop."""
    fields: dict[str, Callable[[Any], Any]] | None = None

    def convert(value: Any) -> Any:
        nonlocal fields
        if not isinstance(value, dict):
            return value
        if fields is None:
            fields = {name: found for name, hint in _hints(cls).items() if (found := converter_of(hint)) is not None}
        converted = {k: (fields[k](v) if k in fields and v is not None else v) for k, v in value.items()}
        return cls(**converted) if dataclasses.is_dataclass(cls) else converted

    return convert

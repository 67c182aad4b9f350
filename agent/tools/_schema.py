"""JSON schemas for tools: derived from a typed function and its docstring, and a fast validity check.

:func:`schema_of` turns a parameter annotation into a JSON schema, :func:`docstring_parts` reads a
function's description and per-parameter text (Google or Sphinx style), and :func:`surely_valid`
is a fast path that confirms arguments match the simple schemas tools use (the full validator
decides and explains whenever it is not sure).
"""

from __future__ import annotations

import enum
import inspect
import re
import types
import typing
from collections.abc import Callable
from typing import Any

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


def schema_of(annotation: Any) -> dict[str, Any]:
    """The JSON schema of a parameter annotation ({} for Any or a type it cannot describe)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        described = dict(schema_of(args[0]))
        notes = [a for a in args[1:] if isinstance(a, str)]
        if notes:
            described["description"] = " ".join(notes)
        return described
    simple = {str: "string", bool: "boolean", int: "integer", float: "number"}
    if annotation in simple:
        return {"type": simple[annotation]}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return {"enum": [member.value for member in annotation]}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return {"type": "array", "items": schema_of(args[0])}
    if origin is tuple and args:
        return {"type": "array", "prefixItems": [schema_of(a) for a in args], "minItems": len(args),
                "maxItems": len(args)}
    if origin in (list, tuple, set, frozenset) or annotation in (list, tuple, set, frozenset):
        return {"type": "array", "items": schema_of(args[0]) if args else {}}
    if origin is dict or annotation is dict:
        schema: dict[str, Any] = {"type": "object"}
        if len(args) == 2 and args[1] is not Any:
            schema["additionalProperties"] = schema_of(args[1])
        return schema
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        inner = schema_of(options[0]) if len(options) == 1 else {"anyOf": [schema_of(a) for a in options]}
        return _nullable(inner) if len(options) < len(args) else inner
    return {}


def enum_params(hints: dict[str, Any]) -> dict[str, type[enum.Enum]]:
    """Parameters annotated with an Enum: their JSON values are turned back into members."""
    out = {}
    for pname, hint in hints.items():
        if typing.get_origin(hint) is typing.Annotated:
            hint = typing.get_args(hint)[0]
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            out[pname] = hint
    return out



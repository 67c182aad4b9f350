"""How a tool's JSON arguments become what its function annotated.

:func:`converter_of` gives, for a parameter annotation, the function that turns its JSON value into
the annotated type (an Enum member, a dataclass, a pydantic model, a tuple, a date...), or None
when the value is used as it is. A union of several types converts to the first of its options,
in the order written, whose schema the value matches and whose conversion takes it
(:class:`NoOptionFits` when none does).
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable
from typing import Any, cast

import jsonschema

from ._mismatches import mismatches
from ._schema import (
    MAPPINGS,
    SEQUENCES,
    annotation_text,
    is_pydantic,
    is_record_class,
    literal_value,
    record_hints,
    schema_of,
    surely_valid,
    text_type,
)


class NoOptionFits(ValueError):
    """A value that none of a union's options takes; ``refusals``: each option (as written) and why,
    in the order tried (a schema mismatch's text, or the exception its conversion raised)."""

    def __init__(self, refusals: list[tuple[str, str | Exception]]) -> None:
        super().__init__("; ".join(f"as {option}: {why}" for option, why in refusals))
        self.refusals = refusals


def converter_of(annotation: Any) -> Callable[[Any], Any] | None:
    """How a parameter's JSON value becomes the annotated type, or None when it is used as it is:
    an Enum member from its value, a dataclass or a pydantic model from its object, a tuple or a
    set from its array — also inside optional types, unions, lists, tuples, sets and dict values."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return converter_of(args[0])
    supertype = getattr(annotation, "__supertype__", None)  # a typing.NewType
    if supertype is not None:
        return converter_of(supertype)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return annotation
    if is_pydantic(annotation):
        return cast(Callable[[Any], Any], annotation.model_validate)
    if is_record_class(annotation):
        return _object_converter(annotation)
    if (text := text_type(annotation)) is not None:
        return text[1]
    if origin is typing.Literal and any(isinstance(a, enum.Enum) for a in args):
        members = {literal_value(a): a for a in args}
        return lambda value: members.get(value, value)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        inner = converter_of(options[0]) if len(options) == 1 else _union_converter(options)
        return None if inner is None else (lambda value: None if value is None else inner(value))
    container = origin or annotation
    if container in SEQUENCES:
        container = list
    if container in MAPPINGS:
        container = dict
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
        key = int if args[0] is int else converter_of(args[0])
        item = converter_of(args[1])
        if key is None and item is None:
            return None
        convert_key, convert_item = key or _same, item or _same
        return lambda value: {convert_key(k): convert_item(v) for k, v in value.items()}
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
            hints = record_hints(cls)[0]
            fields = {name: found for name, hint in hints.items() if (found := converter_of(hint)) is not None}
        converted = {k: (fields[k](v) if k in fields and v is not None else v) for k, v in value.items()}
        return cls(**converted) if dataclasses.is_dataclass(cls) else converted

    return convert


def _union_converter(options: list[Any]) -> Callable[[Any], Any] | None:
    """The value as the first of ``options`` (in the order written) whose schema it matches and whose
    conversion takes it; None when no option converts (``int | str``: the value as it is). The
    options' schemas are made on the first call: a record class that holds itself is no endless loop."""
    converters = [converter_of(option) for option in options]
    if not any(converters):
        return None
    tried: list[tuple[str, dict[str, Any], Any, Callable[[Any], Any] | None]] = []

    def convert(value: Any) -> Any:
        if not tried:
            for option, each in zip(options, converters, strict=True):
                schema = schema_of(option)
                tried.append((annotation_text(option), schema, jsonschema.Draft202012Validator(schema), each))
        refusals: list[tuple[str, str | Exception]] = []
        for text, written, validator, each in tried:
            if not (surely_valid(written, value) or validator.is_valid(value)):
                [(path, problem)] = mismatches(validator, value, limit=1)
                refusals.append((text, f"{path}: {problem}" if path else problem))
            elif each is None:
                return value
            else:
                try:
                    return each(value)
                except Exception as exc:  # a date that is no date, a model's validator: the next option
                    refusals.append((text, exc))
        raise NoOptionFits(refusals)

    return convert

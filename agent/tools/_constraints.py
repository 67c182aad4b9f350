"""What an ``Annotated`` parameter says besides its type, as JSON Schema keywords.

``Annotated[int, "how many"]`` describes the parameter; annotated-types' constraints
(``Ge(0)``, ``MaxLen(5)``, ``Interval(...)``) and pydantic's ``Field(ge=0, description=...)``
bound it. They go into the parameter's schema: the model is sent them, and the tool's validator
enforces them before the function runs, as it does the type. A constraint a JSON schema cannot
say (``Predicate``, an ``AfterValidator``, ``Field(alias=...)``) is :class:`UnsaidConstraint`, so
the tool is refused when it is made rather than offered with a check nothing makes. Metadata of
other libraries (a web framework's markers) is not about the JSON argument and is passed over.
Neither pydantic nor annotated-types is imported here: their objects are read by their attributes.
"""

from __future__ import annotations

import dataclasses
import decimal
import re
from collections.abc import Iterable
from typing import Any

# annotated-types' attribute names (pydantic's Field(...) keeps these objects in its .metadata)
_BOUNDS = {"gt": "exclusiveMinimum", "ge": "minimum", "lt": "exclusiveMaximum", "le": "maximum",
           "multiple_of": "multipleOf"}
_SIZES = {"min_length": {"string": "minLength", "array": "minItems", "object": "minProperties"},
          "max_length": {"string": "maxLength", "array": "maxItems", "object": "maxProperties"}}
# JSON arguments are checked strictly already ("1" is no integer); a discriminator picks among a union's
# options, which the options' schemas do too
_ALREADY_SO = frozenset({"strict", "discriminator"})
# what of a pydantic FieldInfo is carried as it is; its other settings concern a model's field, not an argument
_FIELD_WORDS = ("title", "examples")
_LIBRARIES = ("annotated_types", "pydantic")
# how a value is written out (PlainSerializer...): nothing to do with the argument the model gives
_OUTPUT_ONLY = ("pydantic.functional_serializers",)


class UnsaidConstraint(TypeError):
    """A constraint in ``annotation`` (an ``Annotated``) that a JSON schema cannot say, so no validator
    would enforce it; ``why`` says so and what to do instead."""

    def __init__(self, annotation: Any, constraint: Any, why: str) -> None:
        super().__init__(f"{constraint!r:.80}: {why}")
        self.annotation = annotation
        self.constraint = constraint
        self.why = why


def constrained(schema: dict[str, Any], metadata: Iterable[Any], annotation: Any) -> dict[str, Any]:
    """``schema`` with what ``Annotated[..., *metadata]`` says: its text as the description, its
    constraints as keywords. :class:`UnsaidConstraint` names one that no keyword says."""
    notes: list[str] = []
    for item in metadata:
        if isinstance(item, str):
            notes.append(item)
        elif _is_field_info(item):
            _field_info(schema, item, annotation, notes)
        elif _from_constraint_library(item):
            _constraint(schema, item, annotation)
    if notes:
        schema["description"] = " ".join(notes)
    return schema


def _from_constraint_library(item: Any) -> bool:
    module = type(item).__module__
    return module.partition(".")[0] in _LIBRARIES and module not in _OUTPUT_ONLY


def _is_field_info(item: Any) -> bool:
    return _from_constraint_library(item) and type(item).__name__ == "FieldInfo"


def _field_info(schema: dict[str, Any], field: Any, annotation: Any, notes: list[str]) -> None:
    if not field.is_required():
        raise UnsaidConstraint(annotation, field, "a default in Field(...) is not the function's; give it in the "
                                                  "signature (n: int = 3)")
    if field.alias is not None or field.validation_alias is not None:
        raise UnsaidConstraint(annotation, field, "an alias would offer the model a name the function does not "
                                                  "take; rename the parameter")
    if field.description is not None:
        notes.append(field.description)
    for word in _FIELD_WORDS:
        if getattr(field, word, None) is not None:
            schema[word] = getattr(field, word)
    if field.deprecated:
        schema["deprecated"] = True
    if isinstance(field.json_schema_extra, dict):
        schema.update(field.json_schema_extra)
    elif field.json_schema_extra is not None:
        raise UnsaidConstraint(annotation, field, "a json_schema_extra function edits a schema pydantic makes, "
                                                  "which this one is not; give a dict")
    for item in field.metadata:
        _constraint(schema, item, annotation)


def _constraint(schema: dict[str, Any], item: Any, annotation: Any) -> None:
    """One annotated-types (or pydantic) constraint as keywords of ``schema``; a group, each of its own."""
    if getattr(item, "__is_annotated_types_grouped_metadata__", False):  # Interval, Len, StringConstraints
        for each in item:
            _constraint(schema, each, annotation)
        return
    for name, value in _attributes(item).items():
        if value is None or name in _ALREADY_SO:
            continue
        if name in _BOUNDS and isinstance(value, int | float | decimal.Decimal) and not isinstance(value, bool):
            schema[_BOUNDS[name]] = float(value) if isinstance(value, decimal.Decimal) else value
        elif name in _SIZES and isinstance(value, int):
            kind = schema.get("type")
            keywords = _SIZES[name]
            for keyword in [keywords[kind]] if isinstance(kind, str) and kind in keywords else keywords.values():
                schema[keyword] = value
        elif name == "pattern" and isinstance(value, str | re.Pattern):
            schema["pattern"] = value if isinstance(value, str) else value.pattern
        else:
            raise UnsaidConstraint(annotation, item, f"JSON Schema has no keyword for its {name}={value!r:.60}, so "
                                                     f"nothing would check it; check it in a pydantic model's "
                                                     f"validator, or leave it out")


def _attributes(item: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(item):
        return {f.name: getattr(item, f.name) for f in dataclasses.fields(item)}
    return {k: v for k, v in vars(item).items() if not k.startswith("_")} if hasattr(item, "__dict__") else {}

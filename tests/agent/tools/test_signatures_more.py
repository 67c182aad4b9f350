"""More annotations real tools use, each a bug found by a user: unions of several types, PEP 655's
``Required``/``NotRequired``, constraints in ``Annotated``, ``*args`` and ``**kwargs``, argument text
too long to read, and argument errors inside optional or discriminated models that named no field."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import json
import typing
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired, Optional, Required, TypedDict, Union

import annotated_types as at
import pydantic
import pytest
import typing_extensions
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent import Agent, Tool, tool
from agent.errors import ToolArgumentsError, UserError
from agent.providers import ScriptedModel, calls
from agent.providers._testing import raw_call
from agent.tools import tool_help


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Person(pydantic.BaseModel):
    name: str


@dataclasses.dataclass
class Route:
    stops: list[Point | Person]
    at: datetime.datetime | str | None = None


async def seen_by_model(t: Tool, call: Any) -> tuple[str, bool]:
    """One call of ``t`` through an Agent: the tool result the model read, and whether it is an error."""
    model = ScriptedModel([call, "done"])
    result = await Agent("a", provider=model, tools=[t]).run("go")
    assert result.status == "answered", result.error
    [body] = [ci.item.body for ci in model.requests[-1].context if ci.item.kind == "tool_result"]
    return body["content"], body["is_error"]


# -- unions of several types ------------------------------------------------------------------------


async def test_a_union_of_records_or_of_a_datetime_and_text_arrives_as_the_first_type_that_takes_it() -> None:
    """Point | Person arrived as a plain dict, datetime | str as the ISO text."""
    got: list[Any] = []

    @tool
    def place(target: Point | Person, dt: datetime.datetime | str, text_first: str | datetime.datetime,
              route: Route | None = None) -> str:
        """Place something."""
        got.append((target, dt, text_first, route))
        return "ok"

    base = {"dt": "2024-05-01T10:00", "text_first": "2024-05-01T10:00"}
    await place.run(place.check_arguments({"target": {"x": 1, "y": 2}, **base}))
    await place.run(place.check_arguments({"target": {"name": "Ann"}, "dt": "tomorrow", "text_first": "x",
                                           "route": {"stops": [{"name": "B"}, {"x": 0, "y": 0}],
                                                     "at": "2024-05-01"}}))
    (p, dt, text, _), (person, word, _, route) = got
    assert p == Point(1, 2) and dt == datetime.datetime(2024, 5, 1, 10) and text == "2024-05-01T10:00"
    assert person == Person(name="Ann") and word == "tomorrow"
    assert route == Route([Person(name="B"), Point(0, 0)], datetime.datetime(2024, 5, 1))  # inside a record too
    content, is_error = await seen_by_model(place, calls(("place", {"target": {"name": "C"}, **base})))
    assert (content, is_error) == ("ok", False)


async def test_a_value_no_type_of_a_union_takes_is_an_argument_error_saying_why_each_refused_it() -> None:
    @tool
    def when(at: datetime.datetime | datetime.date) -> str:
        """When."""
        return "ok"

    content, is_error = await seen_by_model(when, calls(("when", {"at": "soon"})))
    assert is_error and content == (
        "Error: arguments for when do not fit its parameters: at: fits none of its types (as datetime: Invalid "
        "isoformat string: 'soon'; as date: Invalid isoformat string: 'soon')")


@dataclasses.dataclass(frozen=True)
class Option:
    """A union member for the property test: its annotation, whether a JSON value is one, what arrives."""

    annotation: Any
    takes: Callable[[Any], bool]
    arrived: Callable[[Any], bool]


def _parses(parse: Callable[[str], Any], value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        parse(value)
    except ValueError:
        return False
    return True


def _is_int(value: Any) -> bool:
    return type(value) is int


OPTIONS: dict[str, Option] = {
    "int": Option(int, _is_int, _is_int),
    "bool": Option(bool, lambda v: isinstance(v, bool), lambda r: isinstance(r, bool)),
    "str": Option(str, lambda v: isinstance(v, str), lambda r: isinstance(r, str)),
    "datetime": Option(datetime.datetime, lambda v: _parses(datetime.datetime.fromisoformat, v),
                       lambda r: type(r) is datetime.datetime),
    "date": Option(datetime.date, lambda v: _parses(datetime.date.fromisoformat, v), lambda r: type(r) is datetime.date),
    "uuid": Option(uuid.UUID, lambda v: _parses(uuid.UUID, v), lambda r: isinstance(r, uuid.UUID)),
    "color": Option(Color, lambda v: v in ("red", "green"), lambda r: isinstance(r, Color)),
    "point": Option(Point, lambda v: isinstance(v, dict) and set(v) == {"x", "y"} and all(map(_is_int, v.values())),
                    lambda r: isinstance(r, Point)),
    "person": Option(Person, lambda v: isinstance(v, dict) and isinstance(v.get("name"), str),
                     lambda r: isinstance(r, Person)),
    "ints": Option(list[int], lambda v: isinstance(v, list) and all(map(_is_int, v)), lambda r: isinstance(r, list)),
}
_values = st.one_of(
    st.integers(-5, 5), st.booleans(), st.text(max_size=5), st.sampled_from(["red", "green", "blue"]),
    st.datetimes().map(datetime.datetime.isoformat), st.dates().map(datetime.date.isoformat), st.uuids().map(str),
    st.fixed_dictionaries({"x": st.integers(), "y": st.integers()}),
    st.fixed_dictionaries({"name": st.text(max_size=3)}, optional={"x": st.integers()}),
    st.lists(st.integers(-3, 3), max_size=2), st.dictionaries(st.sampled_from(["x", "y", "z"]), st.integers(), max_size=2),
)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(order=st.lists(st.sampled_from(sorted(OPTIONS)), min_size=2, max_size=4, unique=True), value=_values)
def test_a_union_value_becomes_the_first_type_in_the_order_written_that_takes_it(order: list[str], value: Any) -> None:
    received: list[Any] = []

    def pick(v: Any) -> str:
        received.append(v)
        return "ok"

    pick.__annotations__ = {"v": Union[tuple(OPTIONS[name].annotation for name in order)], "return": str}  # noqa: UP007
    t = tool(pick)
    takers = [name for name in order if OPTIONS[name].takes(value)]
    if not takers:
        with pytest.raises(ToolArgumentsError, match=r"arguments for pick do not (match its schema|fit its "
                                                     r"parameters): v(/\w+)?: "):
            asyncio.run(t.run(t.parse_arguments(json.dumps({"v": value}))))
        return
    assert asyncio.run(t.run(t.parse_arguments(json.dumps({"v": value})))) == "ok"
    assert OPTIONS[takers[0]].arrived(received[0]), (takers, received)


# -- Required / NotRequired -------------------------------------------------------------------------


class Filter(TypedDict):
    limit: NotRequired[int]
    query: Required[str]
    near: NotRequired[Annotated[Point, "where"]]
    after: Annotated[NotRequired[datetime.date], "since when"]


class Loose(typing_extensions.TypedDict, total=False):
    tag: str
    owner: typing_extensions.Required[str]


def test_typeddict_fields_marked_required_or_not_are_what_the_schema_requires() -> None:
    """A NotRequired field was refused: '... (it holds NotRequired[int]), which no JSON argument can stand for'."""

    def search(where: Filter, loose: Loose) -> str:
        return "ok"

    props = tool(search).parameters["properties"]
    assert props["where"]["required"] == ["query"]
    assert props["where"]["properties"]["near"]["description"] == "where"
    assert props["where"]["properties"]["after"] == {"type": "string", "format": "date", "description": "since when"}
    assert props["loose"]["required"] == ["owner"]  # total=False, but owner is Required


async def test_a_not_required_field_still_arrives_as_its_type() -> None:
    got: list[Filter] = []

    @tool
    def search(where: Filter) -> str:
        """Search."""
        got.append(where)
        return "ok"

    await search.run(search.check_arguments({"where": {"query": "q", "near": {"x": 1, "y": 2}, "after": "2024-01-02"}}))
    await search.run(search.check_arguments({"where": {"query": "q"}}))
    assert got == [{"query": "q", "near": Point(1, 2), "after": datetime.date(2024, 1, 2)}, {"query": "q"}]
    with pytest.raises(ToolArgumentsError, match=r"where: 'query' is a required property"):
        search.check_arguments({"where": {"limit": 3}})


_MARKED: dict[str, Any] = {"": int, "Required": Required[int], "NotRequired": NotRequired[int]}
_MARKS = st.sampled_from(sorted(_MARKED))


@settings(max_examples=60, deadline=None)
@given(marks=st.lists(_MARKS, min_size=1, max_size=5), total=st.booleans(), as_text=st.booleans())
def test_the_marks_and_total_decide_which_fields_are_required(marks: list[str], total: bool, as_text: bool) -> None:
    """Annotations as text (from __future__ import annotations) gave the class wrong required keys on 3.11."""
    fields: dict[str, Any] = {}
    for n, mark in enumerate(marks):
        fields[f"f{n}"] = (f"{mark}[int]" if mark else "int") if as_text else _MARKED[mark]
    shape = TypedDict("shape", fields, total=total)  # type: ignore[misc]
    shape.__module__ = __name__  # where the text names resolve

    def use(value: Any) -> str:
        return "ok"

    use.__annotations__ = {"value": shape}
    t = tool(use)
    expected = [f"f{n}" for n, mark in enumerate(marks) if mark == "Required" or (not mark and total)]
    assert t.parameters["properties"]["value"].get("required", []) == expected
    assert t.check_arguments({"value": {name: 1 for name in expected}})
    for name in expected:
        with pytest.raises(ToolArgumentsError, match=f"value: '{name}' is a required property"):
            t.check_arguments({"value": {other: 1 for other in expected if other != name}})


# -- argument text too long to read ---------------------------------------------------------------


@tool
def add(a: int, b: int = 0) -> int:
    """Add."""
    return a + b


@pytest.mark.parametrize("text", ['{"a": ' + "9" * 5000 + "}", json.dumps('{"a": ' + "9" * 5000 + "}"),
                                  '{"a": 1, "b": [' + "1" * 4301 + "]}"], ids=["plain", "as a JSON string", "inside"])
async def test_an_integer_too_long_to_read_is_an_argument_error_not_a_failed_tool(text: str) -> None:
    """The model read 'Error: add failed: ValueError: Exceeds the limit (4300 digits)': blamed on the tool."""
    content, is_error = await seen_by_model(add, raw_call("add", text, "c1"))
    assert is_error and content == (
        "Error: arguments for add hold an integer of more than 4,300 digits, longer than can be read; send a "
        "shorter number; expected a JSON object with a: integer (required), b: integer")


@given(digits=st.integers(1, 9000))
def test_reading_a_number_of_any_length_is_a_value_or_an_argument_error(digits: int) -> None:
    text = '{"a": ' + "7" * digits + "}"
    if digits <= 4300:
        assert add.parse_arguments(text) == {"a": int("7" * digits)}
    else:
        with pytest.raises(ToolArgumentsError, match=r"hold an integer of more than 4,300 digits"):
            add.parse_arguments(text)


# -- *args and **kwargs -------------------------------------------------------------------------------


def test_the_signature_and_the_help_say_other_arguments_of_a_kwargs_tool_are_taken() -> None:
    """The error ended 'expected no parameters' though extra string arguments are accepted."""

    @tool
    def labels(**names: str) -> str:
        """Label."""
        return "ok"

    @tool
    def tag(item: int, **names: str) -> str:
        """Tag."""
        return "ok"

    with pytest.raises(ToolArgumentsError, match=r"x: 1 is not of type 'string'; expected any arguments: string$"):
        labels.check_arguments({"x": 1})
    assert tag.signature() == "item: integer (required), other arguments: string"
    assert "- any name (string, optional)" in tool_help(labels)
    assert "- any other name (string, optional)" in tool_help(tag)
    hand_written = Tool("h", "d", {"type": "object", "properties": {"a": {"type": "string"}}}, execute=lambda a: "x")
    assert hand_written.signature() == "a: string"  # no additionalProperties: none offered


async def test_star_args_are_a_list_of_their_type_passed_by_position() -> None:
    """'*args: int' was left out of the schema: the model could not give them."""

    @tool
    def total(first: int, second: int = 10, /, *more: int, scale: Annotated[int, "by how much"] = 1) -> int:
        """Sum numbers.

        Args:
            *more: further numbers
        """
        return (first + second + sum(more)) * scale

    props = total.parameters["properties"]
    assert props["more"] == {"type": "array", "items": {"type": "integer"}, "description": "further numbers"}
    assert total.parameters["required"] == ["first"]
    assert await total.run(total.check_arguments({"first": 1, "more": [2, 3], "scale": 2})) == 32
    assert await total.run(total.check_arguments({"first": 1})) == 11
    with pytest.raises(ToolArgumentsError, match=r"more/1: 'x' is not of type 'integer'"):
        total.check_arguments({"first": 1, "more": [1, "x"]})

    @tool
    def route(start: str, *stops: Point) -> str:
        """Route."""
        return " ".join([start, *(f"{s.x},{s.y}" for s in stops)])

    content, is_error = await seen_by_model(route, calls(("route", {"start": "a", "stops": [{"x": 1, "y": 2}]})))
    assert (content, is_error) == ("a 1,2", False)


# -- constraints in Annotated --------------------------------------------------------------------


@dataclasses.dataclass
class Window:
    size: Annotated[int, at.Interval(gt=0, le=100)]
    name: Annotated[str, pydantic.Field(min_length=1, pattern=r"^[a-z]+$")] = "w"


def test_annotated_constraints_go_into_the_schema() -> None:
    """Field(ge=0) and Ge(0) never reached the schema: -1 was accepted."""

    def sample(y: Annotated[int, pydantic.Field(ge=0, description="how many", title="Y", examples=[3])],
               z: Annotated[float, at.Lt(1.5), at.MultipleOf(0.5)], tags: Annotated[list[str], at.Len(1, 3)],
               code: Annotated[str, at.MaxLen(4)], window: Window, anything: Annotated[Any, at.MinLen(2)]) -> str:
        return "ok"

    props = tool(sample).parameters["properties"]
    assert props["y"] == {"type": "integer", "minimum": 0, "description": "how many", "title": "Y", "examples": [3]}
    assert props["z"] == {"type": "number", "exclusiveMaximum": 1.5, "multipleOf": 0.5}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3}
    assert props["code"] == {"type": "string", "maxLength": 4}
    assert props["window"]["properties"]["size"] == {"type": "integer", "exclusiveMinimum": 0, "maximum": 100}
    assert props["window"]["properties"]["name"] == {"type": "string", "minLength": 1, "pattern": "^[a-z]+$",
                                                     "default": "w"}
    assert props["anything"] == {"minLength": 2, "minItems": 2, "minProperties": 2}  # whatever kind it is


async def test_a_value_breaking_a_constraint_is_refused_before_the_function_runs() -> None:
    ran: list[int] = []

    @tool
    def halve(y: Annotated[int, pydantic.Field(ge=0)], window: Window | None = None) -> int:
        """Halve."""
        ran.append(y)
        return y // 2

    content, is_error = await seen_by_model(halve, calls(("halve", {"y": -1})))
    assert is_error and content.startswith("Error: arguments for halve do not match its schema: y: -1 is less than "
                                           "the minimum of 0")
    with pytest.raises(ToolArgumentsError, match=r"window/size: 0 is less than or equal to the minimum of 0"):
        halve.check_arguments({"y": 1, "window": {"size": 0}})
    assert ran == []


_BOUND_KINDS = {"gt": lambda v, b: v > b, "ge": lambda v, b: v >= b, "lt": lambda v, b: v < b,
                "le": lambda v, b: v <= b, "multiple_of": lambda v, b: v % b == 0}


@settings(max_examples=150, deadline=None)
@given(kind=st.sampled_from(sorted(_BOUND_KINDS)), bound=st.integers(1, 20), value=st.integers(-30, 30),
       via_field=st.booleans(), length=st.integers(0, 4), text=st.text(max_size=6))
def test_a_call_is_refused_exactly_when_it_breaks_a_bound(kind: str, bound: int, value: int, via_field: bool,
                                                          length: int, text: str) -> None:
    given_bound: dict[str, Any] = {kind: bound}
    constraint = pydantic.Field(**given_bound) if via_field else getattr(at, {
        "gt": "Gt", "ge": "Ge", "lt": "Lt", "le": "Le", "multiple_of": "MultipleOf"}[kind])(bound)

    def bounded(n: int, s: str) -> str:
        return "ok"

    bounded.__annotations__ = {"n": Annotated[int, constraint], "s": Annotated[str, at.MaxLen(length)]}
    t = tool(bounded)
    fits = _BOUND_KINDS[kind](value, bound) and len(text) <= length
    try:
        t.check_arguments({"n": value, "s": text})
    except ToolArgumentsError:
        assert not fits
    else:
        assert fits


def test_a_constraint_no_json_schema_can_say_is_refused_when_the_tool_is_made() -> None:
    def odd(n: Annotated[int, at.Predicate(lambda v: v % 2 == 1)]) -> int:
        return n

    def checked(n: Annotated[int, pydantic.AfterValidator(abs)]) -> int:
        return n

    def defaulted(n: Annotated[int, pydantic.Field(default=3)]) -> int:
        return n

    def aliased(n: Annotated[int, pydantic.Field(alias="number")]) -> int:
        return n

    def deep(points: list[Annotated[int, at.Predicate(bool)]]) -> int:
        return 0

    with pytest.raises(UserError, match=r"tool odd: parameter 'n' is annotated Annotated\[int, Predicate\(.*\)\], "
                                        r"whose Predicate\(.*\) cannot go into its JSON schema: JSON Schema has no "
                                        r"keyword for its func=.*, so nothing would check it"):
        tool(odd)
    with pytest.raises(UserError, match=r"tool checked: .* AfterValidator"):
        tool(checked)
    with pytest.raises(UserError, match=r"tool defaulted: .* give it in the signature \(n: int = 3\)"):
        tool(defaulted)
    with pytest.raises(UserError, match=r"tool aliased: .* rename the parameter"):
        tool(aliased)
    with pytest.raises(UserError, match=r"tool deep: parameter 'points' is annotated list\[.*\] \(it holds "):
        tool(deep)

    class Marker:
        """Another library's marker: like a serializer, not about the JSON argument."""

    def marked(n: Annotated[int, Marker(), "a number", pydantic.PlainSerializer(str)]) -> int:  # how it is written out
        return n

    assert tool(marked).parameters["properties"]["n"] == {"type": "integer", "description": "a number"}


# -- argument errors that name the field ------------------------------------------------------------


class Cat(pydantic.BaseModel):
    kind: Literal["cat"]
    lives: int


class Dog(pydantic.BaseModel):
    kind: Literal["dog"]
    barks: bool


class Inner(pydantic.BaseModel):
    n: int


class Owner(pydantic.BaseModel):
    pet: Annotated[Cat | Dog, pydantic.Field(discriminator="kind")]
    inner: Inner | None = None


@tool
def adopt(owner: Owner, target: Point | Person | None = None) -> str:
    """Adopt."""
    return "ok"


@pytest.mark.parametrize(("arguments", "problem"), [
    ({"owner": {"pet": {"kind": "cat", "lives": 9}, "inner": {"n": "x"}}}, "owner/inner/n: 'x' is not of type 'integer'"),
    ({"owner": {"pet": {"kind": "cat", "lives": "many"}}}, "owner/pet/lives: 'many' is not of type 'integer'"),
    ({"owner": {"pet": {"kind": "cat", "barks": True}}}, "owner/pet: 'lives' is a required property"),
    ({"owner": {"pet": {"kind": "dog"}}}, "owner/pet: 'barks' is a required property"),
    ({"owner": {"pet": {"kind": "cat", "lives": 1}}, "target": {"x": 1}},  # as near Person: both are said
     "target: fits none of its options (option 1 (object): 'y' is a required property; option 2 (Person): 'name' "
     "is a required property; option 3 (null): {'x': 1} is not of type 'null')"),
    ({"owner": {"pet": {"kind": "cat", "lives": 1}}, "target": {"z": 1}},
     "target: fits none of its options (option 1 (object): Additional properties are not allowed ('z' was "
     "unexpected), 'x' is a required property, 'y' is a required property; option 2 (Person): 'name' is a "
     "required property; option 3 (null): {'z': 1} is not of type 'null')"),
])
async def test_a_wrong_nested_optional_or_discriminated_model_names_the_field(arguments: dict[str, Any],
                                                                              problem: str) -> None:
    """It said only "... is not valid under any of the given schemas", naming no field."""
    content, is_error = await seen_by_model(adopt, calls(("adopt", arguments)))
    assert is_error and content.startswith(f"Error: arguments for adopt do not match its schema: {problem}; "), content


@st.composite
def nested_tools(draw: st.DrawFn) -> tuple[Any, dict[str, Any], str]:
    """An annotation of records nested in optional fields, lists and dicts (dataclasses or pydantic
    models), a value of it whose innermost integer is a string, and the path to that integer."""
    annotation: Any = None
    value: Any = None
    path: list[str] = []
    for depth in range(draw(st.integers(1, 4))):
        pydantic_level = draw(st.booleans())
        if annotation is None:
            fields: dict[str, Any] = {"n": int}
            value, path = {"n": "x"}, ["n"]
        else:
            how = draw(st.sampled_from(["optional", "list", "dict"]))
            inner = {"optional": Optional[annotation], "list": list[annotation],  # noqa: UP045
                     "dict": dict[str, annotation]}[how]
            fields = {"child": inner}
            if how == "list":
                at_index = draw(st.integers(0, 2))
                value, path = {"child": [*([_valid(annotation)] * at_index), value]}, ["child", str(at_index), *path]
            elif how == "dict":
                value, path = {"child": {"k": value}}, ["child", "k", *path]
            else:
                value, path = {"child": value}, ["child", *path]
        name = f"Level{depth}"
        if pydantic_level:
            definitions: dict[str, Any] = {k: (v, ...) for k, v in fields.items()}
            annotation = pydantic.create_model(name, **definitions)
        else:
            annotation = dataclasses.make_dataclass(name, list(fields.items()))
    return annotation, value, "/".join(["top", *path])


def _valid(annotation: Any) -> Any:
    """A valid value of a ``nested_tools`` level."""
    hints = typing.get_type_hints(annotation)
    if "n" in hints:
        return {"n": 1}
    return {"child": None} if typing.get_origin(hints["child"]) in (Union, Optional) else {"child": {}} if (
        typing.get_origin(hints["child"]) is dict) else {"child": []}


@settings(max_examples=100, deadline=None)
@given(drawn=nested_tools())
def test_the_error_names_the_innermost_field_however_deep_it_is(drawn: tuple[Any, dict[str, Any], str]) -> None:
    annotation, value, path = drawn

    def deep(top: Any) -> str:
        return "ok"

    deep.__annotations__ = {"top": annotation}
    t = tool(deep)
    with pytest.raises(ToolArgumentsError) as caught:
        t.check_arguments({"top": value})
    assert f": {path}: 'x' is not of type 'integer'; " in str(caught.value), str(caught.value)


def test_the_docs_mention_each_kind_of_annotation_this_module_covers() -> None:
    text = (Path(__file__).resolve().parents[3] / "docs" / "tools.md").read_text()
    for words in ("NotRequired", "Field(ge=", "*args: int", "other arguments: string", "4,300 digits",
                  "in the order written"):
        assert words in text, words

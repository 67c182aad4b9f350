"""Tools: schemas derived from typed functions, argument validation, the registry, execution."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
from typing import Annotated, Any, Literal, TypedDict

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from agent import Agent, Tool, ToolRegistry, result_text, tool
from agent.errors import ToolArgumentsError, ToolNotFoundError, ToolTimeoutError, UserError
from agent.providers import ScriptedModel, calls
from agent.tools._schema import surely_valid as _surely_valid
from agent.tools._tool import MAX_ERROR_TEXT


class Unit(enum.Enum):
    CELSIUS = "c"
    FAHRENHEIT = "f"


@tool(progress=lambda args: f"Looking up {args['city']}…")
async def forecast(city: str, days: int = 3, unit: Unit = Unit.CELSIUS, hourly: bool | None = None) -> dict[str, Any]:
    """The weather forecast for a city.

    Uses the national weather service.

    Args:
        city: the city's name,
            as the user wrote it.
        days (int): how many days ahead
        unit: degrees in Celsius or Fahrenheit
    Returns:
        a forecast
    """
    return {"city": city, "days": days, "unit": unit.name, "hourly": hourly}


def test_schema_from_annotations_and_docstring() -> None:
    assert forecast.name == "forecast"
    assert forecast.description == "The weather forecast for a city.\nUses the national weather service."
    props = forecast.parameters["properties"]
    assert props["city"] == {"type": "string", "description": "the city's name, as the user wrote it."}
    assert props["days"] == {"type": "integer", "description": "how many days ahead", "default": 3}
    assert props["unit"] == {"enum": ["c", "f"], "description": "degrees in Celsius or Fahrenheit", "default": "c"}
    assert props["hourly"] == {"type": ["boolean", "null"]}
    assert forecast.parameters["required"] == ["city"]
    assert forecast.parameters["additionalProperties"] is False


def test_more_annotation_kinds() -> None:
    @tool
    def pick(
        options: list[str],
        weights: dict[str, float],
        mode: Literal["first", "random"],
        pair: tuple[int, int],
        note: Annotated[str, "shown to the user"] = "",
        anything: Any = None,
    ) -> str:
        """Pick one.

        :param options: what to choose from
        :param mode: how to choose
        """
        return options[0]

    props = pick.parameters["properties"]
    assert props["options"] == {"type": "array", "items": {"type": "string"}, "description": "what to choose from"}
    assert props["weights"] == {"type": "object", "additionalProperties": {"type": "number"}}
    assert props["mode"] == {"enum": ["first", "random"], "description": "how to choose"}
    assert props["pair"]["prefixItems"] == [{"type": "integer"}, {"type": "integer"}]
    assert props["note"] == {"type": "string", "description": "shown to the user", "default": ""}
    assert props["anything"] == {}
    assert pick.description == "Pick one."


async def test_execute_converts_enum_values_and_runs_sync_functions_in_a_thread() -> None:
    result = await forecast.run(forecast.parse_arguments('{"city": "Oslo", "unit": "f"}'))
    assert result == {"city": "Oslo", "days": 3, "unit": "FAHRENHEIT", "hourly": None}

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    assert await add.run({"a": 2, "b": 3}) == 5


async def test_a_tool_with_a_plain_execute_function() -> None:
    echo = Tool("echo", "Echo the text.", {"type": "object", "properties": {"text": {"type": "string"}}},
                execute=lambda args: args["text"].upper())
    assert await echo.run({"text": "hi"}) == "HI"


def test_progress_line() -> None:
    assert forecast.progress_line({"city": "Oslo"}) == "Looking up Oslo…"
    broken = Tool("b", "b", {"type": "object"}, execute=lambda a: "x", progress=lambda a: a["missing"])
    assert broken.progress_line({}) is None  # a broken progress line never fails the call


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"city": ', "are not valid JSON"),
        ("[1, 2]", "must be a JSON object, not an array"),
        ("null", "must be a JSON object, not null"),
        ('"Porto"', "must be a JSON object, not a string"),
        ('{"days": 2}', "'city' is a required property"),
        ('{"city": "Oslo", "days": "two"}', "days: 'two' is not of type 'integer'"),
        ('{"city": "Oslo", "unit": "kelvin"}', "unit: 'kelvin' is not one of"),
        ('{"city": "Oslo", "colour": "red"}', "Additional properties are not allowed"),
    ],
)
def test_invalid_arguments_say_what_is_wrong_and_what_is_expected(raw: str, expected: str) -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        forecast.parse_arguments(raw)
    message = str(caught.value)
    assert expected in message
    assert "city: string (required)" in message  # the model can correct its call from this


def test_empty_arguments_mean_an_empty_object() -> None:
    @tool
    def now() -> str:
        """The time."""
        return "noon"

    assert now.parse_arguments("") == {}
    assert now.parse_arguments("  ") == {}


async def test_timeout() -> None:
    @tool(timeout=0.01)
    async def slow() -> str:
        """Slow."""
        await asyncio.sleep(5)
        return "late"

    with pytest.raises(ToolTimeoutError, match=r"slow did not finish within 0\.01 s"):
        await slow.run({})


def test_bad_tool_definitions_are_refused() -> None:
    with pytest.raises(UserError, match="must be 1-64 ASCII letters"):
        Tool("bad name", "x", {"type": "object"}, execute=lambda a: None)
    with pytest.raises(UserError, match="not a valid JSON schema"):
        Tool("t", "x", {"type": "no-such-type"}, execute=lambda a: None)


def test_registry_resolves_declarative_names() -> None:
    registry = ToolRegistry([forecast])
    assert "forecast" in registry and len(registry) == 1
    assert registry.resolve(["forecast"]) == [forecast]
    assert registry.names() == ["forecast"]
    with pytest.raises(UserError, match="'calendar' is not in the registry"):
        registry.resolve(["calendar"])
    with pytest.raises(ToolNotFoundError, match="registered: forecast"):
        registry.get("calendar")
    with pytest.raises(UserError, match="already registered"):
        registry.register(forecast)
    fake = Tool("forecast", "fake data", {"type": "object"}, execute=lambda a: "sunny")
    registry.register(fake, replace=True)
    assert registry.get("forecast") is fake  # the registry, not the config, decides what a name does


def test_result_text() -> None:
    assert result_text("plain") == "plain"
    assert result_text({"b": 1, "a": "é"}) == '{"b": 1, "a": "é"}'
    assert result_text([1, 2]) == "[1, 2]"

    class Opaque:
        def __str__(self) -> str:
            return "opaque"

    assert result_text(Opaque()) == '"opaque"'


def test_result_text_gives_what_json_has_no_type_for_as_its_value_not_its_repr() -> None:
    """An enum member was written "Unit.CELSIUS", a pydantic model "city='Oslo' days=2"."""

    @dataclasses.dataclass
    class Reading:
        unit: Unit
        values: list[float]

    class Report(BaseModel):
        city: str
        unit: Unit

    assert result_text(Unit.CELSIUS) == '"c"'
    assert result_text({"unit": Unit.FAHRENHEIT}) == '{"unit": "f"}'
    assert json.loads(result_text(Reading(Unit.CELSIUS, [1.5]))) == {"unit": "c", "values": [1.5]}
    assert json.loads(result_text([Report(city="Oslo", unit=Unit.CELSIUS)])) == [{"city": "Oslo", "unit": "c"}]
    assert sorted(json.loads(result_text({"tags": {"a", "b"}}))["tags"]) == ["a", "b"]
    assert result_text(Reading).startswith('"<class')  # a class is not an instance: its text


def test_definition_item() -> None:
    item = forecast.definition()
    assert item.kind == "tool_definition"
    assert item.body["name"] == "forecast" and item.body["parameters"] == forecast.parameters


# the fast path never accepts what the full validator rejects
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-2, 2, allow_nan=False) | st.sampled_from(["", "a", "c"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.sampled_from(["city", "days", "x"]), children,
                                                                      max_size=3),
    max_leaves=6,
)
_schemas = [
    forecast.parameters,
    {"type": "object", "properties": {"x": {"type": ["integer", "null"]}}, "required": ["x"]},
    {"type": "array", "items": {"enum": ["a", 1, None]}},
    {"type": "object", "additionalProperties": {"type": "number"}},
    {"type": "object", "properties": {"city": {"type": "string", "minLength": 2}}},  # minLength: not understood
]


@settings(max_examples=300, deadline=None)
@given(value=_json_values, index=st.integers(0, len(_schemas) - 1))
def test_the_fast_validity_check_agrees_with_jsonschema(value: Any, index: int) -> None:
    schema = _schemas[index]
    if _surely_valid(schema, value):
        assert jsonschema.Draft202012Validator(schema).is_valid(value)


async def test_a_timeout_inside_the_tool_is_its_own_failure() -> None:
    @tool(timeout=5)
    async def fetch() -> str:
        """Fetch."""
        raise TimeoutError("upstream did not answer")

    with pytest.raises(TimeoutError, match="upstream did not answer"):
        await fetch.run({})


class Address(BaseModel):
    street: str
    city: str
    floor: int | None = None


@dataclasses.dataclass
class Slot:
    day: str
    hour: int = 9


@dataclasses.dataclass
class Meeting:
    slot: Slot
    guests: list[str]


class Options(TypedDict, total=False):
    verbose: bool


async def test_pydantic_models_dataclasses_and_typeddicts_get_a_schema_and_arrive_as_themselves() -> None:
    """A third-party tool annotated with a pydantic model, a dataclass or a TypedDict: the model was
    offered an empty schema (anything) and the function got plain dicts (``address.city`` failed)."""
    seen: dict[str, Any] = {}

    @tool
    def ship(address: Address, meeting: Meeting, slots: list[Slot], opts: Options, pair: tuple[int, int],
             also: Address | None = None) -> str:
        """Ship something."""
        seen.update(address=address, meeting=meeting, slots=slots, opts=opts, pair=pair, also=also)
        return address.city

    props = ship.parameters["properties"]
    assert props["address"]["type"] == "object" and props["address"]["required"] == ["street", "city"]
    assert props["address"]["properties"]["city"]["type"] == "string"
    assert props["meeting"]["properties"]["slot"]["properties"]["hour"] == {"type": "integer", "default": 9}
    assert props["meeting"]["required"] == ["slot", "guests"] and props["slots"]["items"]["required"] == ["day"]
    assert props["opts"] == {"type": "object", "properties": {"verbose": {"type": "boolean"}},
                             "additionalProperties": False}
    raw = ('{"address": {"street": "Rua 1", "city": "Lisbon"}, "meeting": {"slot": {"day": "mon"}, "guests": ["ann"]},'
           ' "slots": [{"day": "tue", "hour": 10}], "opts": {"verbose": true}, "pair": [1, 2],'
           ' "also": {"street": "Main", "city": "Porto", "floor": 2}}')
    assert await ship.run(ship.parse_arguments(raw)) == "Lisbon"
    assert seen["address"] == Address(street="Rua 1", city="Lisbon")
    assert seen["meeting"] == Meeting(Slot("mon", 9), ["ann"]) and seen["slots"] == [Slot("tue", 10)]
    assert seen["opts"] == {"verbose": True} and seen["pair"] == (1, 2) and seen["also"].floor == 2
    with pytest.raises(ToolArgumentsError, match="city"):  # refused before the function runs, naming the field
        ship.parse_arguments('{"address": {"street": "x"}, "meeting": {"slot": {"day": "m"}, "guests": []},'
                             ' "slots": [], "opts": {}, "pair": [1, 2]}')


@dataclasses.dataclass
class Node:
    name: str
    children: list[Node] = dataclasses.field(default_factory=list)


async def test_a_recursive_dataclass_has_a_schema_and_arrives_whole() -> None:
    @tool
    def walk(tree: Node) -> str:
        """Walk a tree."""
        return "/".join([tree.name, *(child.name for child in tree.children)])

    tree = walk.parameters["properties"]["tree"]
    assert tree["properties"]["name"] == {"type": "string"} and tree["properties"]["children"]["type"] == "array"
    raw = '{"tree": {"name": "root", "children": [{"name": "leaf"}]}}'
    assert await walk.run(walk.parse_arguments(raw)) == "root/leaf"


async def test_generator_tools_give_what_they_yield_and_a_coroutine_returned_is_awaited() -> None:
    """A generator tool's result was the generator's repr ("<async_generator object ...>"), and an
    async tool returning a coroutine gave its repr with "coroutine was never awaited"."""

    @tool
    async def pages(n: int):  # type: ignore[no-untyped-def]
        """Pages, as they come."""
        for i in range(n):
            await asyncio.sleep(0)
            yield {"page": i}

    @tool
    def lines(n: int):  # type: ignore[no-untyped-def]
        """Lines, one by one."""
        yield from (f"line {i}" for i in range(n))

    @tool
    async def later(n: int) -> Any:
        """A coroutine, returned."""
        async def value() -> int:
            return n * 2
        return value()

    assert await pages.run({"n": 2}) == [{"page": 0}, {"page": 1}]
    assert await lines.run({"n": 2}) == ["line 0", "line 1"]
    assert await later.run({"n": 4}) == 8


@pytest.mark.parametrize("where", ["thread", "loop"])
async def test_a_tool_that_calls_sys_exit_fails_that_call_only(where: str) -> None:
    """argparse (a CLI wrapped as a tool) calls sys.exit on bad input: SystemExit from a worker
    thread took the event loop down (the run raised CancelledError)."""
    import sys

    from agent import Agent
    from agent.providers import FunctionModel, calls, tool_results

    def cli(args: str) -> str:
        """A command line tool."""
        sys.exit(2)

    async def cli_async(args: str) -> str:
        """A command line tool."""
        sys.exit(2)

    wrapped = tool(cli if where == "thread" else cli_async, name="cli")

    def model(request: Any) -> Any:
        results = tool_results(request)
        return f"saw: {results[0]['content']}" if results else calls(("cli", {"args": "--bad"}))

    result = await Agent("a", provider=FunctionModel(model), tools=[wrapped]).run("go")
    assert result.status == "answered" and "sys.exit(2)" in result.answer, result.answer


def test_a_failed_calls_error_text_reaches_the_model_without_credentials_and_cut_to_size() -> None:
    """An exception quoting a request's credentials (a 401 from an API client) is shown to the model
    with them masked, so neither the model provider nor the model's answer gets them; a huge message
    is cut, with how much was left out."""
    @tool
    def fetch(url: str) -> str:
        """Fetch a page.

        Args:
            url: the address
        """
        if url == "big":
            raise RuntimeError("x" * 2_000_000)
        raise RuntimeError("401 Unauthorized: {'Authorization': 'Basic dXNlcjpwYXNzd29yZA=='} "
                           "api key sk-abcdefghijklmnopqrstuvwxyz0123")

    model = ScriptedModel([calls(("fetch", {"url": "a"}, "c1")), calls(("fetch", {"url": "big"}, "c2")), "done"])
    result = asyncio.run(Agent("a", provider=model, tools=[fetch]).run("go"))
    assert result.status == "answered"
    shown = {ci.item.body["call_id"]: ci.item.body["content"]
             for ci in model.requests[-1].context if ci.item.kind == "tool_result"}
    assert "401 Unauthorized" in shown["c1"] and "'Basic [REDACTED]'" in shown["c1"]
    assert "dXNlcjpwYXNzd29yZA" not in shown["c1"] and "sk-abcdefghij" not in shown["c1"]
    assert MAX_ERROR_TEXT < len(shown["c2"]) < MAX_ERROR_TEXT + 200 and "1,996,000 more characters" in shown["c2"]

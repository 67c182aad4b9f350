"""Reading third-party callables as tools: what each kind of callable and annotation becomes, and the
clear error (naming the tool and the parameter) for what cannot be declared. Each test is a bug found
by throwing real-world tools at :func:`agent.tool`."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import decimal
import enum
import functools
import json
import math
import pathlib
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, NewType

import pydantic
import pytest

from agent import Agent, Tool, ToolContext, result_text, tool
from agent.errors import ToolArgumentsError, ToolTimeoutError, UserError
from agent.providers import ScriptedModel, calls
from agent.tools import tool_help
from tracer import Recorder, Store


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


UserId = NewType("UserId", int)


@dataclasses.dataclass
class Stamp:
    at: datetime.datetime


class Opaque(Exception):
    """An exception whose message cannot be read."""

    def __str__(self) -> str:
        raise ValueError("no text")


@tool
def flaky() -> str:
    """Fails oddly."""
    raise Opaque()


async def run_one(t: Tool, arguments: dict[str, Any], tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """One call of ``t`` through a recorded Agent: the run's status and the tool result the model saw."""
    model = ScriptedModel([calls((t.name, arguments)), "done"])
    store = Store.open(tmp_path / "s.duckdb")
    try:
        result = await Agent("a", provider=model, tools=[t], recorder=Recorder(store)).run("go")
        store.flush()
        assert store.load_run(result.run_id).run.status == result.status
    finally:
        store.close()
    seen = [dict(ci.item.body) for ci in model.requests[-1].context if ci.item.kind == "tool_result"]
    return result.status, seen[0]


async def test_a_default_json_cannot_say_as_it_is_is_sent_as_json_and_the_run_does_not_crash(tmp_path: Path) -> None:
    """A date default went into the schema as a date object: the first inference failed the run."""
    seen: list[Any] = []

    @tool
    def report(since: datetime.date = datetime.date(2020, 1, 1), where: Path = Path("/tmp"),
               ratio: float = math.nan, color: Color = Color.RED, pair: tuple[int, int] = (1, 2),
               box: object = object()) -> str:
        """A report."""
        seen.append((since, where, ratio, color, pair))
        return "ok"

    props = report.parameters["properties"]
    assert props["since"] == {"type": "string", "format": "date", "default": "2020-01-01"}
    assert props["where"]["default"] == "/tmp" and props["color"]["default"] == "red"
    assert props["pair"]["default"] == [1, 2]
    assert "default" not in props["ratio"] and "default" not in props["box"]  # JSON cannot say NaN, an object
    status, result = await run_one(report, {}, tmp_path)
    assert (status, result["content"], result["is_error"]) == ("answered", "ok", False)
    assert seen[0][:2] == (datetime.date(2020, 1, 1), Path("/tmp")) and math.isnan(seen[0][2])


def test_a_hand_written_schema_that_is_not_json_is_refused_naming_the_tool() -> None:
    with pytest.raises(UserError, match=r"tool since: parameters must be JSON"):
        Tool("since", "d", {"type": "object", "properties": {"d": {"default": datetime.date(2020, 1, 1)}}},
             execute=lambda args: "x")
    with pytest.raises(UserError, match=r"tool ratio: parameters must be JSON"):
        Tool("ratio", "d", {"type": "object", "properties": {"r": {"default": math.inf}}}, execute=lambda args: "x")


async def test_an_exception_whose_message_cannot_be_read_fails_that_call_not_the_run(tmp_path: Path) -> None:
    status, result = await run_one(flaky, {}, tmp_path)
    assert status == "answered" and result["is_error"]
    assert result["content"] == "Error: flaky failed: Opaque: <Opaque whose message could not be read>"


async def test_positional_only_parameters_are_passed_by_position(tmp_path: Path) -> None:
    """They were passed by keyword: every call failed with a TypeError."""

    @tool
    def scale(value: float, factor: float = 2.0, /, *, offset: float = 0.0) -> float:
        """Scale a value."""
        return value * factor + offset

    assert scale.parameters["required"] == ["value"]
    assert await scale.run({"value": 3.0}) == 6.0
    assert await scale.run({"value": 3.0, "factor": 3.0, "offset": 1.0}) == 10.0
    status, result = await run_one(scale, {"value": 1.5}, tmp_path)
    assert (status, result["content"], result["is_error"]) == ("answered", "3.0", False)


async def test_dates_uuids_paths_decimals_and_bytes_arrive_as_their_types() -> None:
    """They were offered as "anything" and arrived as the JSON string."""
    got: dict[str, Any] = {}

    @tool
    def book(day: datetime.date, at: datetime.datetime, when: datetime.time, ref: uuid.UUID, where: pathlib.Path,
             price: decimal.Decimal, raw: bytes, who: UserId, tags: Sequence[str], extra: Mapping[str, int],
             maybe: datetime.date | None = None) -> str:
        """Book it."""
        got.update(locals())
        return "booked"

    props = book.parameters["properties"]
    assert props["day"] == {"type": "string", "format": "date"}
    assert props["at"]["format"] == "date-time" and props["ref"]["format"] == "uuid"
    assert props["price"] == {"type": "number"} and props["who"] == {"type": "integer"}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["extra"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    ref = uuid.uuid4()
    arguments = {"day": "2024-02-29", "at": "2024-02-29T10:30:00+01:00", "when": "10:30", "ref": str(ref),
                 "where": "/srv/a", "price": 9.99, "raw": "héllo", "who": 7, "tags": ["a"], "extra": {"k": 1},
                 "maybe": "2024-03-01"}
    assert await book.run(book.check_arguments(arguments)) == "booked"
    assert got["day"] == datetime.date(2024, 2, 29) and got["at"].utcoffset() == datetime.timedelta(hours=1)
    assert got["when"] == datetime.time(10, 30) and got["ref"] == ref and got["where"] == pathlib.Path("/srv/a")
    assert got["price"] == decimal.Decimal("9.99") and got["raw"] == "héllo".encode()
    assert got["tags"] == ["a"] and got["maybe"] == datetime.date(2024, 3, 1)


async def test_a_value_that_is_not_its_type_is_an_argument_error_naming_the_parameter(tmp_path: Path) -> None:
    """A date that is no date, a pydantic validator's refusal: the model was told the tool 'failed'."""

    class Order(pydantic.BaseModel):
        qty: int

        @pydantic.field_validator("qty")
        @classmethod
        def odd(cls, value: int) -> int:
            if value % 2 == 0:
                raise ValueError("qty must be odd")
            return value

    @tool
    def order(day: datetime.date, item: Order) -> str:
        """Order."""
        return "ok"

    with pytest.raises(ToolArgumentsError, match=r"arguments for order do not fit its parameters: day: Invalid isoformat string: 'soon'"):
        await order.run({"day": "soon", "item": {"qty": 1}})
    status, result = await run_one(order, {"day": "2024-01-01", "item": {"qty": 2}}, tmp_path)
    assert status == "answered" and result["is_error"]
    assert result["content"] == "Error: arguments for order do not fit its parameters: item: qty: Value error, qty must be odd"


def test_a_partial_offers_only_what_it_leaves_open_and_a_callable_instance_its_call() -> None:
    def search(query: str, session: object, limit: int = 5) -> list[str]:
        """Search the index.

        Args:
            query: what to look for
        """
        return [query] * limit

    bound = tool(functools.partial(search, session=object()))
    assert bound.name == "search" and bound.description == "Search the index."
    assert bound.parameters["properties"] == {"query": {"type": "string", "description": "what to look for"},
                                              "limit": {"type": "integer", "default": 5}}

    class Greeter:
        """Greets people."""

        def __call__(self, who: str) -> str:
            return f"hi {who}"

    greet = tool(Greeter())
    assert (greet.name, greet.description, greet.parameters["required"]) == ("Greeter", "Greets people.", ["who"])

    class Silent:
        def __call__(self, who: str) -> str:
            return who

    assert tool(Silent()).description == "Silent"  # not object's 'Call self as a function.'


async def test_a_partial_and_a_callable_instance_run() -> None:
    def power(base: float, exponent: float) -> float:
        """Raise to a power."""
        return float(base**exponent)

    class Async:
        async def __call__(self, n: int) -> int:
            return n + 1

    assert await tool(functools.partial(power, exponent=2)).run({"base": 3}) == 9.0
    assert await tool(Async(), name="inc").run({"n": 1}) == 2


def test_what_cannot_be_declared_is_refused_naming_the_tool_and_the_parameter() -> None:
    with pytest.raises(UserError, match=r"tool hypot: Python cannot read the parameters of <built-in function hypot>"):
        tool(math.hypot)
    with pytest.raises(UserError, match=r"'<lambda>' is no tool name .* pass tool\(\.\.\., name="):
        tool(lambda x: x)

    def apply(fn: Callable[[int], int], n: int) -> int:
        return fn(n)

    with pytest.raises(UserError, match=r"tool apply: parameter 'fn' is annotated Callable\[\[int\], int\], which no "
                                        r"JSON argument can stand for"):
        tool(apply)

    class Session:
        """A class of no known shape."""

    def fetch(url: str, sessions: list[Session]) -> str:
        return url

    with pytest.raises(UserError, match=r"tool fetch: parameter 'sessions' is annotated list\[.*Session\] "
                                        r"\(it holds .*Session\)"):
        tool(fetch)


def test_an_annotation_that_does_not_resolve_is_refused_naming_the_parameter() -> None:
    def lookup(key: str, into: NotDefinedAnywhere) -> str:  # type: ignore[name-defined]  # noqa: F821
        return key

    with pytest.raises(UserError, match=r"tool lookup: the annotation of parameter 'into' \('NotDefinedAnywhere'\) "
                                        r"cannot be resolved \(NameError"):
        tool(lookup)

    def only_the_return(key: str) -> NotDefinedEither:  # type: ignore[name-defined]  # noqa: F821
        """Only its return annotation is unknown: the tool needs none."""
        return key

    assert tool(only_the_return).parameters["required"] == ["key"]


async def test_literal_enum_members_newtypes_none_defaults_and_kwargs() -> None:
    got: dict[str, Any] = {}

    @tool
    def paint(color: Literal[Color.RED, Color.GREEN], owner: UserId, limit: int = None,  # type: ignore[assignment]  # noqa: RUF013  # what users write
              **labels: str) -> str:
        """Paint."""
        got.update(color=color, owner=owner, limit=limit, labels=labels)
        return "done"

    parameters = paint.parameters
    assert parameters["properties"]["color"] == {"enum": ["red", "green"]}  # was the members: not JSON
    assert parameters["properties"]["limit"] == {"type": ["integer", "null"]}
    assert parameters["additionalProperties"] == {"type": "string"}
    json.dumps(parameters, allow_nan=False)
    assert await paint.run(paint.check_arguments({"color": "green", "owner": 3, "limit": None, "tag": "x"})) == "done"
    assert got == {"color": Color.GREEN, "owner": 3, "limit": None, "labels": {"tag": "x"}}
    with pytest.raises(ToolArgumentsError, match=r"tag: 1 is not of type 'string'"):
        paint.check_arguments({"color": "red", "owner": 1, "tag": 1})


def test_numpy_style_docstrings() -> None:
    def resample(series: list[float], rate: int, fill_value: float = 0.0) -> list[float]:
        """Resample a series.

        Longer text.

        Parameters
        ----------
        series : list of float
            The values,
            oldest first.
        rate, fill_value : int
            How often, and what fills gaps.

        Returns
        -------
        list of float
        """
        return series

    t = tool(resample)
    assert t.description == "Resample a series.\nLonger text."
    props = t.parameters["properties"]
    assert props["series"]["description"] == "The values, oldest first."
    assert props["rate"]["description"] == props["fill_value"]["description"] == "How often, and what fills gaps."


def test_results_json_has_no_type_for_read_as_their_values() -> None:
    assert result_text(b"caf\xc3\xa9") == "café"
    assert result_text(b"\xff") == "\\xff"
    assert json.loads(result_text(Stamp(datetime.datetime(2024, 1, 2, 3, 4)))) == {"at": "2024-01-02T03:04:00"}
    assert json.loads(result_text({"id": uuid.UUID(int=1), "p": Path("/x"), "d": decimal.Decimal("1.5")})) == {
        "id": "00000000-0000-0000-0000-000000000001", "p": "/x", "d": 1.5}


async def test_an_agent_takes_a_plain_function_as_a_tool_and_refuses_what_is_none(tmp_path: Path) -> None:
    """A plain function in tools=[...] failed with AttributeError: 'function' object has no attribute 'name'."""

    @dataclasses.dataclass
    class Where:  # defined here: its name resolves where the agent is made
        city: str

    def weather(where: Where) -> str:
        """The weather somewhere."""
        return f"{where.city}: sunny"

    model = ScriptedModel([calls(("weather", {"where": {"city": "Oslo"}})), "done"])
    agent = Agent("a", provider=model, tools=[weather])
    assert agent.tools["weather"].description == "The weather somewhere."
    assert (await agent.run("go")).ok
    assert [ci.item.body["content"] for ci in model.requests[-1].context if ci.item.kind == "tool_result"] == [
        "Oslo: sunny"]
    with pytest.raises(UserError, match=r"agent a: tools\[1\] is the name 'weather', not a tool; pass names as "
                                        r"tool_names"):
        Agent("a", provider=model, tools=[weather, "weather"])  # type: ignore[list-item]
    with pytest.raises(UserError, match=r"agent a: tools\[0\] is int 42, not a Tool or a function"):
        Agent("a", provider=model, tools=[42])  # type: ignore[list-item]


async def test_arguments_sent_as_a_json_string_holding_the_object_are_read(tmp_path: Path) -> None:
    """Some models encode the arguments twice ('"{\\"city\\": \\"Oslo\\"}"'); that was 'not a JSON object'."""

    @tool
    def weather(city: str) -> str:
        """The weather."""
        return f"{city}: sunny"

    assert weather.parse_arguments(json.dumps(json.dumps({"city": "Oslo"}))) == {"city": "Oslo"}
    with pytest.raises(ToolArgumentsError, match=r"must be a JSON object, not a string"):
        weather.parse_arguments('"Oslo"')
    with pytest.raises(ToolArgumentsError, match=r"must be a JSON object, not a string"):
        weather.parse_arguments('"{not json"')


async def test_use_tool_says_a_tool_failed_even_when_its_exception_has_no_readable_message() -> None:
    model = ScriptedModel([calls(("use_tool", {"tool_name": "flaky", "arguments": {}})), "done"])
    assert (await Agent("m", provider=model, tools=[flaky], meta_tools=True).run("go")).ok
    content = next(ci.item.body["content"] for ci in model.requests[-1].context if ci.item.kind == "tool_result")
    assert content.startswith("Error: flaky failed: Opaque: <Opaque whose message could not be read>")


async def test_an_endless_generator_tool_times_out_and_is_no_longer_drawn_on() -> None:
    """Its items were drawn in a worker thread for ever after the timeout: memory without end."""
    drawn: list[int] = []
    closed = threading.Event()

    def endless() -> Iterator[int]:
        try:
            while True:
                drawn.append(1)
                yield len(drawn)
        finally:
            closed.set()

    t = tool(endless, timeout=0.05)
    with pytest.raises(ToolTimeoutError):
        await t.run({})
    assert await asyncio.to_thread(closed.wait, 60)  # the worker stopped drawing and closed it
    after = len(drawn)
    await asyncio.sleep(0.01)
    assert len(drawn) == after


def test_the_signature_and_the_help_say_what_a_union_or_a_formatted_string_takes() -> None:
    """An optional dataclass or 'int | str' was 'any', a date a bare 'string'."""

    def plan(day: datetime.date, span: Stamp | None, size: int | str, color: Color) -> str:
        return "ok"

    t = tool(plan)
    assert t.signature() == ("day: date string (required), span: object|null (required), "
                             "size: integer|string (required), color: enum red|green (required)")
    assert "- span (object or null, required)" in tool_help(t) and "- day (date string, required)" in tool_help(t)


async def test_an_optional_or_annotated_tool_context_is_the_context_not_a_parameter() -> None:
    """'context: ToolContext | None = None' was offered to the model as an object of the context's fields."""

    def whoami(prefix: str, context: ToolContext | None = None) -> str:
        return f"{prefix}{context.call_id if context else 'none'}"

    def note(text: str, context: Annotated[ToolContext, "the call"]) -> str:
        return f"{text}@{context.call_id}"

    for t in (tool(whoami), tool(note)):
        assert t.takes_context and list(t.parameters["properties"]) == [t.parameters["required"][0]]
    assert await tool(whoami).run({"prefix": "id:"}, ToolContext(call_id="c9")) == "id:c9"
    assert await tool(note).run({"text": "n"}, ToolContext(call_id="c1")) == "n@c1"


async def test_a_dict_with_integer_or_enum_keys_arrives_with_them() -> None:
    """JSON keys are text: the function got {'1': ...} and its scores[1] was a KeyError."""

    @tool
    def top(scores: dict[int, float], by_color: dict[Color, int]) -> str:
        """The best."""
        return f"{scores[1]} {by_color[Color.RED]}"

    assert top.parameters["properties"]["scores"]["propertyNames"] == {"pattern": "^-?[0-9]+$"}
    assert await top.run(top.check_arguments({"scores": {"1": 0.5, "-2": 1}, "by_color": {"red": 3}})) == "0.5 3"
    with pytest.raises(ToolArgumentsError, match=r"scores: 'one' does not match"):
        top.check_arguments({"scores": {"one": 1.0}, "by_color": {}})

"""Random tools, the way users write them, driven through a recorded Agent with valid and invalid calls.

Hypothesis builds a function signature (positional-only, ordinary and keyword-only parameters of many
annotation kinds, defaults, ``*args`` and ``**kwargs``, sync or async), a call (valid, missing a
required argument, with an extra one, with a value of the wrong type or one its type refuses, or
argument text that is not JSON) and what the tool does (returns a value of some kind, or raises,
its message holding a secret). Whatever is drawn:

- the run ends ``answered`` (a bad call is an error result the model sees, never a crashed run);
- a valid call runs the function with every argument of its annotated type, and its result is text;
- an invalid call never runs the function, and its error names the tool and what was wrong;
- the run is recorded, its tool stage's status says whether the call failed, and no secret is stored.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import inspect
import json
import keyword
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, TypedDict

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent import Agent, tool
from agent.providers import ScriptedModel, calls
from agent.providers._testing import raw_call
from tracer import Recorder, Store


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(TypedDict):
    x: int
    y: int


@dataclasses.dataclass
class Span:
    start: int
    label: str = "span"


class Person(pydantic.BaseModel):
    name: str
    age: int


@dataclasses.dataclass(frozen=True)
class Kind:
    """An annotation, JSON values it accepts, a JSON value it refuses, and a check of what arrives."""

    annotation: Any
    valid: st.SearchStrategy[Any]
    invalid: Any
    arrives: Callable[[Any], bool]
    default: Any


_text = st.text(st.characters(codec="utf-8"), max_size=8)
_int = st.integers(-10**6, 10**6)

KINDS: dict[str, Kind] = {
    "int": Kind(int, _int, "seven", lambda v: type(v) is int, 3),
    "float": Kind(float, st.floats(allow_nan=False, allow_infinity=False) | _int, "1.5",
                  lambda v: isinstance(v, int | float) and not isinstance(v, bool), 0.5),
    "str": Kind(str, _text, 5, lambda v: isinstance(v, str), "x"),
    "bool": Kind(bool, st.booleans(), "yes", lambda v: isinstance(v, bool), False),
    "optional_int": Kind(int | None, st.none() | _int, "none", lambda v: v is None or type(v) is int, None),
    "literal": Kind(Literal["a", "b"], st.sampled_from(["a", "b"]), "c", lambda v: v in ("a", "b"), "a"),
    "enum": Kind(Color, st.sampled_from(["red", "blue"]), "green", lambda v: isinstance(v, Color), Color.BLUE),
    "list_int": Kind(list[int], st.lists(_int, max_size=3), {"a": 1}, lambda v: isinstance(v, list), [1]),
    "list_dict": Kind(list[dict[str, Any]], st.lists(st.dictionaries(_text, _int, max_size=2), max_size=2), [1],
                      lambda v: isinstance(v, list) and all(isinstance(d, dict) for d in v), []),
    "dict": Kind(dict[str, int], st.dictionaries(_text, _int, max_size=3), [1], lambda v: isinstance(v, dict), {}),
    "tuple": Kind(tuple[int, str], st.tuples(_int, _text).map(list), [1], lambda v: isinstance(v, tuple), (1, "a")),
    "set": Kind(set[str], st.lists(_text, max_size=3), "abc", lambda v: isinstance(v, set), frozenset()),
    "sequence": Kind(Sequence[int], st.lists(_int, max_size=3), 4, lambda v: isinstance(v, list), ()),
    "date": Kind(datetime.date, st.dates().map(datetime.date.isoformat), "soon",
                 lambda v: type(v) is datetime.date, datetime.date(2020, 1, 1)),
    "datetime": Kind(datetime.datetime, st.datetimes().map(datetime.datetime.isoformat), 17,
                     lambda v: isinstance(v, datetime.datetime), datetime.datetime(2020, 1, 1)),
    "uuid": Kind(uuid.UUID, st.uuids().map(str), "not-a-uuid", lambda v: isinstance(v, uuid.UUID), None),
    "path": Kind(Path, _text.filter(bool), 1, lambda v: isinstance(v, Path), Path(".")),
    "typeddict": Kind(Point, st.fixed_dictionaries({"x": _int, "y": _int}), {"x": 1},
                      lambda v: isinstance(v, dict) and set(v) == {"x", "y"}, None),
    "dataclass": Kind(Span, st.fixed_dictionaries({"start": _int}, optional={"label": _text}), {"start": "0"},
                      lambda v: isinstance(v, Span), Span(0)),
    "pydantic": Kind(Person, st.fixed_dictionaries({"name": _text, "age": _int}), {"name": "x"},
                     lambda v: isinstance(v, Person), None),
    "any": Kind(Any, st.none() | _int | _text, None, lambda v: True, None),
}
SECRET = "sk-" + "Q7x" * 10
ORDER = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


@dataclasses.dataclass
class Drawn:
    """A random tool and a call of it."""

    signature: inspect.Signature
    kinds: dict[str, Kind]
    arguments: dict[str, Any] | str  # a str: argument text that is not JSON
    valid: bool
    wrong: str | None  # the parameter an invalid call gets wrong (None: missing or extra ones, or bad JSON)
    is_async: bool
    outcome: str  # what the tool does: returns a value of a kind, or raises


RESULTS: dict[str, Callable[[], Any]] = {
    "none": lambda: None, "dict": lambda: {"a": [1, {"b": (2, 3)}], 4: {5}}, "bytes": lambda: b"\x00\xff bytes",
    "datetime": lambda: datetime.datetime(2024, 5, 6, 7, 8), "dataclass": lambda: Span(1),
    "pydantic": lambda: Person(name="a", age=1), "object": object, "generator": lambda: (i for i in range(3)),
    "nan": lambda: float("nan"), "text": lambda: "plain text",
}


def _raiser(kind: str) -> Callable[[], Any]:
    def fail() -> Any:
        if kind == "secret":
            raise RuntimeError(f"upstream refused key {SECRET}")
        if kind == "bearer":
            raise PermissionError(f"401 for headers {{'Authorization': 'Bearer {SECRET[3:]}'}}")
        raise KeyError(kind)
    return fail


OUTCOMES: dict[str, Callable[[], Any]] = {**RESULTS, **{f"raise_{k}": _raiser(k) for k in ("secret", "bearer", "key")}}


@st.composite
def drawn_tools(draw: st.DrawFn) -> Drawn:
    count = draw(st.integers(0, 5))
    names = draw(st.lists(st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True).filter(
        lambda n: not keyword.iskeyword(n)),  # 'as', 'if': no function can have them as parameters
        min_size=count, max_size=count, unique=True).filter(lambda ns: not {"args", "kwargs"} & set(ns)))
    specs = sorted(((n, draw(st.sampled_from(sorted(KINDS))), draw(st.sampled_from(ORDER)), draw(st.booleans()))
                    for n in names), key=lambda spec: ORDER.index(spec[2]))
    params: list[inspect.Parameter] = []
    kinds: dict[str, Kind] = {}
    positional_default = False
    for pname, kind_name, kind, has_default in specs:
        spec = KINDS[kind_name]
        if kind is not inspect.Parameter.KEYWORD_ONLY:  # after a default, every positional one has one
            has_default = positional_default = has_default or positional_default
        default = spec.default if has_default else inspect.Parameter.empty
        params.append(inspect.Parameter(pname, kind, default=default, annotation=spec.annotation))
        kinds[pname] = spec
    var_positional, var_keyword = draw(st.booleans()), draw(st.booleans())
    if var_positional:
        at = sum(p.kind is not inspect.Parameter.KEYWORD_ONLY for p in params)
        params.insert(at, inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL, annotation=int))
    if var_keyword:
        params.append(inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD, annotation=str))
    signature = inspect.Signature(params)

    arguments = {p: draw(kinds[p].valid) for p in kinds
                 if signature.parameters[p].default is inspect.Parameter.empty or draw(st.booleans())}
    required = [p for p in kinds if signature.parameters[p].default is inspect.Parameter.empty]
    wrongs = ["type", *(["missing"] if required else []), *(["extra"] if not var_keyword else []), "json"]
    mistake = draw(st.sampled_from(["none", "none", *wrongs]))
    wrong = None
    if mistake == "type":
        candidates = [p for p in arguments if kinds[p].annotation is not Any]
        if not candidates:
            mistake = "none"
        else:
            wrong = draw(st.sampled_from(candidates))
            arguments[wrong] = kinds[wrong].invalid
    elif mistake == "missing":
        del arguments[draw(st.sampled_from(required))]
    elif mistake == "extra":
        arguments["unexpected_argument"] = 1
    raw: dict[str, Any] | str = arguments
    if mistake == "json":
        raw = draw(st.sampled_from(["{not json", "[1, 2]", '{"a": 1} trailing', "```json\n{}\n```", "null"]))
    return Drawn(signature, kinds, raw, mistake == "none", wrong, draw(st.booleans()),
                 draw(st.sampled_from(sorted(OUTCOMES))))


def make_function(d: Drawn, received: list[inspect.BoundArguments]) -> Callable[..., Any]:
    """A function with the drawn signature that keeps what it was called with, then does the outcome."""
    def body(*args: Any, **kwargs: Any) -> Any:
        bound = d.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        received.append(bound)
        return OUTCOMES[d.outcome]()

    async def async_body(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0)
        return body(*args, **kwargs)

    fn: Any = async_body if d.is_async else body
    fn.__signature__ = d.signature
    fn.__annotations__ = {p.name: p.annotation for p in d.signature.parameters.values()}
    fn.__name__ = fn.__qualname__ = "drawn_tool"
    fn.__doc__ = "A tool drawn at random."
    return fn  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    s = Store.open(tmp_path_factory.mktemp("real-tools") / "s.duckdb")
    yield s
    s.close()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(d=drawn_tools())
def test_random_tools_and_calls_keep_the_invariants(store: Store, d: Drawn) -> None:
    received: list[inspect.BoundArguments] = []
    t = tool(make_function(d, received))
    json.dumps(t.parameters, allow_nan=False)  # the schema is JSON: it is sent to a model and stored
    call = raw_call(t.name, d.arguments, "c1") if isinstance(d.arguments, str) else calls((t.name, d.arguments, "c1"))
    model = ScriptedModel([call, "done"])
    result = asyncio.run(Agent("a", provider=model, tools=[t], recorder=Recorder(store)).run("go"))

    assert (result.status, result.answer) == ("answered", "done"), result.error
    seen = [dict(ci.item.body) for ci in model.requests[-1].context if ci.item.kind == "tool_result"]
    assert len(seen) == 1 and seen[0]["call_id"] == "c1" and isinstance(seen[0]["content"], str)
    content, is_error = seen[0]["content"], seen[0]["is_error"]
    if d.valid:
        assert len(received) == 1, content
        for pname, value in received[0].arguments.items():
            if pname in d.kinds:  # given by the model: of its type; left out: the function's default
                assert d.kinds[pname].arrives(value) if pname in d.arguments else value == d.kinds[pname].default, (
                    pname, value)
        assert is_error == d.outcome.startswith("raise_")
        if is_error:
            assert content.startswith("Error: drawn_tool failed: ")
    else:
        assert received == [] and is_error
        assert content.startswith("Error: arguments for drawn_tool "), content
        if d.wrong is not None:
            assert d.wrong in content

    store.flush()
    data = store.load_run(result.run_id)
    assert data.run.status == "answered"
    tool_stages = [s for s in data.stages if s.kind == "tool"]
    assert [(s.name, s.status) for s in tool_stages] == [("drawn_tool", "error" if is_error else "ok")]
    stored = json.dumps([[s.attributes for s in data.stages], [i.body for i in data.items.values()]], default=str)
    assert SECRET not in stored and SECRET[3:] not in stored

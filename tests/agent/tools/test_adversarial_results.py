"""Whatever a real tool returns, the run ends cleanly, the store reads back, and no secret is stored.

Hypothesis builds return values the way real tools produce them by mistake or by nature: bytes
that are not UTF-8, None, dataclasses, pydantic models, enums, dates and times, UUIDs, Decimals
(NaN too), paths, sets, deques, numpy-like arrays, objects whose ``__str__`` (or ``__repr__`` too)
raises, dicts and lists that contain themselves, generators (sync and async, and one nested in a
result), nesting deeper than ``json.dumps`` goes, lone surrogates, NaN and infinities, integers too
long for ``str()``; and exceptions whose message holds a secret or a lone surrogate. Secrets
(a key, a bearer token, an AWS key id, a password or an API key field) are pasted into strings and
dict values throughout. Each value is returned by a sync or an async tool, with or without a bound
on the result, through a recorded :class:`agent.Agent` driven by a :class:`ScriptedModel`:

- the run ends ``answered``; the model got one result, a text that UTF-8 can write, within the bound;
- the result is an error exactly when the tool raised or returned a value with no text at all;
- afterwards the store opens again and every run reads back whole, with no secret in any item,
  attribute or error.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import datetime
import decimal
import enum
import json
import string
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import pydantic
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from agent import Agent, Tool
from agent.providers import ScriptedModel, calls, tool_results
from tracer import Recorder, Store


class Broken:
    """An object whose text cannot be read at all."""

    def __str__(self) -> str:
        raise RuntimeError("str fails")

    def __repr__(self) -> str:
        raise RuntimeError("repr fails")


class HalfBroken:
    """An object whose ``__str__`` raises; its ``__repr__`` works."""

    def __str__(self) -> str:
        raise ValueError("str fails")

    def __repr__(self) -> str:
        return "HalfBroken()"


class BrokenMessage(Exception):
    def __str__(self) -> str:
        raise RuntimeError("message fails")


class Level(enum.Enum):
    LOW = 1
    HIGH = "high"
    ODD = (1.5, None)


@dataclasses.dataclass
class Box:
    value: Any
    label: str = "box"


class Model(pydantic.BaseModel):
    value: Any = None
    ratio: float = 0.5


class ArrayLike:
    """What a numpy array offers: ``tolist()``, and a repr that is not JSON."""

    def __init__(self, values: list[Any]) -> None:
        self.values = values

    def tolist(self) -> list[Any]:
        return self.values

    def __repr__(self) -> str:
        return f"array({self.values!r})"


_ALNUM = string.ascii_letters + string.digits
_secret_core = st.text(st.sampled_from(_ALNUM), min_size=20, max_size=28).filter(
    lambda s: any(c.isdigit() for c in s) and any(c.isalpha() for c in s))


@st.composite
def secrets(draw: st.DrawFn) -> tuple[str, str]:
    """(the text a tool returns, the part of it that must never be stored)."""
    core = draw(_secret_core)
    form = draw(st.sampled_from(["sk", "bearer", "aws", "password", "api_key"]))
    if form == "sk":
        return f"sk-{core}", core
    if form == "bearer":
        return f"Authorization: Bearer {core}", core
    if form == "aws":
        upper = "".join(c for c in core.upper() if c.isalnum())[:16].ljust(16, "Q")
        return f"AKIA{upper}", upper
    return f"{form}={core}", core


_surrogates = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
_text = st.text(st.characters(codec="utf-8") | _surrogates, max_size=30)
_long_text = st.builds(lambda piece, n: (piece + "\n") * n, st.text(min_size=1, max_size=20), st.integers(0, 3000))

_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10**20, 10**20), st.integers(4400, 5200).map(lambda n: (-1) ** n * 10**n),
    st.floats(allow_nan=True, allow_infinity=True), _text, _long_text, st.binary(max_size=40),
    st.sampled_from(list(Level)), st.datetimes(), st.dates(), st.times(), st.uuids(),
    st.decimals(allow_nan=True, allow_infinity=True), st.builds(PurePosixPath, st.text(max_size=10)),
    st.builds(Broken), st.builds(HalfBroken),
)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    hashable = st.one_of(st.integers(), st.text(max_size=5), st.none(), st.sampled_from(list(Level)))
    return st.one_of(
        st.lists(children, max_size=5), st.tuples(children, children),
        st.dictionaries(st.text(max_size=8), children, max_size=5),
        st.dictionaries(hashable | st.tuples(st.integers(), st.integers()), children, max_size=3),
        st.frozensets(hashable, max_size=5), st.sets(st.integers(), max_size=5),
        st.builds(collections.deque, st.lists(children, max_size=3)),
        st.builds(Box, children), st.builds(lambda v: Model(value=v), children),
        st.builds(ArrayLike, st.lists(st.integers() | st.floats(), max_size=4)),
    )


_values = st.recursive(_scalars, _containers, max_leaves=12)


def _plain_text(value: Any, depth: int = 0) -> str:
    """All the text of a generated value, secrets aside: hypothesis copies drawn strings around, so
    a secret's core can also turn up as a plain string (a Box's value), where no policy could know
    it for a secret; such examples are left out."""
    if depth > 40:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, dict):
        return " ".join(f"{_plain_text(k, depth + 1)} {_plain_text(v, depth + 1)}" for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return " ".join(_plain_text(v, depth + 1) for v in value)
    if isinstance(value, Box | Model):
        return _plain_text(value.value, depth + 1)
    if isinstance(value, ArrayLike):
        return _plain_text(value.values, depth + 1)
    try:
        return repr(value)
    except Exception:
        return ""


@st.composite
def returned(draw: st.DrawFn) -> tuple[Any, list[str], str, str]:
    """(what the tool returns or raises, the secrets it holds, how it is given back, the plain text
    it holds besides the secrets)."""
    value = draw(_values)
    plain = _plain_text(value)
    held: list[str] = []
    for _ in range(draw(st.integers(0, 3))):
        text, core = draw(secrets())
        assume(core not in plain)
        held.append(core)
        where = draw(st.sampled_from(["wrap", "field", "key", "bytes"]))
        value = {"wrap": [value, f"note: {text} end"], "field": {"data": value, "password": core, "api_key": text},
                 "key": {text: value}, "bytes": [value, text.encode()]}[where]
    shape = draw(st.sampled_from(["plain", "plain", "cycle", "deep", "generator", "async_generator", "nested_generator",
                                  "raise", "raise_broken"]))
    if shape == "cycle":
        loop: list[Any] = [value]
        loop.append(loop)
        holder: dict[str, Any] = {"v": loop}
        holder["me"] = holder
        value = holder
    elif shape == "deep":
        for _ in range(draw(st.integers(100, 3000))):
            value = [value]
    return value, held, shape, plain


_DEFAULT = object()


def _tool(value: Any, shape: str, secret: str, is_async: bool, bound: int | None) -> Tool:
    def produce() -> Any:
        if shape == "raise":
            raise RuntimeError(f"the backend said: {secret} \ud800")
        if shape == "raise_broken":
            raise BrokenMessage()
        if shape == "generator":
            return (item for item in [value, value])
        if shape == "nested_generator":
            return {"items": (item for item in [value]), "value": value}
        if shape == "async_generator":
            async def items() -> AsyncIterator[Any]:
                yield value
                yield secret

            return items()
        return value

    if is_async:
        async def execute(arguments: dict[str, Any]) -> Any:
            await asyncio.sleep(0)
            return produce()
    else:
        def execute(arguments: dict[str, Any]) -> Any:  # type: ignore[misc]
            return produce()
    return Tool("returns", "Returns something.", {"type": "object"}, execute, max_result_chars=bound)


def _is_unreadable(value: Any, shape: str) -> bool:
    return shape == "plain" and isinstance(value, Broken)


def test_any_return_value_ends_the_run_cleanly_and_stores_no_secret(tmp_path: Path) -> None:
    path = tmp_path / "adversarial.duckdb"
    run_ids: list[str] = []
    cores: list[str] = []
    with Store.open(path) as store:
        recorder = Recorder(store)

        @settings(max_examples=300, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
        @given(returned(), secrets(), st.booleans(), st.sampled_from([None, 200, 1_000, _DEFAULT]),
               st.sampled_from([None, 500, 20_000]))
        def check(made: tuple[Any, list[str], str, str], secret: tuple[str, str], is_async: bool, bound: Any,
                  agent_bound: int | None) -> None:
            value, held, shape, plain = made
            assume(secret[1] not in plain)
            tool = _tool(value, shape, secret[0], is_async, None if bound is _DEFAULT else bound)
            model = ScriptedModel([calls(("returns", {})), "done"])
            agent = Agent("adversarial", provider=model, tools=[tool], recorder=recorder,
                          max_tool_result_chars=agent_bound)
            result = asyncio.run(agent.run("go"))
            assert result.status == "answered", (result.error, shape)
            [shown] = tool_results(model.requests[1])
            content = shown["content"]
            assert isinstance(content, str)
            content.encode()  # UTF-8 can write it
            limit = tool.max_result_chars or agent_bound
            assert limit is None or len(content) <= limit
            assert shown["is_error"] == (shape in ("raise", "raise_broken") or _is_unreadable(value, shape)), content
            if shape == "raise_broken":
                assert "BrokenMessage whose message could not be read" in content
            if not shown["is_error"] and shape in ("generator", "async_generator") and limit is None:
                assert json.loads(content)[-1] == (secret[0] if shape == "async_generator" else json.loads(content)[0])
            run_ids.append(result.run_id)
            cores.extend([*held, secret[1]])

        check()
        store.flush()
    assert len(run_ids) >= 100
    with Store.open(path, read_only=True) as reread:
        for run_id in run_ids:
            data = reread.load_run(run_id)
            assert data.run.status == "answered"
            assert [s.kind for s in data.stages].count("tool") == 1
            stored = [json.dumps([i.kind, i.body], ensure_ascii=False) for i in data.items.values()]
            stored += [json.dumps([s.attributes, s.error], ensure_ascii=False, default=str) for s in data.stages]
            stored.append(json.dumps([data.run.output, data.run.error], ensure_ascii=False))
            text = "\n".join(stored)
            leaked = [core for core in cores if core in text]
            assert not leaked, (run_id, leaked)


def test_a_result_with_a_lone_surrogate_no_longer_fails_the_run(tmp_path: Path) -> None:
    """It did: hashing the result item encoded it as UTF-8 and raised, and the run failed (internal_error)."""
    with Store.open(tmp_path / "s.duckdb") as store:
        model = ScriptedModel([calls(("t", {})), "done"])
        agent = Agent("a", provider=model, tools=[Tool("t", "d", {"type": "object"}, lambda a: {"k\udcff": "a\ud800"})],
                      recorder=Recorder(store))
        result = asyncio.run(agent.run("go"))
        assert result.status == "answered", result.error
        assert tool_results(model.requests[1])[0]["content"] == '{"k\\udcff": "a\\ud800"}'


def test_what_the_careful_walk_gives_each_kind(tmp_path: Path) -> None:
    """A few kinds by hand, with what the model reads for each (the generator above checks any mix)."""
    from agent.tools import result_text

    stamp = datetime.datetime(2024, 5, 1, 12, 30)
    assert json.loads(result_text({"when": stamp, "id": uuid.UUID(int=1), "cost": decimal.Decimal("1.5"),
                                   "level": Level.HIGH, "gone": decimal.Decimal("NaN")})) == {
        "when": "2024-05-01T12:30:00", "id": "00000000-0000-0000-0000-000000000001", "cost": 1.5, "level": "high",
        "gone": "NaN"}
    assert json.loads(result_text(collections.deque([HalfBroken(), ArrayLike([1])]))) == ["HalfBroken()", [1]]
    assert json.loads(result_text(Box(Model(value=float("inf"))))) == {
        "value": {"value": "Infinity", "ratio": 0.5}, "label": "box"}


def _iterate(values: Iterator[Any]) -> list[Any]:
    return list(values)

"""What a tool returns: its text for the model (agent.tools._results), and the bound on how much of it
the model is shown, with what the recording keeps of a cut result."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import re
from pathlib import Path
from typing import Any

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent import Agent, Tool, tool
from agent.errors import UserError
from agent.providers import ScriptedModel, calls, tool_results
from agent.tools import (
    DEFAULT_MAX_RESULT_CHARS,
    RECORDED_RESULT_CHARS,
    ToolRegistry,
    UnreadableResultError,
    cut_result,
    result_text,
    storable,
)
from agent.tools._results import MAX_DEPTH, MIN_RESULT_CHARS, cut_note
from tracer import Recorder, RedactionPolicy, Store


class Broken:
    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        raise ValueError("no repr")


class Shade(enum.Enum):
    DARK = (1, "dark")


@dataclasses.dataclass
class Node:
    name: str
    child: Any = None


class Model(pydantic.BaseModel):
    name: str
    ratio: float


class ArrayLike:  # what numpy arrays and scalars offer
    def __init__(self, values: list[Any]) -> None:
        self.values = values

    def tolist(self) -> list[Any]:
        return self.values

    def __repr__(self) -> str:
        return f"array({self.values})"


def test_values_json_has_no_form_for_become_json_that_says_what_they_are() -> None:
    cycle: dict[str, Any] = {"name": "root"}
    cycle["self"] = cycle
    looped = Node("a")
    looped.child = looped
    deep: list[Any] = []
    inner = deep
    for _ in range(5000):  # deeper than json.dumps goes: the careful walk marks the 65th level
        inner.append([])
        inner = inner[0]
    assert json.loads(result_text(cycle)) == {"name": "root", "self": "<circular reference to a dict>"}
    assert json.loads(result_text(looped)) == {"name": "a", "child": "<circular reference to a Node>"}
    assert result_text(deep).count("[") == MAX_DEPTH and "nested deeper than 64 levels" in result_text(deep)
    assert json.loads(result_text([math.nan, math.inf, -math.inf, 1.5])) == ["NaN", "Infinity", "-Infinity", 1.5]
    assert json.loads(result_text(Node("x", Broken()))) == {
        "name": "x", "child": "<Broken whose text could not be read>"}
    assert json.loads(result_text(ArrayLike([1, 2.5]))) == [1, 2.5]
    assert json.loads(result_text({"m": Model(name="n", ratio=0.5), "s": Shade.DARK})) == {
        "m": {"name": "n", "ratio": 0.5}, "s": [1, "dark"]}
    assert json.loads(result_text({3, 1, 2})) == [1, 2, 3]  # sorted: the same text in every process
    assert json.loads(result_text({(1, 2): "pair", None: 0, True: 1})) == {"[1, 2]": "pair", "null": 0, "true": 1}
    assert "an integer of about 5,001 digits" in result_text([10**5000])
    assert result_text(b"caf\xc3\xa9 \xff") == "café \\xff"


def test_a_value_with_no_text_at_all_is_an_error_naming_its_type() -> None:
    with pytest.raises(UnreadableResultError, match=r"returned a tests\.agent\.tools\.test_results\.Broken, "
                                                    r"which has no text: its __str__ raised RuntimeError"):
        result_text(Broken())


def test_storable_escapes_lone_surrogates_and_keeps_everything_else() -> None:
    assert storable("a\ud800b\udfff") == "a\\ud800b\\udfff"
    assert storable("émoji 🎉 \x00") == "émoji 🎉 \x00"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=3000), st.integers(MIN_RESULT_CHARS, 2500))
def test_a_cut_is_within_its_bound_keeps_a_head_and_a_tail_and_says_what_it_left_out(text: str, limit: int) -> None:
    cut = cut_result(text, limit)
    if len(text) <= limit:
        assert cut is None
        return
    assert cut is not None
    assert len(cut.text) <= limit and cut.chars == len(text)
    note = cut_note(cut.left_out, len(text))
    head, _, tail = cut.text.partition(note)
    assert head + tail == text[:len(head)] + text[len(text) - len(tail):]
    assert text.startswith(head) and text.endswith(tail) and len(head) + len(tail) + cut.left_out == len(text)
    assert cut.left_out > 0 and len(head) >= len(tail) // 2


_SECRETS = st.sampled_from([
    "sk-" + "A1b2C3d4E5f6G7h8J9k0" * 2, "Bearer eyJhbGciOiJIUzI1NiJ9abcdefghij", "AKIA" + "ABCDEFGHIJKLMNOP",
    '"password": "correct horse battery staple"', "api_key=live_7f3a9c2e1b8d4f60", '"token": "tkn 1 2 3 4 5 6"',
    '"client_secret": {"id": "x", "value": "nested-secret-value"}',
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQ\nMIIEvQIBADAN\n-----END PRIVATE KEY-----",
])
_FILLER = st.text(st.sampled_from("abc xyz,:\n\"{}[]0123456789"), max_size=400)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_FILLER, _SECRETS), min_size=1, max_size=12), st.integers(MIN_RESULT_CHARS, 900))
def test_a_cut_never_leaves_part_of_a_secret_the_policy_would_mask(pieces: list[tuple[str, str]], limit: int) -> None:
    policy = RedactionPolicy()
    text = "".join(f"{filler} {secret} " for filler, secret in pieces)
    cut = cut_result(text, limit, policy)
    stored = policy.text(cut.text if cut is not None else text)
    for _, secret in pieces:
        for fragment in _fragments(secret):
            assert fragment not in stored, (fragment, stored)


_TOKEN_RUN = st.builds(lambda piece, n: (piece * n)[:60_000], st.text(st.sampled_from(
    "ABCxyz019_-"), min_size=1, max_size=12), st.integers(1_000, 60_000))
_PREFIXED = st.sampled_from(["db_password=hunter2hunter2hunter2", "x-api-key: live_7f3a9c2e1b8d4f60aa",
                             'MY_APP_TOKEN="tkn-9f8e7d6c5b4a39281706"'])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(st.tuples(_TOKEN_RUN, _PREFIXED), min_size=1, max_size=3), st.integers(MIN_RESULT_CHARS, 20_000))
def test_a_cut_through_long_tokens_is_quick_and_keeps_prefixed_keys_whole(
        pieces: list[tuple[str, str]], limit: int) -> None:
    """A long run of letters (a base64url blob, a 30,000-character token) made the search for a
    sensitive key quadratic: one cut took minutes. A key spelled with a prefix (db_password,
    x-api-key) still counts from its first letter."""
    policy = RedactionPolicy()
    text = "".join(f"{run}{secret} " for run, secret in pieces)
    cut = cut_result(text, limit, policy)
    stored = policy.text(cut.text if cut is not None else text)
    for _, secret in pieces:
        value = re.split(r"[:=]\s*", secret, maxsplit=1)[1].strip('"')
        for i in range(0, len(value) - 8, 4):
            assert value[i:i + 8] not in stored, (secret, value[i:i + 8])


def _fragments(secret: str) -> list[str]:
    """The parts of a secret that must never be stored: the value, and each 8-character piece of it."""
    value = re.sub(r'^("?[\w\-]+"?\s*[:=]\s*|Bearer |-----BEGIN PRIVATE KEY-----\n)', "", secret)
    value = value.removesuffix("-----END PRIVATE KEY-----").strip('"{} \n')
    if value.startswith("AKIA"):
        value = value[4:]
    core = re.sub(r"[^A-Za-z0-9]", "", value)
    return [core[i:i + 8] for i in range(0, max(len(core) - 8, 1), 4) if len(core[i:i + 8]) == 8
            and not core[i:i + 8].isdigit()]


# ---------------------------------------------------------------------------------------- in a run


def _agent(store: Store, tools: list[Any], replies: list[Any], **options: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(replies)
    return Agent("a", provider=model, tools=tools, recorder=Recorder(store), **options), model


def _tool_stage(store: Store, run_id: str, name: str) -> Any:
    data = store.load_run(run_id)
    stage = next(s for s in data.stages if s.kind == "tool" and s.name == name)
    return data, stage


async def test_a_long_result_reaches_the_model_cut_and_the_recording_keeps_what_was_cut(store: Store) -> None:
    lines = [f"line {n}: {'x' * 40}" for n in range(2000)]

    def logs() -> str:
        """The logs."""
        return "\n".join(lines)

    agent, model = _agent(store, [logs], [calls(("logs", {})), "done"])
    result = await agent.run("show the logs")
    store.flush()
    seen = tool_results(model.requests[1])[0]["content"]
    full = "\n".join(lines)
    assert len(seen) <= DEFAULT_MAX_RESULT_CHARS and seen.startswith("line 0:") and seen.endswith("line 1999: " + "x" * 40)
    left = re.search(r"\[… ([\d,]+) of ([\d,]+) characters of this result left out …\]", seen)
    assert left is not None and int(left.group(2).replace(",", "")) == len(full)
    assert "\n[…" in seen and "…]\n" in seen  # cut at line ends: no line is shown in part
    data, stage = _tool_stage(store, result.run_id, "logs")
    assert stage.attributes["result_cut"] == {"chars": len(full), "shown": len(full) - int(left.group(1).replace(",", "")),
                                              "left_out": int(left.group(1).replace(",", "")),
                                              "limit": DEFAULT_MAX_RESULT_CHARS}
    uncut, shown = (data.items[h] for h in data.outputs[stage.id])
    assert uncut.kind == "text" and uncut.body == {"text": full, "uncut_result_of": stage.attributes["call_id"]}
    assert shown.kind == "tool_result" and shown.body["content"] == seen


async def test_the_tools_bound_comes_before_the_agents_and_none_lifts_the_agents(store: Store) -> None:
    text = "word " * 2000

    @tool(max_result_chars=300)
    def small() -> str:
        """Small."""
        return text

    def plain() -> str:
        """Plain."""
        return text

    agent, model = _agent(store, [small, plain], [calls(("small", {}), ("plain", {})), "done"],
                          max_tool_result_chars=1000)
    await agent.run("go")
    small_seen, plain_seen = (r["content"] for r in tool_results(model.requests[1]))
    assert len(small_seen) <= 300 < len(plain_seen) <= 1000
    unbounded, model = _agent(store, [plain], [calls(("plain", {})), "done"], max_tool_result_chars=None)
    await unbounded.run("go")
    assert tool_results(model.requests[1])[0]["content"] == text


async def test_use_tool_applies_the_bound_of_the_tool_it_reached(store: Store) -> None:
    @tool(max_result_chars=250)
    def catalogue() -> list[str]:
        """The whole catalogue."""
        return [f"item {n}" for n in range(500)]

    agent, model = _agent(store, [catalogue], [calls(("use_tool", {"tool_name": "catalogue"})), "done"],
                          meta_tools=True)
    await agent.run("go")
    seen = tool_results(model.requests[1])[0]["content"]
    assert len(seen) <= 250 and seen.startswith('["item 0", ') and "characters of this result left out" in seen


async def test_a_huge_result_is_recorded_bounded_too(store: Store) -> None:
    agent, _ = _agent(store, [Tool("dump", "d", {"type": "object"}, lambda a: "y " * RECORDED_RESULT_CHARS)],
                          [calls(("dump", {})), "done"])
    result = await agent.run("go")
    store.flush()
    data, stage = _tool_stage(store, result.run_id, "dump")
    uncut = data.items[data.outputs[stage.id][0]]
    assert len(uncut.body["text"]) <= RECORDED_RESULT_CHARS and "characters of this result left out" in uncut.body["text"]
    assert stage.attributes["result_cut"]["chars"] == 2 * RECORDED_RESULT_CHARS


async def test_a_cut_result_keeps_no_secret_in_the_store(store: Store, tmp_path: Path) -> None:
    key = "sk-" + "Z9y8X7w6V5u4T3s2R1q0" * 2
    text = ("a" * 9 + "\n") * 50 + f"api key {key}" + ("\n" + "b" * 9) * 50
    agent, _ = _agent(store, [Tool("leak", "d", {"type": "object"}, lambda a: text)],
                          [calls(("leak", {})), "done"], max_tool_result_chars=MIN_RESULT_CHARS)
    await agent.run("go")
    store.flush()
    store.close()
    assert key[:12].encode() not in (tmp_path / "store.duckdb").read_bytes()
    assert key[-12:].encode() not in (tmp_path / "store.duckdb").read_bytes()


def test_a_bound_below_the_minimum_is_refused_naming_where() -> None:
    with pytest.raises(UserError, match=r"tool t: max_result_chars must be None or an int of at least 200"):
        Tool("t", "d", {"type": "object"}, lambda a: "", max_result_chars=10)
    with pytest.raises(UserError, match=r"agent a: max_tool_result_chars must be None or an int of at least 200"):
        Agent("a", provider=ScriptedModel(["x"]), max_tool_result_chars=0)
    with pytest.raises(UserError, match=r"max_result_chars"):
        tool(name="x", max_result_chars=True)(lambda: "")


def test_the_registry_keeps_a_tools_bound() -> None:
    bounded = Tool("t", "d", {"type": "object"}, lambda a: "", max_result_chars=500)
    assert ToolRegistry([bounded]).get("t").max_result_chars == 500

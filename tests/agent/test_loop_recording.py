"""Every run is recorded: read the store back and check stages, edges, snapshots, origins and drops."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent import Agent, ConversationMemory, Fact, Hooks, InMemoryFacts, PromptComposer, tool
from agent.errors import ProviderServerError
from agent.providers import ModelResponse, Price, ScriptedModel, Usage, calls, cost_of
from tracer import Recorder, RedactionPolicy, RunData, SnapshotEntry, Store


@tool
async def weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: sunny"


@tool
async def broken(city: str) -> str:
    """Always fails."""
    raise RuntimeError("backend down")



def load(store: Store, run_id: str) -> RunData:
    store.flush()
    return store.load_run(run_id)


def stages_of(data: RunData) -> list[tuple[str, str, str]]:
    return [(s.kind, s.name, s.status) for s in sorted(data.stages, key=lambda s: s.seq)]


def stage_id(data: RunData, kind: str, nth: int = 0) -> str:
    return [s.id for s in sorted(data.stages, key=lambda s: s.seq) if s.kind == kind][nth]


def snapshot(data: RunData, sid: str, *, dropped: bool = False) -> list[tuple[str, str, str | None, str | None]]:
    """(item kind, origin kind, origin source, producing stage kind) per included (or dropped) entry."""
    kinds = {s.id: s.kind for s in data.stages}
    entries: list[SnapshotEntry] = data.snapshot(sid, include_dropped=True)
    def producer(e: SnapshotEntry) -> str | None:
        if e.origin.stage_id is None:
            return None
        return kinds.get(e.origin.stage_id, "other run")

    return [(data.items[e.item_hash].kind, e.origin.kind, e.origin.source, producer(e))
            for e in entries if e.included != dropped]


async def test_a_run_is_recorded_stage_by_stage_with_origins(store: Store) -> None:
    model = ScriptedModel([
        calls(("weather", {"city": "Oslo"}, "c1"), ("weather", {"city": "Rome"}, "c2")),
        ModelResponse("Sunny in both.", usage=Usage(1000, 50, 200), model="gpt-4o-mini"),
    ])
    facts = InMemoryFacts({"u1": [Fact("profile.city", "The user lives in Oslo.")]})
    agent = Agent("assistant", provider=model, tools=[weather], facts=facts, user_id="u1", session_id="sess",
                  recorder=Recorder(store))
    result = await agent.run("Weather in Oslo and Rome?")
    data = load(store, result.run_id)

    run = data.run
    assert (run.status, run.input, run.output, run.session_id, run.agent) == (
        "answered", "Weather in Oslo and Rome?", "Sunny in both.", "sess", "assistant")
    assert (run.tokens_in, run.tokens_out) == (result.usage.input_tokens, result.usage.output_tokens)
    assert run.model == "gpt-4o-mini"
    assert run.cost == pytest.approx(cost_of("gpt-4o-mini", result.usage)) and run.cost > 0
    assert run.attributes["stop_reason"] == "answered" and run.attributes["tool_calls"] == 2

    assert stages_of(data) == [
        ("input", "user message", "ok"), ("memory", "memory load", "ok"), ("prompt", "prompt composition", "ok"),
        ("inference", "turn 1", "ok"), ("tool_batch", "2 tool call(s)", "ok"), ("tool", "weather", "ok"),
        ("tool", "weather", "ok"), ("inference", "turn 2", "ok"), ("answer", "answer", "ok"),
    ]
    ids = {(s.kind, n): s.id for n, s in enumerate(sorted(data.stages, key=lambda s: s.seq))}
    edges = {(e.src, e.dst, e.kind) for e in data.edges}
    batch, tool_a, tool_b = ids[("tool_batch", 4)], ids[("tool", 5)], ids[("tool", 6)]
    assert edges == {
        (ids[("input", 0)], ids[("memory", 1)], "next"), (ids[("memory", 1)], ids[("prompt", 2)], "next"),
        (ids[("prompt", 2)], ids[("inference", 3)], "next"), (ids[("inference", 3)], batch, "next"),
        (batch, tool_a, "fork"), (batch, tool_b, "fork"),
        (tool_a, ids[("inference", 7)], "join"), (tool_b, ids[("inference", 7)], "join"),
        (ids[("inference", 7)], ids[("answer", 8)], "next"),
    }
    assert {s.parent_id for s in data.stages if s.kind == "tool"} == {batch}

    # the first inference's snapshot: every item with where it came from
    assert snapshot(data, ids[("inference", 3)]) == [
        ("prompt_section", "prompt_section", "base", "prompt"),
        ("prompt_section", "prompt_section", "user_profile", "prompt"),
        ("memory", "memory", "profile.city", "memory"),
        ("prompt_section", "prompt_section", "tools", "prompt"),
        ("user", "user", "input", "input"),
        ("tool_definition", "config", "tool:weather", None),
        ("settings", "config", "settings", None),
    ]
    # the second adds the calls (from the first inference) and their results (from the tool stages)
    second = snapshot(data, ids[("inference", 7)])
    assert second[5:9] == [
        ("tool_call", "stage", None, "inference"), ("tool_call", "stage", None, "inference"),
        ("tool_result", "stage", None, "tool"), ("tool_result", "stage", None, "tool"),
    ]
    results = [data.items[e.item_hash].body for e in data.snapshot(ids[("inference", 7)])
               if data.items[e.item_hash].kind == "tool_result"]
    assert [r["call_id"] for r in results] == ["c1", "c2"]
    second_inference = data.stage(ids[("inference", 7)])
    assert second_inference.attributes["input_tokens"] == 1000 and second_inference.attributes["cost"] > 0
    assert data.stage(tool_a).attributes["call_id"] == "c1"

    # the same, through the documented SQL view
    rows = store.query(
        "SELECT kind, origin_kind, origin_source FROM context WHERE stage_id = ? AND included ORDER BY position",
        [ids[("inference", 3)]],
    )
    assert rows[2] == ("memory", "memory", "profile.city") and rows[4] == ("user", "user", "input")


async def test_what_the_window_and_the_cap_left_out_is_recorded_as_dropped(store: Store) -> None:
    model = ScriptedModel(["a" * 80, "ok"])
    agent = Agent("a", provider=model, recorder=Recorder(store), memory=ConversationMemory(max_tokens=20),
                  capabilities=["c" * 300], composer=PromptComposer(max_length=200))
    first = await agent.run("q" * 40)
    second = await agent.run("second question")
    data = load(store, second.run_id)
    inference = stage_id(data, "inference")
    dropped = snapshot(data, inference, dropped=True)
    assert dropped == [
        ("prompt_section", "prompt_section", "capabilities", "prompt"),
        ("user", "user", "input", "other run"),
        ("assistant", "stage", None, "other run"),
    ]
    reasons = [e.dropped_by for e in data.snapshot(inference, include_dropped=True) if not e.included]
    assert reasons == ["prompt_length_cap", "memory_window", "memory_window"]
    history = [e for e in data.snapshot(inference, include_dropped=True) if e.origin.run_id == first.run_id]
    assert history and all(not e.included for e in history)  # the window dropped the first run's messages
    assert store.query("SELECT count(*) FROM context WHERE stage_id = ? AND NOT included", [inference]) == [(3,)]


async def test_tool_errors_and_provider_errors_are_error_stages(store: Store) -> None:
    model = ScriptedModel([calls(("broken", {"city": "Oslo"})),
                           ProviderServerError("upstream 503", provider="scripted", status=503)])
    result = await Agent("a", provider=model, tools=[broken], recorder=Recorder(store)).run("go")
    data = load(store, result.run_id)
    assert data.run.status == "failed" and data.run.error == "ProviderServerError: upstream 503"
    assert stages_of(data)[2:] == [
        ("inference", "turn 1", "ok"), ("tool_batch", "1 tool call(s)", "ok"), ("tool", "broken", "error"),
        ("inference", "turn 2", "error"), ("error", "provider_error", "ok"),
    ]
    tool_stage = data.stage(stage_id(data, "tool"))
    assert tool_stage.attributes["error_type"] == "RuntimeError" and tool_stage.attributes["is_error"] is True
    assert data.items[data.outputs[tool_stage.id][0]].body["content"] == "Error: broken failed: RuntimeError: backend down"
    failed_inference = data.stage(stage_id(data, "inference", 1))
    assert failed_inference.error == "ProviderServerError: upstream 503"
    error = data.stage(stage_id(data, "error"))
    assert error.attributes["reason"] == "provider_error"
    assert (failed_inference.id, error.id, "next") in {(e.src, e.dst, e.kind) for e in data.edges}


async def test_a_limit_is_an_error_stage_and_unrun_calls_get_results(store: Store) -> None:
    model = ScriptedModel([calls(("weather", {"city": "A"}), ("weather", {"city": "B"}))])
    result = await Agent("a", provider=model, tools=[weather], recorder=Recorder(store), max_tool_calls=1).run("go")
    data = load(store, result.run_id)
    assert data.run.status == "failed" and data.run.attributes["stop_reason"] == "max_tool_calls"
    assert stages_of(data)[-1] == ("error", "max_tool_calls", "ok")
    error = stage_id(data, "error")
    outputs = [data.items[h] for h in data.outputs[error]]
    assert [o.kind for o in outputs] == ["tool_result", "tool_result", "text"]
    assert outputs[-1].text == result.error
    assert [k for k, *_ in snapshot(data, error)] == ["tool_call", "tool_call"]


async def test_a_cancelled_run_is_recorded_as_cancelled(store: Store) -> None:
    entered = asyncio.Event()

    @tool(timeout=None)
    async def slow() -> str:
        """Slow."""
        entered.set()
        await asyncio.sleep(30)
        return "late"

    agent = Agent("a", provider=ScriptedModel([calls(("slow", {}))]), tools=[slow], recorder=Recorder(store))
    task = asyncio.create_task(agent.run("go"))
    await entered.wait()
    agent.cancel()
    result = await task
    data = load(store, result.run_id)
    assert data.run.status == "cancelled"
    assert stages_of(data)[2:] == [
        ("inference", "turn 1", "ok"), ("tool_batch", "1 tool call(s)", "cancelled"), ("tool", "slow", "cancelled"),
        ("error", "cancelled", "ok"),
    ]
    cancelled_tool = stage_id(data, "tool")
    assert data.items[data.outputs[cancelled_tool][0]].body["content"] == "Error: cancelled before it finished."


async def test_a_failing_hook_is_recorded_with_the_run(store: Store) -> None:
    def broken_hook(ctx: Any, *args: Any) -> None:
        raise RuntimeError("observer bug")

    agent = Agent("a", provider=ScriptedModel(["ok"]), recorder=Recorder(store),
                  hooks=Hooks(after_inference=broken_hook))
    result = await agent.run("go")
    data = load(store, result.run_id)
    assert data.run.status == "answered"
    assert data.run.attributes["hook_errors"] == ["after_inference: RuntimeError: observer bug"]


async def test_sync_durability_and_the_price_table(store: Store) -> None:
    model = ScriptedModel([ModelResponse("hi", usage=Usage(1_000_000, 1_000_000), model="house-model")])
    agent = Agent("a", provider=model, recorder=Recorder(store, durability="sync"),
                  prices={"house-model": Price(1.0, 3.0)})
    result = await agent.run("go")
    assert result.cost == pytest.approx(4.0)
    # sync: everything is committed before run() returns, no flush needed
    assert store.query("SELECT status, cost FROM runs WHERE id = ?", [result.run_id]) == [("answered", 4.0)]


async def test_secrets_in_stage_attributes_are_redacted(store: Store) -> None:
    @tool
    async def login(user: str, password: str) -> str:
        """Log in."""
        return "ok"

    secret = "sk-" + "a1b2c3d4" * 4
    model = ScriptedModel([calls(("login", {"user": "maya", "password": secret}, "c1")), "in"])
    hooks = Hooks(on_tool_start=lambda ctx, call: None)
    agent = Agent("a", provider=model, tools=[login], recorder=Recorder(store), hooks=hooks)
    result = await agent.run("log me in")
    data = load(store, result.run_id)
    tool_stage = data.stage(stage_id(data, "tool"))
    assert secret not in tool_stage.attributes["arguments"] and "[REDACTED]" in tool_stage.attributes["arguments"]
    assert tool_stage.attributes["call_id"] == "c1" and tool_stage.attributes["is_error"] is False
    assert store.query("SELECT count(*) FROM stages WHERE contains(attributes, ?)", [secret]) == [(0,)]


_attribute_values = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30) | \
    st.sampled_from(["sk-" + "x" * 20, "Bearer " + "y" * 20]) | st.lists(st.integers(), max_size=2)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["model", "arguments", "password", "Token", "turn", "call_id"]),
                       _attribute_values, max_size=5))
def test_stage_attributes_are_stored_as_the_redaction_policy_says(attributes: dict[str, Any]) -> None:
    """The stored text reads back as the masked attributes (a flat object is written compactly)."""
    policy = RedactionPolicy()
    expected = json.dumps(policy.value(attributes), default=str)
    assert json.loads(policy.json_text(attributes)) == json.loads(expected)

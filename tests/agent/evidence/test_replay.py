"""Replay: recorded outputs and tool results served back into the real loop; no model, no tool runs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent import ConversationMemory, tool
from agent.errors import ReplayMismatchError
from agent.evidence import NotReplayableError, replay
from agent.providers import ModelRequest, ScriptedModel, calls
from agent.providers._demo import OfflineDemoModel
from tracer import Item, Recorder, Store, compare_runs


async def test_every_demo_run_replays_exactly_without_calling_the_model(
    store: Store, demo: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    called: list[ModelRequest] = []

    async def refuse(self: OfflineDemoModel, request: ModelRequest) -> Any:
        called.append(request)
        raise AssertionError("the replay called the model")

    monkeypatch.setattr(OfflineDemoModel, "complete", refuse)
    for original in demo.results:
        result = await replay(store, original.run_id)
        assert result.identical, result.divergence.reason
        assert (result.status, result.answer) == (original.status, original.answer)
        assert result.model_calls == original.turns
        replayed = store.get_run(result.run_id)
        assert replayed.forked_from_run == original.run_id
        assert "replay" in replayed.labels and "offline-demo" in replayed.labels
    assert called == []
    # the third run made two calls in one parallel batch; both results were served
    third = store.load_run(demo.results[2].run_id)
    assert sum(1 for s in third.stages if s.kind == "tool") == 2


async def test_replay_serves_recorded_tool_results_and_executes_nothing(
    store: Store, make_agent: Any, counter: Any
) -> None:
    agent = make_agent()
    await agent.run("I moved to Lisbon")
    original = await agent.run("Weather at home, and also Paris?")  # second run of the session: history
    assert original.answer == "Berlin: rain. Paris: sun."
    assert len(counter.runs) == 2
    result = await replay(store, original.run_id)
    assert len(counter.runs) == 2  # nothing ran again
    assert result.identical and result.answer == original.answer
    assert result.tool_calls == 2


async def test_a_request_that_differs_from_the_recording_stops_the_replay_naming_the_stage(
    store: Store, make_agent: Any
) -> None:
    original = await make_agent().run("Weather at home?")
    store.flush()
    data = store.load_run(original.run_id)
    tool_stage = next(s for s in data.stages if s.kind == "tool")
    second = data.inferences()[1]
    # tamper with the recorded tool result: the replay feeds it back, so turn 2's request changes
    with store.cursor() as cur:
        cur.execute("INSERT INTO fp_item VALUES ('feedface', 'tool_result', 'x', ?)",
                    ['{"call_id":"call_Berlin","content":"{\\"city\\": \\"Berlin\\", \\"sky\\": \\"snow\\"}",'
                     '"is_error":false,"name":"weather"}'])
        cur.execute("UPDATE fp_stage SET outputs = 'feedface' WHERE id = ?", [tool_stage.id])
    with pytest.raises(ReplayMismatchError) as caught:
        await replay(store, original.run_id)
    assert caught.value.stage == second.id
    assert "turn 2" in str(caught.value) and "snow" in caught.value.difference


async def test_replay_reproduces_the_memory_window_and_tool_errors(store: Store) -> None:
    @tool
    async def flaky(n: int) -> str:
        """Fails.

        Args:
            n: a number
        """
        raise RuntimeError(f"boom {n}")

    model = ScriptedModel([calls(("flaky", {"n": 1}, "c1")), "it failed", "ok", calls(("flaky", {"n": 2}, "c2")),
                           "failed again"])
    from agent import Agent

    agent = Agent("w", provider=model, tools=[flaky], memory=ConversationMemory(max_tokens=40),
                  recorder=Recorder(store), session_id="window")
    await agent.run("first question, long enough to be dropped later " * 2)
    await agent.run("second")
    last = await agent.run("third")
    store.flush()
    dropped = [e for es in store.load_run(last.run_id).inputs.values() for e in es if not e.included]
    assert dropped and all(e.dropped_by == "memory_window" for e in dropped)
    result = await replay(store, last.run_id)
    assert result.identical, result.divergence.reason
    error_stage = next(s for s in store.load_run(result.run_id).stages if s.kind == "tool")
    assert error_stage.attributes["error_type"] == "RuntimeError"


async def test_a_resumed_run_is_not_replayable(store: Store) -> None:
    run = Recorder(store).start_run(agent="p", input="go")
    with run.stage("input") as first:
        first.output(Item.of_text("user", "go"), origin_kind="user", source="input")
    with run.stage("resume", after=[first]) as resumed:
        resumed.output(Item.of_text("user", "yes"), origin_kind="user", source="decision")
    run.end("answered", output="done")
    with pytest.raises(NotReplayableError, match="resumed"):
        await replay(store, run.id)


async def test_a_run_without_a_model_call_is_not_replayable(store: Store) -> None:
    run = Recorder(store).start_run(agent="p", input="go")
    run.end("failed", error="nothing happened")
    with pytest.raises(NotReplayableError, match="no model call"):
        await replay(store, run.id)


async def test_replay_comparison_is_identical_for_a_two_turn_run(store: Store, make_agent: Any) -> None:
    original = await make_agent().run("Weather at home?")
    result = await replay(store, original.run_id)
    comparison = compare_runs(store, original.run_id, result.run_id)
    assert comparison.first_divergence is None and comparison.same_answer
    assert [p.change for p in comparison.stages] == ["same"] * len(comparison.stages)


async def test_a_tool_with_a_password_parameter_replays(store: Store) -> None:
    """The recorded definition keeps its parameters' schema: masking the schema of a parameter named
    'password' or 'api_key' broke it, and the replay refused the tool ("'[REDACTED]' is not of type
    'object'"). The password the model passed is still masked."""
    from agent import Agent, Tool

    async def login(arguments: dict[str, Any]) -> str:
        return f"welcome {arguments['username']}"

    schema = {"type": "object", "properties": {"username": {"type": "string"}, "password": {"type": "string"},
                                               "api_key": {"type": "string"}}, "required": ["username"]}
    model = ScriptedModel([calls(("login", {"username": "ada", "password": "hunter2-hunter2"}, "c1")), "in"])
    agent = Agent("l", provider=model, tools=[Tool("login", "Log in.", schema, login)], recorder=Recorder(store))
    original = await agent.run("log me in")
    store.flush()
    items = store.load_run(original.run_id).items.values()
    assert next(i for i in items if i.kind == "tool_definition").body["parameters"] == schema
    assert all("hunter2-hunter2" not in json.dumps(i.body) for i in items)
    result = await replay(store, original.run_id)
    assert result.identical, result.divergence.reason

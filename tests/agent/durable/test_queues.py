"""Steering and send queues: FIFO, the two modes, steering before sending, drained only between inferences."""

from __future__ import annotations

import asyncio

import pytest

from agent import tool
from agent.durable import InMemoryPersistence
from agent.durable.errors import PersistenceError
from agent.providers import FunctionModel, ModelRequest, ModelResponse, calls
from tests.agent.durable.durablekit import FlakyPersistence, Gate, records, session, texts, values


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def tooling_model(gate: Gate | None = None) -> tuple[FunctionModel, list[list[str]]]:
    """Calls ``lookup`` for a user message starting with 'look', answers anything else; records each
    request's user messages (what the model saw)."""
    seen: list[list[str]] = []

    async def answer(request: ModelRequest) -> str | ModelResponse:
        users = [ci.text for ci in request.context if ci.item.kind == "user"]
        seen.append(users)
        if gate is not None and len(seen) == 1:
            await gate.wait()
        newest = [ci for ci in request.context if ci.item.kind in ("user", "tool_result")][-1]
        if newest.item.kind == "user" and newest.text.startswith("look"):
            return calls(("lookup", {"q": newest.text}))
        return f"re: {request.last_user_text()}"

    return FunctionModel(answer), seen


async def test_steering_joins_after_the_tool_batch_one_at_a_time() -> None:
    gate = Gate()
    model, seen = tooling_model(gate)
    agent = session(llm=model, tools=[lookup])
    await agent.send("look up paris")
    await gate.entered.wait()
    await agent.steer("first steer")
    await agent.steer("second steer")
    gate.opened.set()
    await agent.wait_for_idle()
    # inference 2 sees the batch's result and only the oldest steering message
    assert seen[1] == ["look up paris", "first steer"]
    assert seen[2] == ["look up paris", "first steer", "second steer"]
    kinds = [k for k, _ in texts(agent)]
    assert kinds == ["user", "tool_call", "tool_result", "user", "assistant", "user", "assistant"]


async def test_steering_all_injects_every_queued_message_before_one_response() -> None:
    gate = Gate()
    model, seen = tooling_model(gate)
    agent = session(llm=model, tools=[lookup], steering_mode="all")
    await agent.send("look up paris")
    await gate.entered.wait()
    await agent.steer("a")
    await agent.steer("b")
    await agent.steer("c")
    gate.opened.set()
    await agent.wait_for_idle()
    assert len(seen) == 2
    assert seen[1] == ["look up paris", "a", "b", "c"]


async def test_send_waits_until_the_agent_would_stop() -> None:
    gate = Gate()
    model, seen = tooling_model(gate)
    agent = session(llm=model, tools=[lookup])
    await agent.send("look up rome")
    await gate.entered.wait()
    await agent.send("later one")
    await agent.send("later two")
    gate.opened.set()
    await agent.wait_for_idle()
    # the sent messages did not join between the batch and the next inference
    assert seen[1] == ["look up rome"]
    assert seen[2] == ["look up rome", "later one"]
    assert seen[3] == ["look up rome", "later one", "later two"]


async def test_send_all_injects_every_sent_message_together() -> None:
    gate = Gate()
    model, seen = tooling_model(gate)
    agent = session(llm=model, tools=[lookup], send_mode="all")
    await agent.send("look up rome")
    await gate.entered.wait()
    await agent.send("x")
    await agent.send("y")
    gate.opened.set()
    await agent.wait_for_idle()
    assert seen[2] == ["look up rome", "x", "y"]
    assert len(seen) == 3


async def test_steering_takes_precedence_over_sending() -> None:
    gate = Gate()
    model, seen = tooling_model(gate)
    agent = session(llm=model)
    await agent.send("first")
    await gate.entered.wait()
    await agent.send("sent early")
    await agent.steer("steered late")
    gate.opened.set()
    await agent.wait_for_idle()
    assert [s[-1] for s in seen] == ["first", "steered late", "sent early"]


async def test_steer_returns_once_the_queue_write_lands() -> None:
    gate = Gate()
    model, _ = tooling_model(gate)
    persistence = InMemoryPersistence()
    agent = session(persistence, model)
    key = await agent.send("hold")
    assert key.startswith("send.")
    await gate.entered.wait()
    k2 = await agent.steer("queued")
    # durable before anything consumed it, and not in the conversation's records yet
    assert [k for k, _ in await values(persistence, "steering.")] == [k2]
    assert all(r.body["item"]["body"].get("text") != "queued" for r in await records(persistence))
    gate.opened.set()
    await agent.wait_for_idle()
    assert await values(persistence, "steering.") == []
    assert await values(persistence, "send.") == []


async def test_a_failed_queue_write_keeps_the_message_out() -> None:
    persistence = FlakyPersistence()
    agent = session(persistence)
    persistence.fail = {"write_value"}
    with pytest.raises(PersistenceError, match="queueing a send message failed"):
        await agent.send("lost on purpose")
    persistence.fail = set()
    await agent.send("kept")
    await agent.wait_for_idle()
    assert [t for k, t in texts(agent) if k == "user"] == ["kept"]


async def test_queue_keys_sort_in_append_order() -> None:
    persistence = InMemoryPersistence()
    agent = session(persistence, FunctionModel(lambda r: asyncio.sleep(10)))  # never answers in time
    keys = [await agent.send(f"m{i}") for i in range(50)]
    assert keys == sorted(keys)
    stored = [v["text"] for _, v in await values(persistence, "send.")]
    # the oldest may already be in the turn; what waits is the rest, in the order sent
    assert stored == [f"m{i}" for i in range(50 - len(stored), 50)]
    assert len(stored) >= 49
    await agent.abort()


async def test_empty_message_is_refused_with_the_session_named() -> None:
    agent = session()
    with pytest.raises(ValueError, match="session s1: a steering message needs non-empty text"):
        await agent.steer("  ")

"""abort(): the turn stops, finished blocks stay, running calls settle as errors, queues stay durable."""

from __future__ import annotations

import asyncio
from typing import Any

from agent import Tool
from agent.durable import InMemoryPersistence, TurnDone
from agent.providers import FunctionModel, ModelRequest, ScriptedModel, calls
from tests.agent.durable.durablekit import Gate, records, session, texts, values


async def test_abort_when_idle_is_a_no_op() -> None:
    agent = session()
    await agent.abort()
    await agent.send("hi")
    await agent.wait_for_idle()
    await agent.abort()
    assert texts(agent)[-1][0] == "assistant"


async def test_abort_during_inference_drops_the_unfinished_response_and_keeps_queues() -> None:
    gate = Gate()

    async def answer(request: ModelRequest) -> str:
        await gate.wait()
        return "never"

    persistence = InMemoryPersistence()
    agent = session(persistence, FunctionModel(answer))
    done: list[TurnDone] = []
    agent.listeners.append(lambda e: done.append(e) if isinstance(e, TurnDone) else None)
    await agent.send("first")
    await gate.entered.wait()
    await agent.send("waiting")
    await agent.abort()
    assert not agent.busy
    assert done[-1].state == "cancelled"
    assert texts(agent) == [("user", "first")]
    assert [v["text"] for _, v in await values(persistence, "send.")] == ["waiting"]
    gate.opened.set()
    await agent.steer("go on")  # the next requested turn picks up the waiting message too
    await agent.wait_for_idle()
    assert [t for k, t in texts(agent) if k == "user"] == ["first", "go on", "waiting"]


async def test_abort_settles_running_calls_as_errors_and_consumes_their_keys() -> None:
    gate = Gate()
    finished: list[str] = []

    async def slow(args: dict[str, Any]) -> str:
        if args.get("slow"):
            await gate.wait()
        finished.append(str(args))
        return "done"

    persistence = InMemoryPersistence()
    tool = Tool("work", "Works.", {"type": "object"}, slow, timeout=None)
    agent = session(persistence, ScriptedModel([calls(("work", {}), ("work", {"slow": True})), "after"]),
                    tools=[tool])
    await agent.send("go")
    await gate.entered.wait()
    await asyncio.sleep(0.01)  # the quick call finished; its result waits for nothing
    await agent.abort()
    results = [ci.item.body for ci in agent.history if ci.item.kind == "tool_result"]
    assert [(r["content"], r["is_error"]) for r in results] == [
        ("done", False), ("Error: cancelled before it finished.", True)]
    stored = [r.body["item"]["body"]["is_error"] for r in await records(persistence) if r.kind == "tool"]
    assert stored == [False, True]
    assert await values(persistence, "tool.") == []
    assert len(finished) == 1

"""The agent pool: bounded, least recently used evicted, a running session never evicted."""

from __future__ import annotations

import asyncio
from typing import Any

from agent import Agent, Tool
from agent.providers import FunctionModel, ModelRequest
from hosting import InMemorySessions, standing_agent
from tests.hosting.hostkit import make_agent


def _closing_tool(closed: list[tuple[int, str]], index: int) -> Tool:
    async def execute(_: dict[str, Any]) -> str:
        return "ok"

    def close(reason: str) -> None:
        closed.append((index, reason))

    return Tool("noop", "Does nothing.", {"type": "object", "properties": {}}, execute, close=close)


async def test_least_recently_used_idle_instance_is_evicted_with_its_tools_closed() -> None:
    closed: list[tuple[int, str]] = []
    built: list[Agent] = []

    def build() -> Agent:
        agent = make_agent(tools=[_closing_tool(closed, len(built))])
        built.append(agent)
        return agent

    host = standing_agent(agent_factory=build, max_active_sessions=2)
    await host.handle("a1", session_id="a")  # instance 0
    await host.handle("b1", session_id="b")  # instance 1
    await host.handle("a2", session_id="a")  # a is now the most recently used
    await host.handle("c1", session_id="c")  # instance 2: b is evicted
    await asyncio.sleep(0)  # evictions close in the background
    assert host.pool is not None
    assert [s.key for s in host.pool.slots()] == ["a", "c"]
    assert closed == [(1, "evicted")]
    await host.close()
    assert sorted(closed) == [(0, "closed"), (1, "evicted"), (2, "closed")]


async def test_eviction_never_ends_a_running_turn() -> None:
    release = asyncio.Event()
    entered = asyncio.Event()

    async def answer(request: ModelRequest) -> str:
        if request.last_user_text() == "slow":
            entered.set()
            await release.wait()
        return f"done: {request.last_user_text()}"

    closed: list[tuple[int, str]] = []
    built: list[Agent] = []

    def build() -> Agent:
        agent = make_agent(FunctionModel(answer), tools=[_closing_tool(closed, len(built))])
        built.append(agent)
        return agent

    host = standing_agent(agent_factory=build, max_active_sessions=1)
    slow = asyncio.ensure_future(host.handle("slow", session_id="runner"))
    await entered.wait()
    # ten other sessions come and go while "runner" is mid-turn with the pool bound at one
    for i in range(10):
        assert (await host.handle("quick", session_id=f"s{i}")).answer == "done: quick"
    assert host.pool is not None and "runner" in host.pool
    assert (0, "evicted") not in closed
    release.set()
    reply = await slow
    assert (reply.status, reply.answer) == ("answered", "done: slow")
    await asyncio.sleep(0)
    assert len(host.pool) == 1  # the bound is restored once the turn is over
    await host.close()


async def test_an_evicted_session_rehydrates_with_nothing_lost() -> None:
    sessions = InMemorySessions()
    built: list[Agent] = []

    def build() -> Agent:
        built.append(make_agent())
        return built[-1]

    host = standing_agent(agent_factory=build, sessions=sessions, max_active_sessions=1)
    assert (await host.handle("one", session_id="alice")).answer == "echo #1: one"
    assert (await host.handle("two", session_id="alice")).answer == "echo #2: two"
    await host.handle("hi", session_id="bob")  # evicts alice
    assert host.pool is not None and "alice" not in host.pool
    reply = await host.handle("three", session_id="alice")  # a fresh instance, the same conversation
    assert reply.answer == "echo #3: three"
    assert len(built) == 3
    envelope = await sessions.load("alice")
    assert envelope is not None
    assert [m.item.text for m in envelope.conversation_obj().messages] == [
        "one", "echo #1: one", "two", "echo #2: two", "three", "echo #3: three",
    ]
    await host.close()


async def test_idle_instances_hold_no_conversation() -> None:
    host = standing_agent(agent_factory=make_agent, max_active_sessions=10)
    for i in range(5):
        await host.handle("hello", session_id=f"s{i}")
    assert host.pool is not None
    for slot in host.pool.slots():
        assert f"s{slot.key}" not in slot.agent.memory.ids() and slot.key not in slot.agent.memory.ids()
    await host.close()


async def test_the_instance_idle_longest_is_evicted_not_the_one_started_first() -> None:
    release = asyncio.Event()
    entered = asyncio.Event()

    async def answer(request: ModelRequest) -> str:
        if request.last_user_text() == "slow":
            entered.set()
            await release.wait()
        return "done"

    host = standing_agent(agent_factory=lambda: make_agent(FunctionModel(answer)), max_active_sessions=2)
    slow = asyncio.ensure_future(host.handle("slow", session_id="a"))  # a starts first...
    await entered.wait()
    await host.handle("quick", session_id="b")  # ...b starts later, but is idle first
    release.set()
    await slow
    await host.handle("quick", session_id="c")
    assert host.pool is not None
    assert [s.key for s in host.pool.slots()] == ["a", "c"]
    assert host.pool.evictions == 1
    await host.close()

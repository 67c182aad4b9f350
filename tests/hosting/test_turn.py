"""Durability: what is persisted when, under `exit` and `sync`, and versioned saves between hosts."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent import Tool
from agent.providers import FunctionModel, ModelRequest, calls
from hosting import Envelope, InMemorySessions, SessionBusyError, VersionConflictError, standing_agent
from tests.hosting.hostkit import make_agent
from tracer import Durability, Recorder, Store


def _peeking_model() -> FunctionModel:
    def answer(request: ModelRequest) -> Any:
        results = [ci.item.body["content"] for ci in request.context if ci.item.kind == "tool_result"]
        return calls(("peek", {}, "call-peek")) if not results else f"saw: {results[0]}"

    return FunctionModel(answer)


def _peek_tool(sessions: InMemorySessions, seen: list[Envelope | None]) -> Tool:
    async def execute(_: dict[str, Any]) -> str:
        seen.append(await sessions.load("alice"))
        return "peeked"

    return Tool("peek", "Look at the stored session.", {"type": "object", "properties": {}}, execute)


async def test_sync_persists_the_inference_before_the_tool_runs() -> None:
    sessions = InMemorySessions()
    seen: list[Envelope | None] = []
    host = standing_agent(agent_factory=lambda: make_agent(_peeking_model(), tools=[_peek_tool(sessions, seen)]),
                          sessions=sessions, durability="sync")
    reply = await host.handle("look", session_id="alice")
    assert reply.answer == "saw: peeked"
    mid = seen[0]
    assert mid is not None
    assert mid.turn is not None and mid.turn["state"] == "running" and mid.turn["run_id"] == reply.run_id
    assert [m.item.kind for m in mid.conversation_obj().messages] == ["user", "tool_call"]
    final = await sessions.load("alice")
    assert final is not None and final.turn is not None and final.turn["state"] == "done"
    assert [m.item.kind for m in final.conversation_obj().messages] == ["user", "tool_call", "tool_result", "assistant"]
    assert final.tool_results == {}
    await host.close()


async def test_exit_persists_only_when_the_run_ends() -> None:
    sessions = InMemorySessions()
    seen: list[Envelope | None] = []
    host = standing_agent(agent_factory=lambda: make_agent(_peeking_model(), tools=[_peek_tool(sessions, seen)]),
                          sessions=sessions, durability="exit")
    await host.handle("look", session_id="alice")
    assert seen == [None]
    final = await sessions.load("alice")
    assert final is not None and final.version == 1
    await host.close()


async def test_sync_keeps_a_finished_tool_result_before_its_batch_joins() -> None:
    sessions = InMemorySessions()
    release = asyncio.Event()
    b_started = asyncio.Event()

    async def fast(_: dict[str, Any]) -> str:
        return "fast result"

    async def slow(_: dict[str, Any]) -> str:
        b_started.set()
        await release.wait()
        return "slow result"

    def answer(request: ModelRequest) -> Any:
        if not any(ci.item.kind == "tool_result" for ci in request.context):
            return calls(("fast", {}, "call-a"), ("slow", {}, "call-b"))
        return "both done"

    schema = {"type": "object", "properties": {}}
    tools = [Tool("fast", "Fast.", schema, fast), Tool("slow", "Slow.", schema, slow)]
    host = standing_agent(agent_factory=lambda: make_agent(FunctionModel(answer), tools=tools),
                          sessions=sessions, durability="sync")
    turn = asyncio.ensure_future(host.handle("go", session_id="alice"))
    await b_started.wait()
    for _ in range(100):
        mid = await sessions.load("alice")
        if mid is not None and mid.tool_results:
            break
        await asyncio.sleep(0.01)
    assert mid is not None and mid.tool_results == {"call-a": {"content": "fast result", "is_error": False,
                                                               "name": "fast"}}
    release.set()
    assert (await turn).answer == "both done"
    await host.close()


async def test_sync_makes_the_recorder_sync_too(store: Store) -> None:
    recorder = Recorder(store, durability=Durability.EXIT)
    host = standing_agent(agent_factory=lambda: make_agent(recorder=recorder), durability="sync")
    await host.handle("hello", session_id="alice")
    assert recorder.durability is Durability.SYNC
    await host.close()


async def test_two_hosts_on_one_store_never_silently_overwrite() -> None:
    sessions = InMemorySessions()
    release = asyncio.Event()
    entered = asyncio.Event()

    async def slow(request: ModelRequest) -> str:
        entered.set()
        await release.wait()
        return "slow answer"

    slow_host = standing_agent(agent_factory=lambda: make_agent(FunctionModel(slow)), sessions=sessions)
    quick_host = standing_agent(agent_factory=make_agent, sessions=sessions)
    await quick_host.handle("first", session_id="alice")
    held = asyncio.ensure_future(slow_host.handle("from host one", session_id="alice"))
    await entered.wait()
    await quick_host.handle("from host two", session_id="alice")  # both loaded version 1
    release.set()
    with pytest.raises(VersionConflictError, match="'alice'"):
        await held
    stored = await sessions.load("alice")
    assert stored is not None and stored.version == 2
    users = [m.item.text for m in stored.conversation_obj().messages if m.item.kind == "user"]
    assert users == ["first", "from host two"]
    await slow_host.close()
    await quick_host.close()


async def test_on_a_shared_store_a_turn_running_on_another_host_is_refused_until_it_ends() -> None:
    sessions = InMemorySessions()
    sessions.shared = True  # as PostgreSQL: several live hosts
    release = asyncio.Event()
    entered = asyncio.Event()

    async def slow(request: ModelRequest) -> str:
        entered.set()
        await release.wait()
        return "slow answer"

    one = standing_agent(agent_factory=lambda: make_agent(FunctionModel(slow)), sessions=sessions,
                         durability="sync", host_id="host-one")
    two = standing_agent(agent_factory=make_agent, sessions=sessions, durability="sync", host_id="host-two")
    held = asyncio.ensure_future(one.handle("from host one", session_id="alice"))
    await entered.wait()
    with pytest.raises(SessionBusyError, match="host-one"):
        await two.handle("from host two", session_id="alice")
    release.set()
    assert (await held).answer == "slow answer"
    assert (await two.handle("from host two", session_id="alice")).answer == "echo #2: from host two"
    await one.close()
    await two.close()

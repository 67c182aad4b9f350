"""Finishing interrupted turns: persisted tool results are served, only missing calls run.

A crash is simulated in process by copying what the store held at a moment mid-turn into a new
store and starting a new host on it (tests/hosting/test_crash.py does it for real with SIGKILL).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from agent import Agent, Tool
from agent.providers import FunctionModel, ModelRequest, calls
from hosting import InMemorySessions, standing_agent
from tests.hosting.hostkit import make_agent
from tracer import Recorder, Store

SCHEMA = {"type": "object", "properties": {}}


class Scenario:
    """A model that calls `fast` and `slow` in one batch, then answers with both results."""

    def __init__(self, store: Store | None = None, *, slow_durable: bool = False) -> None:
        self.slow_durable = slow_durable
        self.executed: list[str] = []
        self.block = True
        self.release = asyncio.Event()
        self.slow_started = asyncio.Event()
        self.store = store

    def agent(self) -> Agent:
        async def fast(_: dict[str, Any]) -> str:
            self.executed.append("fast")
            return "fast result"

        async def slow(_: dict[str, Any]) -> str:
            self.executed.append("slow")
            self.slow_started.set()
            if self.block:
                await self.release.wait()
            return "slow result"

        def answer(request: ModelRequest) -> Any:
            if request.last_user_text() != "go":
                return f"echo: {request.last_user_text()}"
            results = [ci.item.body["content"] for ci in request.context if ci.item.kind == "tool_result"]
            if not results:
                return calls(("fast", {}, "call-a"), ("slow", {}, "call-b"))
            return "both: " + ", ".join(results)

        tools = [Tool("fast", "Fast.", SCHEMA, fast), Tool("slow", "Slow.", SCHEMA, slow, durable=self.slow_durable)]
        recorder = Recorder(self.store) if self.store is not None else None
        return make_agent(FunctionModel(answer), tools=tools, recorder=recorder)


def _crash_copy(sessions: InMemorySessions) -> InMemorySessions:
    """What a store on disk would hold if the host died now."""
    return sessions.snapshot()


async def _wait_for_result(sessions: InMemorySessions, call_id: str) -> None:
    for _ in range(200):
        envelope = await sessions.load("alice")
        if envelope is not None and call_id in envelope.tool_results:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{call_id} was never persisted")


def _messages(envelope: Any) -> list[tuple[str, str]]:
    return [(m.item.kind, m.item.text) for m in envelope.conversation_obj().messages]


INTERRUPTED = "Error: slow was interrupted: the host stopped while this call was running, so it may or may not"


@pytest.mark.parametrize("durable", [False, True])
async def test_a_crash_mid_batch_serves_the_finished_call_and_reruns_only_a_durable_missing_one(
    store: Store, durable: bool
) -> None:
    scenario = Scenario(store, slow_durable=durable)
    sessions = InMemorySessions()
    first = standing_agent(agent_factory=scenario.agent, sessions=sessions, durability="sync")
    doomed = asyncio.ensure_future(first.handle("go", session_id="alice"))
    await scenario.slow_started.wait()
    await _wait_for_result(sessions, "call-a")
    disk = _crash_copy(sessions)

    scenario.block = False
    second = standing_agent(agent_factory=scenario.agent, sessions=disk, durability="sync")
    reply = await second.handle("and then?", session_id="alice")
    assert reply.recovered is not None
    assert reply.answer == "echo: and then?"
    # fast finished before the crash: served. slow was in flight: only a durable tool runs again;
    # otherwise the model is told it was interrupted and may or may not have taken effect
    if durable:
        assert (reply.recovered["status"], reply.recovered["answer"]) == ("answered", "both: fast result, slow result")
        assert scenario.executed == ["fast", "slow", "slow"]
    else:
        assert reply.recovered["status"] == "answered"
        assert reply.recovered["answer"].startswith("both: fast result, " + INTERRUPTED)
        assert scenario.executed == ["fast", "slow"]
    envelope = await disk.load("alice")
    assert envelope is not None
    kinds = _messages(envelope)
    assert [text for kind, text in kinds if kind == "user"] == ["go", "and then?"]
    results = [m.item.body["call_id"] for m in envelope.conversation_obj().messages if m.item.kind == "tool_result"]
    assert results == ["call-a", "call-b"]
    # the interrupted run is continued, not replaced: one run, a resume stage, the fast call served
    run = store.load_run(reply.recovered["run_id"])
    assert run.run.status == "answered"
    assert [s.kind for s in run.stages].count("resume") == 1
    served = [s for s in run.stages if s.kind == "tool" and s.attributes.get("served_from")]
    # (a non-durable call is settled as interrupted: its stage says so instead of running the tool)
    assert [s.name for s in served] == (["fast"] if durable else ["fast", "slow"])

    scenario.release.set()
    await doomed
    await first.close()
    await second.close()


async def test_a_crash_before_the_first_inference_runs_the_message_again(store: Store) -> None:
    gate = asyncio.Event()
    entered = asyncio.Event()
    calls_seen: list[str] = []

    async def answer(request: ModelRequest) -> str:
        calls_seen.append(request.last_user_text())
        if len(calls_seen) == 1:
            entered.set()
            await gate.wait()
        return f"echo: {request.last_user_text()}"

    def build() -> Agent:
        return make_agent(FunctionModel(answer), recorder=Recorder(store))

    sessions = InMemorySessions()
    first = standing_agent(agent_factory=build, sessions=sessions, durability="sync")
    doomed = asyncio.ensure_future(first.handle("hello", session_id="alice"))
    await entered.wait()
    disk = _crash_copy(sessions)
    interrupted_run = (await disk.load("alice")).turn["run_id"]  # type: ignore[union-attr]

    second = standing_agent(agent_factory=build, sessions=disk, durability="sync")
    reply = await second.handle("next", session_id="alice")
    assert reply.recovered is not None and reply.recovered["answer"] == "echo: hello"
    assert reply.answer == "echo: next"
    envelope = await disk.load("alice")
    assert envelope is not None
    assert [text for kind, text in _messages(envelope) if kind == "user"] == ["hello", "next"]
    store.flush()
    old = store.get_run(interrupted_run)
    assert old.status == "failed" and "interrupted" in (old.error or "")
    gate.set()
    await doomed
    await first.close()
    await second.close()


async def test_a_crash_after_the_answer_was_persisted_just_marks_the_turn_done() -> None:
    scenario = Scenario()
    scenario.block = False
    sessions = InMemorySessions()
    host = standing_agent(agent_factory=scenario.agent, sessions=sessions, durability="sync")
    await host.handle("go", session_id="alice")
    stored = await sessions.load("alice")
    assert stored is not None and stored.turn is not None
    # as if the host died between the last checkpoint and the final save
    crashed = dataclasses.replace(stored, turn={**stored.turn, "state": "running"})
    await sessions.save(crashed)
    reply = await host.handle("and then?", session_id="alice")
    assert reply.recovered is not None and reply.recovered["answer"] == "both: fast result, slow result"
    assert scenario.executed == ["fast", "slow"]  # nothing ran again
    await host.close()


async def test_shutdown_stores_a_running_turn_as_interrupted_and_the_next_request_finishes_it() -> None:
    scenario = Scenario()
    sessions = InMemorySessions()
    host = standing_agent(agent_factory=scenario.agent, sessions=sessions, durability="exit")
    turn = asyncio.ensure_future(host.handle("go", session_id="alice"))
    await scenario.slow_started.wait()
    await asyncio.sleep(0.01)
    await host.close(grace=0)
    reply = await turn
    assert reply.status == "interrupted" and "'alice'" in (reply.error or "")
    stored = await sessions.load("alice")
    assert stored is not None and stored.turn is not None and stored.turn["state"] == "interrupted"
    assert set(stored.tool_results) == {"call-a"}  # the finished call is kept, the cancelled one is not

    scenario.block = False
    restarted = standing_agent(agent_factory=scenario.agent, sessions=sessions, durability="exit")
    reply = await restarted.handle("and then?", session_id="alice")
    assert reply.recovered is not None and reply.recovered["answer"].startswith("both: fast result, " + INTERRUPTED)
    assert scenario.executed == ["fast", "slow"]  # cancelled mid-call by the shutdown: not run again
    await restarted.close()


async def test_resending_the_interrupted_turn_id_gets_its_reply_not_a_second_run() -> None:
    scenario = Scenario(slow_durable=True)
    sessions = InMemorySessions()
    host = standing_agent(agent_factory=scenario.agent, sessions=sessions)
    turn = asyncio.ensure_future(host.handle("go", session_id="alice", turn_id="t-7"))
    await scenario.slow_started.wait()
    await host.close(grace=0)
    assert (await turn).status == "interrupted"
    scenario.block = False
    restarted = standing_agent(agent_factory=scenario.agent, sessions=sessions)
    reply = await restarted.handle("go", session_id="alice", turn_id="t-7")  # the client retries
    assert (reply.status, reply.answer, reply.recovered) == ("answered", "both: fast result, slow result", None)
    envelope = await sessions.load("alice")
    assert envelope is not None
    assert [text for kind, text in _messages(envelope) if kind == "user"] == ["go"]
    await restarted.close()


async def test_on_a_shared_store_an_expired_lease_is_taken_over() -> None:
    scenario = Scenario()
    scenario.block = False
    sessions = InMemorySessions()
    sessions.shared = True
    host = standing_agent(agent_factory=scenario.agent, sessions=sessions, durability="sync", host_id="me")
    await host.handle("go", session_id="alice")
    stored = await sessions.load("alice")
    assert stored is not None and stored.turn is not None
    gone = {**stored.turn, "state": "running", "host": "a-host-that-died", "lease_until": 0}
    await sessions.save(dataclasses.replace(stored, turn=gone))
    reply = await host.handle("and then?", session_id="alice")
    assert reply.recovered is not None and reply.answer == "echo: and then?"
    await host.close()


async def test_a_crash_while_resuming_a_paused_run_resumes_it_again_with_the_same_decision() -> None:
    executed: list[str] = []
    release = asyncio.Event()
    started = asyncio.Event()
    block = True

    async def transfer(_: dict[str, Any]) -> str:
        executed.append("transfer")
        started.set()
        if block:
            await release.wait()
        return "sent"

    async def approve(call: Any, tool: Any) -> bool:
        from agent import PauseRun

        raise PauseRun(f"May I run {call.name}?", kind="approval")

    def answer(request: ModelRequest) -> Any:
        results = [ci.item.body["content"] for ci in request.context if ci.item.kind == "tool_result"]
        return calls(("transfer", {}, "call-t")) if not results else f"result: {results[0]}"

    def build() -> Agent:
        agent = make_agent(FunctionModel(answer), tools=[Tool("transfer", "Send money.", SCHEMA, transfer)])
        agent.approve = approve
        return agent

    sessions = InMemorySessions()
    first = standing_agent(agent_factory=build, sessions=sessions, durability="sync")
    paused = await first.handle("pay the bill", session_id="alice")
    assert paused.status == "awaiting" and executed == []
    doomed = asyncio.ensure_future(first.handle(session_id="alice", decision="yes"))
    await started.wait()
    disk = _crash_copy(sessions)
    stored = await disk.load("alice")
    assert stored is not None and stored.pause is not None and stored.turn is not None
    assert stored.turn["kind"] == "resume" and stored.turn["state"] == "running"

    block = False
    second = standing_agent(agent_factory=build, sessions=disk, durability="sync")
    reply = await second.handle("did it work?", session_id="alice")
    assert reply.recovered is not None
    assert reply.recovered["answer"].startswith("result: Error: transfer was interrupted")
    assert reply.recovered["run_id"] == paused.run_id  # the paused run itself was continued
    assert executed == ["transfer"]  # in flight at the crash: a payment is never sent twice
    envelope = await disk.load("alice")
    assert envelope is not None and envelope.pause is None
    release.set()
    await doomed
    await first.close()
    await second.close()


async def _line(host: Any, session_id: str) -> dict[str, Any]:
    return next(line for line in await host.sessions_overview() if line["session_id"] == session_id)


async def test_after_a_crash_the_session_is_listed_interrupted_until_its_next_request_finishes_it(
        store: Store) -> None:
    """The listing said "status": "running" beside "running": false for every session a crash
    stopped mid-turn, until that session's next request."""
    scenario = Scenario(store)
    sessions = InMemorySessions()
    first = standing_agent(agent_factory=scenario.agent, sessions=sessions, durability="sync")
    doomed = asyncio.ensure_future(first.handle("go", session_id="alice"))
    await scenario.slow_started.wait()
    await _wait_for_result(sessions, "call-a")
    line = await _line(first, "alice")
    assert (line["status"], line["running"]) == ("running", True)
    disk = _crash_copy(sessions)

    scenario.block = False
    second = standing_agent(agent_factory=scenario.agent, sessions=disk, durability="sync")
    line, info = await _line(second, "alice"), await second.session_info("alice")
    assert (line["status"], line["running"]) == ("interrupted", False)
    assert info is not None and (info["status"], info["running"]) == ("interrupted", False)
    reply = await second.handle("and then?", session_id="alice")
    assert reply.recovered is not None
    assert ((await _line(second, "alice"))["status"], (await second.session_info("alice") or {})["status"]) == (
        "answered", "answered")

    scenario.release.set()
    await doomed
    await first.close()
    await second.close()


@pytest.mark.parametrize(("lease", "shown"), [(60.0, "running"), (0.01, "interrupted")])
async def test_on_a_shared_store_a_turn_under_another_hosts_lease_is_listed_running(
        store: Store, lease: float, shown: str) -> None:
    """Several hosts on one store (PostgreSQL): a turn another host runs is running until its lease
    expires, then a leftover this host's next request for it finishes."""
    scenario = Scenario(store)
    sessions = InMemorySessions()
    sessions.shared = True  # as PostgresSessions
    first = standing_agent(agent_factory=scenario.agent, sessions=sessions, durability="sync", lease_seconds=lease)
    doomed = asyncio.ensure_future(first.handle("go", session_id="alice"))
    await scenario.slow_started.wait()
    await _wait_for_result(sessions, "call-a")
    await asyncio.sleep(0.05)
    other = standing_agent(agent_factory=scenario.agent, sessions=sessions, durability="sync", host_id="other")
    line = await _line(other, "alice")
    assert (line["status"], line["running"]) == (shown, False)
    scenario.release.set()
    await doomed
    await first.close()
    await other.close()

"""The standing agent: the two shapes, isolation, concurrency rules, the three ends, hydration."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent import Agent, Tool
from agent.providers import FunctionModel, ModelRequest, calls
from hosting import (
    AwaitingDecisionError,
    InMemorySessions,
    NotAwaitingError,
    SessionBusyError,
    TurnIdReusedError,
    UnreadableEnvelopeError,
    standing_agent,
)
from tests.hosting.hostkit import ask_tool, echo_model, make_agent
from tracer import Recorder, Store


def _users(envelope: Any) -> list[str]:
    return [m.item.text for m in envelope.conversation_obj().messages if m.item.kind == "user"]


class Gate:
    """A model that blocks each call until released, and counts how many calls overlap."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.entered = asyncio.Event()
        self.active = 0
        self.peak = 0

    def provider(self) -> FunctionModel:
        async def answer(request: ModelRequest) -> str:
            self.active += 1
            self.peak = max(self.peak, self.active)
            self.entered.set()
            try:
                await self.release.wait()
            finally:
                self.active -= 1
            return f"done: {request.last_user_text()}"

        return FunctionModel(answer, name="gate")


# ---------------------------------------------------------------------------- shapes and isolation


async def test_a_session_continues_its_own_conversation() -> None:
    sessions = InMemorySessions()
    host = standing_agent(agent_factory=make_agent, sessions=sessions)
    assert (await host.handle("hello", session_id="alice")).answer == "echo #1: hello"
    assert (await host.handle("again", session_id="alice")).answer == "echo #2: again"
    assert (await host.handle("hi", session_id="bob")).answer == "echo #1: hi"
    alice = await sessions.load("alice")
    assert alice is not None and _users(alice) == ["hello", "again"] and alice.version == 2
    await host.close()


@pytest.mark.parametrize("shape", ["agent", "agent_factory"])
async def test_100_concurrent_sessions_never_see_each_other(shape: str) -> None:
    sessions = InMemorySessions()

    async def answer(request: ModelRequest) -> str:
        await asyncio.sleep(0)  # let the other sessions interleave
        users = [ci.item.text for ci in request.context if ci.item.kind == "user"]
        return "saw " + " | ".join(users)

    def build() -> Agent:
        return make_agent(FunctionModel(answer))

    host = standing_agent(sessions=sessions, **({"agent": build()} if shape == "agent" else {"agent_factory": build}))

    async def converse(n: int) -> list[str]:
        replies = []
        for turn in range(3):
            replies.append((await host.handle(f"s{n} t{turn}", session_id=f"s{n}")).answer)
        return replies

    results = await asyncio.gather(*(converse(n) for n in range(100)))
    for n, replies in enumerate(results):
        assert replies[-1] == f"saw s{n} t0 | s{n} t1 | s{n} t2"
        envelope = await sessions.load(f"s{n}")
        assert envelope is not None
        assert _users(envelope) == [f"s{n} t0", f"s{n} t1", f"s{n} t2"]
        assert all(m.item.text.startswith(("saw", f"s{n} ")) for m in envelope.conversation_obj().messages)
    await host.close()


async def test_one_shared_agent_runs_serialized_globally() -> None:
    gate = Gate()
    host = standing_agent(agent=make_agent(gate.provider()))
    turns = [asyncio.ensure_future(host.handle(f"m{i}", session_id=f"s{i}")) for i in range(4)]
    await gate.entered.wait()
    await asyncio.sleep(0.05)
    assert gate.active == 1  # the other sessions wait their turn; none is refused
    gate.release.set()
    replies = await asyncio.gather(*turns)
    assert [r.answer for r in replies] == [f"done: m{i}" for i in range(4)]
    assert gate.peak == 1
    await host.close()


async def test_a_factory_runs_sessions_in_parallel() -> None:
    gate = Gate()
    host = standing_agent(agent_factory=lambda: make_agent(gate.provider()))
    turns = [asyncio.ensure_future(host.handle(f"m{i}", session_id=f"s{i}")) for i in range(4)]
    while gate.active < 4:
        await asyncio.sleep(0.01)
    gate.release.set()
    assert all(r.ok for r in await asyncio.gather(*turns))
    assert gate.peak == 4
    await host.close()


async def test_requests_without_a_session_share_one_fallback_instance() -> None:
    built: list[Agent] = []

    def build() -> Agent:
        built.append(make_agent())
        return built[-1]

    sessions = InMemorySessions()
    host = standing_agent(agent_factory=build, sessions=sessions)
    replies = await asyncio.gather(*(host.handle(f"one-off {i}") for i in range(5)))
    assert len(built) == 1
    # each one-off turn starts fresh and nothing is stored
    assert [r.answer for r in replies] == [f"echo #1: one-off {i}" for i in range(5)]
    assert all(r.session_id is None for r in replies)
    assert await sessions.list() == []
    await host.close()


# ---------------------------------------------------------------------------- a second turn of one session


async def test_a_second_turn_of_a_running_session_is_refused_but_other_sessions_are_not() -> None:
    gate = Gate()
    host = standing_agent(agent=make_agent(gate.provider()))
    first = asyncio.ensure_future(host.handle("first", session_id="alice"))
    await gate.entered.wait()
    with pytest.raises(SessionBusyError, match="'alice'") as busy:
        await host.handle("second", session_id="alice")
    assert "footprint serve --on-concurrent enqueue" in str(busy.value)  # what an HTTP client's operator types
    other = asyncio.ensure_future(host.handle("hello", session_id="bob"))  # waits, never refused
    gate.release.set()
    assert (await first).answer == "done: first"
    assert (await other).answer == "done: hello"
    await host.close()


@pytest.mark.parametrize("shape", ["agent", "agent_factory"])
async def test_enqueue_runs_the_second_turn_after_the_first(shape: str) -> None:
    gate = Gate()
    sessions = InMemorySessions()

    def build() -> Agent:
        return make_agent(gate.provider())

    host = standing_agent(sessions=sessions, on_concurrent_invoke="enqueue",
                          **({"agent": build()} if shape == "agent" else {"agent_factory": build}))
    first = asyncio.ensure_future(host.handle("first", session_id="alice"))
    await gate.entered.wait()
    second = asyncio.ensure_future(host.handle("second", session_id="alice"))
    await asyncio.sleep(0.05)
    assert not second.done()
    gate.release.set()
    assert [(await first).answer, (await second).answer] == ["done: first", "done: second"]
    envelope = await sessions.load("alice")
    assert envelope is not None and _users(envelope) == ["first", "second"]
    assert gate.peak == 1
    await host.close()


# ---------------------------------------------------------------------------- the three ends


async def test_pause_is_stored_and_replied_as_awaiting_then_resumes_without_rerunning_tools() -> None:
    executed: list[str] = []

    async def lookup(_: dict[str, Any]) -> str:
        executed.append("lookup")
        return "3 slots"

    def answer(request: ModelRequest) -> Any:
        results = [ci.item.body["content"] for ci in request.context if ci.item.kind == "tool_result"]
        if not results:
            return calls(("lookup", {}), ("ask_person", {}))
        return "booked: " + ", ".join(results)

    tools = [Tool("lookup", "Look up.", {"type": "object", "properties": {}}, lookup), ask_tool("Which day?")]
    sessions = InMemorySessions()
    host = standing_agent(agent_factory=lambda: make_agent(FunctionModel(answer), tools=tools), sessions=sessions)
    paused = await host.handle("book a table", session_id="alice")
    assert (paused.status, paused.question, paused.error) == ("awaiting", "Which day?", None)
    stored = await sessions.load("alice")
    assert stored is not None and stored.status == "awaiting" and stored.pause_state() is not None
    with pytest.raises(AwaitingDecisionError, match="Which day"):
        await host.handle("something else", session_id="alice")
    done = await host.handle(session_id="alice", decision="Tuesday")
    assert (done.status, done.answer, done.run_id) == ("answered", "booked: 3 slots, Tuesday", paused.run_id)
    assert executed == ["lookup"]  # the finished call was served on resume, not run again
    stored = await sessions.load("alice")
    assert stored is not None and stored.pause is None and stored.status == "answered"
    with pytest.raises(NotAwaitingError):
        await host.handle(session_id="alice", decision="again")
    await host.close()


async def test_a_failed_run_is_a_failed_reply_and_the_session_goes_on() -> None:
    def answer(request: ModelRequest) -> str:
        if request.last_user_text() == "break":
            from agent.errors import ProviderServerError

            raise ProviderServerError("upstream is down", provider="function")
        return "fine"

    sessions = InMemorySessions()
    host = standing_agent(agent_factory=lambda: make_agent(FunctionModel(answer)), sessions=sessions)
    failed = await host.handle("break", session_id="alice")
    assert failed.status == "failed" and "upstream is down" in (failed.error or "")
    assert (await host.handle("hello", session_id="alice")).answer == "fine"
    await host.close()


async def test_an_unreadable_stored_conversation_fails_the_request_naming_the_session() -> None:
    sessions = InMemorySessions()
    host = standing_agent(agent_factory=make_agent, sessions=sessions)
    await host.handle("hello", session_id="alice")
    await sessions.write_raw("alice", "{not json")
    with pytest.raises(UnreadableEnvelopeError, match="'alice'"):
        await host.handle("are you there?", session_id="alice")
    # never answered fresh: the broken data is still there, untouched
    stored = await sessions.persistence.read("alice", prefix="host.")
    assert dict(stored.values)["host.session"] == "{not json"
    # an absent session, in contrast, starts fresh
    assert (await host.handle("hi", session_id="bob")).answer == "echo #1: hi"
    await host.close()


async def test_a_turn_id_sent_again_gets_the_stored_reply_without_running_again() -> None:
    model = echo_model()
    host = standing_agent(agent_factory=lambda: make_agent(model))
    first = await host.handle("hello", session_id="alice", turn_id="t-1")
    again = await host.handle("hello", session_id="alice", turn_id="t-1")
    assert again.replayed and (again.answer, again.run_id) == (first.answer, first.run_id)
    assert len(model.requests) == 1
    await host.close()


async def test_a_turn_id_reused_with_another_message_is_refused_naming_it() -> None:
    model = echo_model()
    host = standing_agent(agent_factory=lambda: make_agent(model))
    first = await host.handle("hello", session_id="alice", turn_id="t-1")
    with pytest.raises(TurnIdReusedError, match="'t-1'") as refused:
        await host.handle("something else", session_id="alice", turn_id="t-1")
    assert (refused.value.code, refused.value.http_status, refused.value.session_id) == ("turn_id_reused", 409, "alice")
    assert len(model.requests) == 1  # neither run nor answered with the first turn's reply
    again = await host.handle("hello", session_id="alice", turn_id="t-1")
    assert again.replayed and again.run_id == first.run_id
    await host.close()


async def test_a_retry_of_a_message_with_a_secret_is_still_a_retry() -> None:
    sessions = InMemorySessions()
    message = "my key is sk-" + "Zq9Xw8Vu7Ts6" * 3
    model = echo_model()
    host = standing_agent(agent_factory=lambda: make_agent(model), sessions=sessions)
    await host.handle(message, session_id="alice", turn_id="t-1")
    stored = await sessions.load("alice")
    assert stored is not None and stored.turn is not None and stored.turn["text"] != message  # stored masked
    again = await host.handle(message, session_id="alice", turn_id="t-1")
    assert again.replayed and len(model.requests) == 1
    with pytest.raises(TurnIdReusedError):
        await host.handle("my key is gone", session_id="alice", turn_id="t-1")
    await host.handle("later", session_id="alice", turn_id="t-2")  # t-1 is an earlier turn now
    again = await host.handle(message, session_id="alice", turn_id="t-1")
    assert again.replayed and len(model.requests) == 2
    with pytest.raises(TurnIdReusedError):
        await host.handle("my key is gone", session_id="alice", turn_id="t-1")
    stored = await sessions.persistence.read("alice", records=False, prefix="turn.t-1")
    assert "Zq9Xw8Vu7Ts6" not in str(stored.values)  # kept masked (the reply quotes it masked too)
    await host.close()


async def test_sessions_overview_and_recordings_default_to_the_agents_store(store: Store) -> None:
    host = standing_agent(agent_factory=lambda: make_agent(recorder=Recorder(store)), max_active_sessions=1)
    await host.handle("hello", session_id="alice")
    await host.handle("hello", session_id="bob")
    assert host.recordings is store
    lines = {line["session_id"]: line for line in await host.sessions_overview()}
    assert set(lines) == {"alice", "bob"}
    assert lines["bob"]["active"] and not lines["alice"]["active"]  # alice's instance was evicted
    assert all(line["status"] == "answered" and not line["running"] for line in lines.values())
    await host.close()


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        standing_agent()
    with pytest.raises(ValueError, match="on_concurrent_invoke"):
        standing_agent(agent_factory=make_agent, on_concurrent_invoke="drop")
    with pytest.raises(ValueError, match="max_active_sessions"):
        standing_agent(agent_factory=make_agent, max_active_sessions=0)


async def test_closing_removes_the_hosts_wiring_from_the_agent() -> None:
    agent = make_agent()
    original = agent.hooks
    host = standing_agent(agent=agent)
    assert agent.hooks is not original  # the durability hooks are merged in
    await host.handle("hello", session_id="alice")
    await host.close()
    assert agent.hooks is original


def test_the_package_exports_everything_it_names() -> None:
    import hosting

    assert sorted(hosting.__all__) == hosting.__all__
    assert all(hasattr(hosting, name) for name in hosting.__all__)


async def test_a_message_to_a_paused_session_quotes_the_question_as_asked() -> None:
    """The refusal quoted the question with repr(): a question with both kinds of quote read 'Maya\\'s'."""
    question = """Pay Maya's "coffee" bill?"""
    host = standing_agent(agent_factory=lambda: make_agent(
        FunctionModel(lambda request: calls(("ask_person", {}))), tools=[ask_tool(question)]), sessions=InMemorySessions())
    assert (await host.handle("pay it", session_id="maya")).status == "awaiting"
    with pytest.raises(AwaitingDecisionError) as refused:
        await host.handle("something else", session_id="maya")
    assert question in str(refused.value), str(refused.value)
    await host.close()

"""ConversationalAgent: an Agent per conversation, history restored from and written to a store."""

from __future__ import annotations

from pathlib import Path

from agent import Conversation, PauseRun, tool
from agent.bus import (
    AgentBinding,
    Bus,
    ConversationalAgent,
    ConversationUnreadableError,
    InMemoryConversationStore,
    RunFailedError,
    SourceBinding,
    TaskEvent,
)
from agent.errors import ProviderError
from agent.providers import FunctionModel, ModelRequest, ScriptedModel, calls
from tracer import ItemKind, Recorder, Store

BINDING = AgentBinding([SourceBinding("whatsapp", prefix="", reply_channel="whatsapp")])


def users(request: ModelRequest) -> list[str]:
    return [ci.item.text for ci in request.context if ci.item.kind == ItemKind.USER]


async def test_history_is_restored_from_the_store_by_a_fresh_agent(message, sent) -> None:
    store = InMemoryConversationStore()
    model = FunctionModel(lambda r: f"heard {len(users(r))}")
    first = ConversationalAgent("pa", BINDING, provider=model, store=store)
    first.deliver(message("I moved to Lisbon"))
    await first.idle()

    # a restart: a new agent object, the same store
    bus = Bus()
    bus.add_transport(sent)
    second = ConversationalAgent("pa", BINDING, provider=model, store=store).start(bus)
    bus.publish(message("where do I live?", message_id="2"))
    await bus.drain()

    assert users(model.requests[-1]) == ["I moved to Lisbon", "where do I live?"]
    assert sent.texts() == ["heard 2"] and first.outbox[0].text == "heard 1"
    stored = Conversation.from_dict(await store.load("whatsapp:+48100") or {})
    assert [m.item.kind for m in stored.messages] == ["user", "assistant", "user", "assistant"]
    assert second.failures == type(second.failures)()


async def test_conversations_are_kept_apart(message) -> None:
    model = FunctionModel(lambda r: "|".join(users(r)))
    agent = ConversationalAgent("pa", BINDING, provider=model)
    agent.deliver(message("a1", endpoint="A"))
    agent.deliver(message("b1", endpoint="B"))
    agent.deliver(message("a2", endpoint="A", message_id="2"))
    await agent.idle()
    assert sorted(e.text for e in agent.outbox) == ["a1", "a1|a2", "b1"]


async def test_each_turn_is_a_recorded_run_in_the_conversations_session(message, tmp_path: Path) -> None:
    with Store.open(tmp_path / "bus.duckdb") as store:
        agent = ConversationalAgent("pa", BINDING, provider=ScriptedModel(["one", "two"]),
                                    recorder=Recorder(store))
        agent.deliver(message("hi"))
        agent.deliver(message("again", message_id="2"))
        await agent.idle()
        store.flush()
        runs = store.session_runs("whatsapp:+48100")
        assert [(r.input, r.output, r.status) for r in runs] == [("hi", "one", "answered"), ("again", "two", "answered")]
        # the second run's snapshot holds the first turn's messages with their original origins
        second = store.load_run(runs[1].id)
        inference = second.inferences()[0]
        origins = {e.origin.run_id for e in second.snapshot(inference.id)}
        assert runs[0].id in origins


async def test_an_unreadable_stored_conversation_is_never_answered_fresh(message) -> None:
    store = InMemoryConversationStore()
    store.put_raw("whatsapp:+48100", '{"format": "something else"}')
    model = ScriptedModel(["should not be said"])
    agent = ConversationalAgent("pa", BINDING, provider=model, store=store)
    agent.deliver(message("hello"))
    await agent.idle()
    assert agent.outbox == [] and model.calls_made == 0
    error = agent.failures[0].error
    assert isinstance(error, ConversationUnreadableError) and error.conversation_id == "whatsapp:+48100"
    assert "not answering it fresh" in str(error)


async def test_a_failed_run_is_reported_and_the_failure_reply_sent(message) -> None:
    agent = ConversationalAgent("pa", BINDING, provider=ScriptedModel([ProviderError("down", provider="x")]),
                                failure_reply="Sorry, try again later.")
    agent.deliver(message("hello"))
    await agent.idle()
    assert [e.text for e in agent.outbox] == ["Sorry, try again later."]
    failure = agent.failures[0]
    assert failure.where == "run" and isinstance(failure.error, RunFailedError)


async def test_a_pause_asks_and_the_next_message_resumes_it(message) -> None:
    @tool
    async def book(slot: str) -> str:
        """Book a slot."""
        raise PauseRun(f"Book {slot}?", kind="approval")

    booked: list[str] = []

    @tool(name="book")
    async def book_for_real(slot: str) -> str:
        """Book a slot."""
        booked.append(slot)
        return f"booked {slot}"

    approvals = 0

    def approve(call: object, t: object) -> bool:
        nonlocal approvals
        approvals += 1
        if approvals == 1:
            raise PauseRun("May I book 10:00?", kind="approval")
        return True

    model = ScriptedModel([calls(("book", {"slot": "10:00"})), "Booked for 10:00."])
    agent = ConversationalAgent("pa", BINDING, provider=model, tools=[book_for_real],
                                agent_options={"approve": approve})
    agent.deliver(message("book me 10:00"))
    await agent.idle()
    assert [e.text for e in agent.outbox] == ["May I book 10:00?"]
    agent.deliver(message("yes", message_id="2"))
    await agent.idle()
    assert [e.text for e in agent.outbox] == ["May I book 10:00?", "Booked for 10:00."]
    assert booked == ["10:00"]
    stored = await agent.store.load("whatsapp:+48100")
    assert stored is not None and "bus.pause" not in stored["metadata"]


async def test_a_task_runs_in_its_own_conversation() -> None:
    agent = ConversationalAgent(
        "pa", AgentBinding([SourceBinding("jobs", task="digest", reply_channel="email")]),
        provider=FunctionModel(lambda r: f"did: {users(r)[-1]}"),
    )
    agent.deliver(TaskEvent("jobs", "digest", "t-9", "write the digest", 0.0, reply_to="me@example.org"))
    await agent.idle()
    assert [(e.to, e.text) for e in agent.outbox] == [("me@example.org", "did: write the digest")]
    assert agent.store.ids() == ["task:jobs:digest:t-9"]  # type: ignore[attr-defined]

"""start(): a turn a crash cut off goes on; an idle history only loads."""

from __future__ import annotations

from typing import Any

from agent import Tool
from agent.durable import InMemoryPersistence, PersistenceContext
from agent.durable._journal import record_of
from agent.providers import FunctionModel, ModelRequest
from tests.agent.durable.durablekit import records, session, texts, values
from tracer import ContextItem, Item, ItemKind, Origin, OriginKind

CTX = PersistenceContext("s1")
ran: list[str] = []


def make_tool(name: str, durable: bool) -> Tool:
    def execute(args: dict[str, Any]) -> str:
        ran.append(name)
        return f"{name} done"

    return Tool(name, f"The {name} tool.", {"type": "object"}, execute, durable=durable)


TOOLS = [make_tool("read", True), make_tool("charge", False)]


def user(text: str) -> ContextItem:
    return ContextItem(Item.of_text(ItemKind.USER, text), Origin(OriginKind.USER, "r-old", "s-in", "send@x"))


def call(cid: str, name: str) -> ContextItem:
    return ContextItem(Item(ItemKind.TOOL_CALL, {"id": cid, "name": name, "arguments": "{}"}),
                       Origin(OriginKind.STAGE, "r-old", "s-inf"))


def result(cid: str, name: str) -> ContextItem:
    return ContextItem(Item(ItemKind.TOOL_RESULT, {"call_id": cid, "name": name, "content": f"{name} done",
                                                   "is_error": False}), Origin(OriginKind.STAGE, "r-old", "s-t"))


async def crashed(items: list[ContextItem], pending: list[tuple[str, str]] = (),  # type: ignore[assignment]
                  queued: dict[str, str] | None = None) -> InMemoryPersistence:
    persistence = InMemoryPersistence()
    for ci in items:
        await persistence.append(CTX, record_of(ci))
    for i, (cid, name) in enumerate(pending):
        await persistence.write_value(CTX, f"tool.{i:04d}", {"id": cid, "name": name, "arguments": "{}"})
    for key, text in (queued or {}).items():
        await persistence.write_value(CTX, key, {"text": text, "settings": {}, "queued_at": 1.0})
    return persistence


def answering() -> FunctionModel:
    def answer(request: ModelRequest) -> str:
        newest = [ci for ci in request.context if ci.item.kind in ("user", "tool_result")][-1]
        return f"after {newest.text}"

    return FunctionModel(answer)


async def resume(persistence: InMemoryPersistence, model: FunctionModel | None = None) -> Any:
    ran.clear()
    agent = session(persistence, model or answering(), tools=TOOLS)
    agent.start()
    await agent.wait_for_idle()
    return agent


async def test_an_interrupted_batch_reruns_only_durable_tools() -> None:
    persistence = await crashed([user("pay and read"), call("c1", "read"), call("c2", "charge")],
                                pending=[("c1", "read"), ("c2", "charge")])
    agent = await resume(persistence)
    assert ran == ["read"]
    results = [ci.item.body for ci in agent.history if ci.item.kind == "tool_result"]
    assert [(r["call_id"], r["is_error"]) for r in results] == [("c1", False), ("c2", True)]
    assert "not marked durable" in results[1]["content"]
    assert texts(agent)[-1][0] == "assistant"
    assert await values(persistence, "tool.") == []


async def test_only_the_calls_still_owed_are_settled() -> None:
    persistence = await crashed([user("two"), call("c1", "charge"), call("c2", "read"), result("c1", "charge")],
                                pending=[("c2", "read")])
    agent = await resume(persistence)
    assert ran == ["read"]
    ids = [ci.item.body["call_id"] for ci in agent.history if ci.item.kind == "tool_result"]
    assert ids == ["c1", "c2"]  # exactly one result per call


async def test_calls_recorded_before_their_batch_was_written_never_ran_so_they_all_run() -> None:
    persistence = await crashed([user("both"), call("c1", "read"), call("c2", "charge")])
    await resume(persistence)
    assert ran == ["read", "charge"]


async def test_an_unanswered_user_message_gets_its_inference() -> None:
    persistence = await crashed([user("are you there")])
    agent = await resume(persistence)
    assert texts(agent) == [("user", "are you there"), ("assistant", "after are you there")]


async def test_an_unanswered_tool_result_gets_its_inference() -> None:
    persistence = await crashed([user("q"), call("c1", "read"), result("c1", "read")])
    agent = await resume(persistence)
    assert texts(agent)[-1] == ("assistant", "after read done")


async def test_leftover_queued_messages_join_steering_after_the_batch() -> None:
    persistence = await crashed([user("q"), call("c1", "read")], pending=[("c1", "read")],
                                queued={"send.00000000000000000001": "sent", "steering.00000000000000000002": "steer"})
    agent = await resume(persistence)
    assert [k for k, _ in texts(agent)] == ["user", "tool_call", "tool_result", "user", "assistant", "user",
                                            "assistant"]
    assert [t for k, t in texts(agent) if k == "user"] == ["q", "steer", "sent"]
    assert await values(persistence, "steering.") == [] and await values(persistence, "send.") == []


async def test_on_an_idle_history_start_only_loads() -> None:
    persistence = await crashed([user("hi"), ContextItem(Item.of_text(ItemKind.ASSISTANT, "hello"),
                                                         Origin(OriginKind.STAGE, "r-old", "s-a"))])
    model = answering()
    agent = await resume(persistence, model)
    assert model.calls_made == 0
    assert texts(agent) == [("user", "hi"), ("assistant", "hello")]
    assert len(await records(persistence)) == 2


async def test_start_twice_and_start_on_a_new_session_do_nothing_more() -> None:
    persistence = InMemoryPersistence()
    model = answering()
    agent = session(persistence, model)
    agent.start()
    agent.start()
    await agent.wait_for_idle()
    assert model.calls_made == 0 and await records(persistence) == []

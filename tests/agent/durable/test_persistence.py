"""The persistence rules: what is appended when, atomic consumption, one load, the re-entry lock."""

from __future__ import annotations

import asyncio

import pytest

from agent import tool
from agent.durable import DurableHooks, InMemoryPersistence, TurnDone
from agent.durable._journal import Journal
from agent.durable.errors import PersistenceReentryError
from agent.providers import FunctionModel, ModelRequest, ModelResponse, ScriptedModel, calls
from tests.agent.durable.durablekit import FlakyPersistence, records, session, texts, values


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def test_a_turn_appends_one_record_per_message_in_context_order() -> None:
    persistence = InMemoryPersistence()
    model = ScriptedModel([ModelResponse("thinking", calls(("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})
                                                             ).tool_calls, "tool_calls"), "3 and 7"])
    agent = session(persistence, model, tools=[add])
    await agent.send("add things")
    await agent.wait_for_idle()
    stored = await records(persistence)
    assert [r.kind for r in stored] == ["user", "assistant", "assistant", "assistant", "tool", "tool", "assistant"]
    assert [r.seq for r in stored] == list(range(1, 8))
    # each block is its own record: the text, then each call
    assert [r.body["item"]["kind"] for r in stored[1:4]] == ["assistant", "tool_call", "tool_call"]
    assert [r.body["item"]["body"]["content"] for r in stored[4:6]] == ["3", "7"]
    assert stored[0].body["queue"] == "send"


async def test_history_reloads_in_a_new_process_with_origins() -> None:
    persistence = InMemoryPersistence()
    first = session(persistence)
    await first.send("remember me")
    await first.wait_for_idle()
    second = session(persistence)
    second.start()
    await second.wait_for_idle()
    assert texts(second) == texts(first)
    assert [ci.origin for ci in second.history] == [ci.origin for ci in first.history]
    assert second.history[0].origin.source.startswith("send@")


async def test_consumption_is_atomic_a_failed_append_leaves_the_message_queued() -> None:
    persistence = FlakyPersistence()
    agent = session(persistence)
    done: list[TurnDone] = []
    agent.listeners.append(lambda e: done.append(e) if isinstance(e, TurnDone) else None)
    persistence.fail = {"delete_value"}  # the second step of the consumption transaction
    await agent.send("must not vanish")
    await agent.wait_for_idle()
    assert done[-1].state == "internal_error"
    assert await records(persistence.inner) == [] or all(
        r.kind != "user" for r in await records(persistence.inner))
    assert [v["text"] for _, v in await values(persistence.inner, "send.")] == ["must not vanish"]
    persistence.fail = set()
    await agent.send("and another")
    await agent.wait_for_idle()
    users = [r.body["item"]["body"]["text"] for r in await records(persistence.inner) if r.kind == "user"]
    assert users == ["must not vanish", "and another"]
    assert await values(persistence.inner, "send.") == []


async def test_load_happens_once_on_the_first_turn() -> None:
    persistence = FlakyPersistence()
    agent = session(persistence)
    for i in range(3):
        await agent.send(f"m{i}")
        await agent.wait_for_idle()
    assert persistence.calls.count("load") == 1


async def test_a_failed_load_is_an_internal_error_and_retried_next_turn() -> None:
    persistence = FlakyPersistence()
    events: list[object] = []
    agent = session(persistence, hooks=DurableHooks(on_event=lambda ctx, e: events.append(e)))
    persistence.fail = {"load"}
    await agent.send("waiting safely")
    await agent.wait_for_idle()
    failed = [e for e in events if isinstance(e, TurnDone)]
    assert failed and failed[0].state == "internal_error" and failed[0].run_id is None
    assert "injected load failure" in (failed[0].error or "")
    assert [v["text"] for _, v in await values(persistence.inner, "send.")] == ["waiting safely"]
    assert await records(persistence.inner) == []  # a failed load appends nothing
    persistence.fail = set()
    await agent.send("next")
    await agent.wait_for_idle()
    assert [t for k, t in texts(agent) if k == "user"] == ["waiting safely", "next"]


async def test_the_lock_fails_loudly_on_reentry() -> None:
    journal = Journal(InMemoryPersistence(), "s1")

    async def reenter() -> None:
        await journal.locked("inner", lambda: asyncio.sleep(0))

    with pytest.raises(PersistenceReentryError, match="session s1: inner was called while this task"):
        await journal.locked("outer", reenter)


async def test_concurrent_callers_are_serialised_not_refused() -> None:
    journal = Journal(InMemoryPersistence(), "s1")
    order: list[str] = []

    async def work(name: str) -> None:
        order.append(f"{name} in")
        await asyncio.sleep(0.01)
        order.append(f"{name} out")

    await asyncio.gather(*(journal.locked(n, lambda n=n: work(n)) for n in "abc"))  # type: ignore[misc]
    assert order == ["a in", "a out", "b in", "b out", "c in", "c out"]


async def test_bytes_appended_per_turn_do_not_grow_with_the_conversation() -> None:
    import json

    persistence = InMemoryPersistence()
    agent = session(persistence, FunctionModel(lambda r: "same answer"))
    sizes = []
    for _ in range(30):
        before = len(await records(persistence))
        await agent.send("same question")
        await agent.wait_for_idle()
        new = (await records(persistence))[before:]
        sizes.append(sum(len(json.dumps(r.body)) for r in new))
    assert max(sizes[5:]) - min(sizes[5:]) <= 2, sizes  # only the record's own ids vary


async def test_values_hold_only_what_is_not_in_the_conversation() -> None:
    persistence = InMemoryPersistence()
    model = FunctionModel(lambda r: calls(("add", {"a": 1, "b": 1}))
                          if r.context[-3].item.kind == "user" else "two")

    def respond(request: ModelRequest) -> ModelResponse | str:
        kinds = [ci.item.kind for ci in request.context if ci.item.kind in ("user", "tool_result")]
        return calls(("add", {"a": 1, "b": 1})) if kinds[-1] == "user" else "two"

    model = FunctionModel(respond)
    agent = session(persistence, model, tools=[add])
    await agent.send("one plus one", model="m-1")
    await agent.wait_for_idle()
    assert [k for k, _ in await values(persistence)] == ["settings"]

"""Failures: a provider error ends the response, the durable failed-turn message, typed tool results."""

from __future__ import annotations

import json
from typing import Any

from agent.durable import InMemoryPersistence, TurnDone, typed_tool
from agent.errors import ProviderServerError
from agent.providers import FunctionModel, ModelRequest, ModelResponse, ScriptedModel, calls, raw_call
from tests.agent.durable.durablekit import Gate, records, session, texts


async def test_an_unrecovered_failure_leaves_a_durable_system_message_pointing_at_the_run() -> None:
    persistence = InMemoryPersistence()
    model = ScriptedModel([ProviderServerError("upstream 503", provider="m"), "fine now"])
    agent = session(persistence, model)
    done: list[TurnDone] = []
    agent.listeners.append(lambda e: done.append(e) if isinstance(e, TurnDone) else None)
    await agent.send("first")
    await agent.wait_for_idle()
    assert done[-1].state == "failed"
    last = agent.history[-1]
    assert last.item.kind == "system" and last.text == "The last turn failed: ProviderServerError: upstream 503"
    assert last.origin.run_id == done[-1].run_id and last.origin.stage_id is not None
    assert (await records(persistence))[-1].kind == "system"
    await agent.send("second")  # the next inference sees what went wrong
    await agent.wait_for_idle()
    assert model.requests[-1].system_text().endswith("The last turn failed: ProviderServerError: upstream 503")


async def test_a_provider_error_ends_the_response_and_queued_messages_still_drain() -> None:
    gate = Gate()
    count = {"n": 0}

    async def answer(request: ModelRequest) -> str:
        count["n"] += 1
        if count["n"] == 1:
            await gate.wait()
            raise ProviderServerError("flaky", provider="m")
        return f"ok: {request.last_user_text()}"

    agent = session(llm=FunctionModel(answer))
    await agent.send("one")
    await gate.entered.wait()
    await agent.send("two")
    gate.opened.set()
    await agent.wait_for_idle()
    # recovered within the loop: no failed-turn message, the queued message got its answer
    assert texts(agent) == [("user", "one"), ("user", "two"), ("assistant", "ok: two")]


async def test_a_persistently_failing_provider_does_not_loop() -> None:
    model = FunctionModel(lambda r: ProviderServerError("down", provider="m"))
    agent = session(llm=model)
    for i in range(3):
        await agent.send(f"m{i}")
    await agent.wait_for_idle()
    assert model.calls_made == 3
    assert [k for k, _ in texts(agent)].count("system") == 1


def weather_tool() -> Any:
    def execute(args: dict[str, Any]) -> Any:
        if args["city"] == "Atlantis":
            return {"ok": False, "reason": "no such city"}
        if args["city"] == "Broken":
            return {"ok": "yes"}  # breaks the result schema
        return {"ok": True, "temp": 21}

    return typed_tool(
        "weather", "The weather of a city.",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        {"type": "object", "properties": {"ok": {"type": "boolean"}, "temp": {"type": "number"},
                                          "reason": {"type": "string"}}, "required": ["ok"]},
        execute,
        render=lambda r: f"{r['temp']} degrees" if r["ok"] else f"failed: {r['reason']}",
        is_error=lambda r: not r["ok"],
    )


async def test_typed_tool_results_are_validated_rendered_and_marked() -> None:
    model = ScriptedModel([
        calls(("weather", {"city": "Paris"}), ("weather", {"city": "Atlantis"}), ("weather", {"city": "Broken"}),
              ("weather", {"cty": "typo"}), ("nope", {})),
        raw_call("weather", "{not json"),
        "done",
    ])
    agent = session(llm=model, tools=[weather_tool()])
    await agent.send("weather?")
    await agent.wait_for_idle()
    results = [ci.item.body for ci in agent.history if ci.item.kind == "tool_result"]
    assert [(r["content"], r["is_error"]) for r in results[:2]] == [("21 degrees", False),
                                                                     ("failed: no such city", True)]
    assert results[2]["is_error"] and "does not match its schema" in results[2]["content"]
    assert results[3]["is_error"] and "do not match its schema" in results[3]["content"]
    assert results[4]["is_error"] and "there is no tool named 'nope'" in results[4]["content"]
    assert results[5]["is_error"] and "not valid JSON" in results[5]["content"]
    assert texts(agent)[-1] == ("assistant", "done")


async def test_a_throwing_tool_is_an_error_result_not_a_failed_turn() -> None:
    def explode(args: dict[str, Any]) -> Any:
        raise RuntimeError("kaboom")

    boom = typed_tool("boom", "Fails.", {"type": "object"}, {"type": "object"}, explode)
    agent = session(llm=ScriptedModel([calls(("boom", {})), "recovered"]), tools=[boom])
    await agent.send("go")
    await agent.wait_for_idle()
    result = next(ci.item.body for ci in agent.history if ci.item.kind == "tool_result")
    assert result["is_error"] and "RuntimeError: kaboom" in result["content"]
    assert texts(agent)[-1] == ("assistant", "recovered")


async def test_results_land_in_call_order_each_with_its_key_deleted() -> None:
    import asyncio

    persistence = InMemoryPersistence()
    snapshots: list[tuple[list[str], list[str]]] = []

    async def slow(args: dict[str, Any]) -> Any:
        await asyncio.sleep(args["wait"])
        recs = await persistence.load(_ctx())
        keys = [k for k, _ in await persistence.read_values(_ctx(), "tool.")]
        snapshots.append(([json.dumps(r.body["item"]["body"].get("content")) for r in recs if r.kind == "tool"],
                          keys))
        return {"waited": args["wait"]}

    tool = typed_tool("slow", "Waits.", {"type": "object"}, {"type": "object"}, slow)
    model = ScriptedModel([calls(("slow", {"wait": 0.05}), ("slow", {"wait": 0.0}), ("slow", {"wait": 0.02})),
                           "all three"])
    agent = session(persistence, model, tools=[tool])
    await agent.send("go")
    await agent.wait_for_idle()
    # while any call ran, the whole batch was under tool. keys and no result was committed out of order
    assert snapshots[0] == ([], ["tool.0000", "tool.0001", "tool.0002"])
    stored = [r for r in await records(persistence) if r.kind == "tool"]
    assert [json.loads(r.body["item"]["body"]["content"])["waited"] for r in stored] == [0.05, 0.0, 0.02]
    assert await persistence.read_values(_ctx(), "tool.") == []


def _ctx() -> Any:
    from agent.durable import PersistenceContext

    return PersistenceContext("s1")


async def test_a_response_without_calls_owes_nothing() -> None:
    persistence = InMemoryPersistence()
    agent = session(persistence, ScriptedModel([ModelResponse("just text")]))
    await agent.send("hi")
    await agent.wait_for_idle()
    assert await persistence.read_values(_ctx(), "") == []


async def test_provider_settled_server_calls_are_never_executed_and_owe_nothing() -> None:
    from agent.providers import ToolCall

    ran: list[str] = []
    search = typed_tool("web_search", "Search.", {"type": "object"}, {"type": "string"},
                        lambda a: ran.append("web_search") or "local result")
    persistence = InMemoryPersistence()
    model = ScriptedModel([
        ModelResponse("Paris is sunny.", (ToolCall("ws1", "web_search", '{"q": "paris"}', settled=True),)),
        ModelResponse("", (ToolCall("ws2", "web_search", "{}", settled=True), ToolCall("c1", "web_search", "{}")),
                      "tool_calls"),
        "and done",
    ])
    agent = session(persistence, model, tools=[search])
    await agent.send("weather?")
    await agent.wait_for_idle()
    assert ran == []  # the provider settled it
    assert texts(agent) == [("user", "weather?"), ("assistant", "Paris is sunny."),
                            ("tool_call", 'web_search({"q": "paris"})')]  # the call block stays in the history
    assert agent.history[2].item.body["settled"] is True
    await agent.send("mixed")
    await agent.wait_for_idle()
    assert ran == ["web_search"]  # only the unsettled call ran
    results = [ci.item.body["call_id"] for ci in agent.history if ci.item.kind == "tool_result"]
    assert results == ["c1"]
    assert await persistence.read_values(_ctx(), "tool.") == []
    # a settled call is not sent back to a chat-completions model as a call awaiting its result
    assert all(m.get("tool_calls", [{}])[0].get("id") != "ws1" for m in model.requests[-1].chat_messages())

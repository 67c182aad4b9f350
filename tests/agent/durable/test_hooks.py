"""Hooks, features and actions: when each hook fires, what answers for the session, what never fails a run."""

from __future__ import annotations

from typing import Any

import pytest

from agent import Tool
from agent.durable import (
    Compact,
    DurableFeature,
    DurableHooks,
    ModelChange,
    Send,
    SessionContext,
    Steer,
    merge_features,
)
from agent.errors import UserError
from agent.providers import FunctionModel, ModelRequest, ScriptedModel, calls, tool_results
from tests.agent.durable.durablekit import echo_model, session, texts


def noted(log: list[str], name: str) -> Any:
    return lambda ctx, *rest: log.append(name)


async def test_lifecycle_hooks_bracket_the_loop_turns_and_inferences() -> None:
    log: list[str] = []
    hooks = DurableHooks(**{name: noted(log, name) for name in (
        "before_agent_loop", "before_turn", "before_inference", "after_inference", "after_turn",
        "after_agent_loop")})
    ping = Tool("ping", "Ping.", {"type": "object"}, lambda a: "pong")
    agent = session(llm=ScriptedModel([calls(("ping", {})), "one", "two"]), tools=[ping], hooks=hooks)
    await agent.send("a")
    await agent.send("b")
    await agent.wait_for_idle()
    assert log == ["before_agent_loop",
                   "before_turn", "before_inference", "after_inference", "before_inference", "after_inference",
                   "after_turn",
                   "before_turn", "before_inference", "after_inference", "after_turn",
                   "after_agent_loop"]


async def test_state_is_read_at_every_turn_and_hooks_supersede_it() -> None:
    seen: list[tuple[str, list[str]]] = []

    def answer(request: ModelRequest) -> str:
        seen.append((request.system_text(), [t["name"] for t in request.tool_definitions()]))
        return "ok"

    agent = session(llm=FunctionModel(answer), instructions="Be brief.")
    await agent.send("1")
    await agent.wait_for_idle()
    agent.state.instructions = "Be verbose."
    agent.state.tools.append(Tool("extra", "Extra.", {"type": "object"}, lambda a: "x"))
    await agent.send("2")
    await agent.wait_for_idle()
    assert "Be brief." in seen[0][0] and seen[0][1] == []
    assert "Be verbose." in seen[1][0] and seen[1][1] == ["extra"]
    agent.hooks.instructions = lambda ctx: f"Hooked for {ctx.session_id}."
    agent.hooks.tools = lambda ctx: [Tool("hooked", "H.", {"type": "object"}, lambda a: "h")]
    await agent.send("3")
    await agent.wait_for_idle()
    assert "Hooked for s1." in seen[2][0] and seen[2][1] == ["hooked"]


async def test_plain_functions_are_tools_as_for_agent() -> None:
    """DurableAgent(tools=) and the tools hook take what Agent(tools=) takes: a function is made a
    tool from its signature and docstring, and called with the model's arguments."""

    def lookup(order_id: str) -> str:
        """Look an order up."""
        return f"order {order_id}: shipped"

    def weather(city: str) -> str:
        """Tomorrow's weather."""
        return f"{city}: rain"

    seen: list[list[str]] = []
    results: list[str] = []
    script = iter([calls(("lookup", {"order_id": "42"})), "shipped", calls(("weather", {"city": "Oslo"})), "rain"])

    def answer(request: ModelRequest) -> Any:
        seen.append([t["name"] for t in request.tool_definitions()])
        results.extend(r["content"] for r in tool_results(request)[len(results):])
        return next(script)

    model = FunctionModel(answer)
    agent = session(llm=model, tools=[lookup])
    await agent.send("where is 42?")
    await agent.wait_for_idle()
    agent.hooks.tools = lambda ctx: [weather]
    await agent.send("weather?")
    await agent.wait_for_idle()
    assert seen == [["lookup"], ["lookup"], ["weather"], ["weather"]]
    assert results == ["order 42: shipped", "Oslo: rain"]
    with pytest.raises(UserError, match="durable agent s2: tools must be a list"):
        session(id="s2", tools=lookup)  # type: ignore[arg-type]


async def test_a_throwing_hook_falls_back_and_never_fails_the_run() -> None:
    def broken(*args: Any) -> Any:
        raise RuntimeError("hook bug")

    hooks = DurableHooks(instructions=broken, tools=broken, before_turn=broken, after_turn=broken,
                         before_inference=broken, after_inference=broken, on_event=broken,
                         before_agent_loop=broken, after_agent_loop=broken, model_changed=broken)
    agent = session(hooks=hooks, instructions="State instructions.")
    await agent.send("still answered", model="other")
    await agent.wait_for_idle()
    assert texts(agent)[-1] == ("assistant", "echo: still answered")


async def test_after_turn_actions_queue_messages_and_drive_another_turn() -> None:
    fired = {"n": 0}

    def after_turn(ctx: SessionContext) -> list[Any]:
        fired["n"] += 1
        return [Steer("follow-up steer"), Send("follow-up send")] if fired["n"] == 1 else []

    agent = session(hooks=DurableHooks(after_turn=after_turn))
    await agent.send("start")
    await agent.wait_for_idle()
    assert [t for k, t in texts(agent) if k == "user"] == ["start", "follow-up steer", "follow-up send"]


async def test_after_agent_loop_actions_reopen_the_loop_and_compact() -> None:
    loops = {"before": 0, "after": 0}

    def after_loop(ctx: SessionContext) -> list[Any]:
        loops["after"] += 1
        return [Send("once more"), Compact()] if loops["after"] == 1 else []

    hooks = DurableHooks(after_agent_loop=after_loop,
                         before_agent_loop=lambda ctx: loops.__setitem__("before", loops["before"] + 1))
    agent = session(hooks=hooks)
    await agent.send("start")
    await agent.wait_for_idle()
    assert loops == {"before": 1, "after": 2}
    # applied together: the compaction runs before the queued message's turn
    assert [k for k, _ in texts(agent)] == ["summary", "user", "assistant"]
    assert texts(agent)[0][1] == "summary: start"


async def test_a_failing_action_never_fails_the_run() -> None:
    agent = session(hooks=DurableHooks(after_turn=lambda ctx: [Steer("")]))  # empty text: refused
    await agent.send("fine")
    await agent.wait_for_idle()
    assert texts(agent)[-1] == ("assistant", "echo: fine")


async def test_features_merge_by_the_rules() -> None:
    log: list[str] = []
    a = DurableFeature(name="a", instructions=lambda ctx: "From a.", before_turn=noted(log, "a"),
                       tools=lambda ctx: [Tool("ta", "A.", {"type": "object"}, lambda x: "")],
                       model_changed=lambda ctx, ch: None, after_turn=lambda ctx: [Send("from a")])
    b = DurableFeature(name="b", instructions=lambda ctx: "", before_turn=noted(log, "b"),
                       tools=lambda ctx: [Tool("tb", "B.", {"type": "object"}, lambda x: "")],
                       model_changed=lambda ctx, ch: "b hands off", after_turn=lambda ctx: [Compact()])
    c = DurableFeature(name="c", instructions=lambda ctx: "From c.", model_changed=lambda ctx, ch: "c hands off")
    merged = merge_features([a, b, c])
    ctx = SessionContext("s", "m", None, None, None)
    assert merged.instructions is not None and merged.instructions(ctx) == "From a.\n\nFrom c."
    assert merged.tools is not None and [t.name for t in merged.tools(ctx)] == ["ta", "tb"]
    assert merged.after_turn is not None and merged.after_turn(ctx) == [Send("from a"), Compact()]
    change = ModelChange("m", "n", None, None, None, None, None, True)  # type: ignore[arg-type]
    assert merged.model_changed is not None and merged.model_changed(ctx, change) == "b hands off"
    assert merged.on_event is None and merged.after_agent_loop is None
    agent = session(llm=echo_model(), features=[a, b])
    agent.hooks.after_turn = None
    await agent.send("x")
    await agent.wait_for_idle()
    assert log == ["a", "b"]

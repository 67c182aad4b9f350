"""The tool loop: failures the model can correct, limits, approval, parallel batches, cancel, hooks, streaming."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import pytest

from agent import (
    Agent,
    Feature,
    Hooks,
    InferenceFinished,
    RunFinished,
    TextDeltaEvent,
    ToolFinished,
    ToolStarted,
    tool,
)
from agent.errors import AgentBusyError, ProviderServerError
from agent.providers import (
    FunctionModel,
    ModelRequest,
    ModelResponse,
    Provider,
    ResponseDone,
    ScriptedModel,
    StreamEvent,
    TextDelta,
    calls,
    raw_call,
    tool_results,
)


@tool
async def forecast(city: str, days: int = 1) -> str:
    """The forecast for a city.

    Args:
        city: the city
        days: how many days
    """
    return f"{city}: sunny for {days} day(s)"


@tool
async def explode(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"boom: {reason}")


@tool(timeout=0.01)
async def sluggish() -> str:
    """Never finishes in time."""
    await asyncio.sleep(10)
    return "late"


def answer_after_tools(request: ModelRequest) -> Any:
    """A model that calls nothing itself: it answers with the results it was sent."""
    results = tool_results(request)
    return " | ".join(f"{r['name']}={r['content']}" for r in results) or "no results"


# ---------------------------------------------------------------------- tool failures


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (raw_call("weather", "{}", "c1"), "Error: there is no tool named 'weather'; the tools you can call are: "
                                          "forecast, explode, sluggish"),
        (raw_call("forecast", '{"city": ', "c1"), "Error: arguments for forecast are not valid JSON"),
        (calls(("forecast", {"days": 2}, "c1")), "Error: arguments for forecast do not match its schema: "
                                                 "(root): 'city' is a required property"),
        (calls(("explode", {"reason": "test"}, "c1")), "Error: explode failed: ValueError: boom: test"),
        (calls(("sluggish", {}, "c1")), "Error: sluggish did not finish within 0.01 s"),
    ],
    ids=["unknown tool", "invalid json", "schema violation", "exception", "timeout"],
)
async def test_every_tool_failure_becomes_an_error_result_the_model_sees(response: ModelResponse, expected: str) -> None:
    seen: list[dict[str, Any]] = []

    def model(request: ModelRequest) -> Any:
        results = tool_results(request)
        if not results:
            return response
        seen.extend(results)
        return "I could not do that, sorry."

    agent = Agent("a", provider=FunctionModel(model), tools=[forecast, explode, sluggish])
    result = await agent.run("go")
    assert result.status == "answered"
    assert result.answer == "I could not do that, sorry."
    assert len(seen) == 1
    assert seen[0]["is_error"] is True
    assert seen[0]["call_id"] == "c1"
    assert seen[0]["content"].startswith(expected)


async def test_the_model_can_correct_a_call_from_the_error() -> None:
    model = ScriptedModel([calls(("forecast", {"town": "Oslo"}, "c1")), calls(("forecast", {"city": "Oslo"}, "c2")),
                           "Sunny in Oslo."])
    result = await Agent("a", provider=model, tools=[forecast]).run("weather in Oslo?")
    assert result.answer == "Sunny in Oslo." and result.tool_calls == 2
    second = tool_results(model.requests[1])[0]
    assert second["is_error"] and "expected city: string (required), days: integer" in second["content"]
    assert tool_results(model.requests[2])[1] == {"call_id": "c2", "name": "forecast",
                                                  "content": "Oslo: sunny for 1 day(s)", "is_error": False}


async def test_a_tool_returning_data_is_sent_as_json() -> None:
    @tool
    def lookup() -> dict[str, Any]:
        """Data."""
        return {"free": ["10:00"], "n": 1}

    model = ScriptedModel([calls(("lookup", {}, "c1")), "ok"])
    await Agent("a", provider=model, tools=[lookup]).run("x")
    assert tool_results(model.requests[1])[0]["content"] == '{"free": ["10:00"], "n": 1}'


# ---------------------------------------------------------------------- limits


def test_default_limits() -> None:
    agent = Agent("a", provider=ScriptedModel([]))
    assert (agent.max_turns, agent.max_tool_calls) == (50, 200)


async def test_max_turns_ends_the_run_with_a_clear_status() -> None:
    model = ScriptedModel([calls(("forecast", {"city": "Oslo"}))], repeat=True)
    agent = Agent("looper", provider=model, tools=[forecast], max_turns=3)
    result = await agent.run("go")
    assert result.status == "failed"
    assert result.stop_reason == "max_turns"
    assert result.error == "agent looper reached its limit of 3 turns without an answer"
    assert result.turns == 3 and model.calls_made == 3 and result.tool_calls == 3


async def test_max_tool_calls_ends_the_run_before_running_the_batch() -> None:
    ran: list[str] = []

    @tool
    async def note(text: str) -> str:
        """Note it."""
        ran.append(text)
        return "noted"

    model = ScriptedModel([
        calls(("note", {"text": "1"}), ("note", {"text": "2"})),
        calls(("note", {"text": "3"}), ("note", {"text": "4"})),
        "the next run works",
    ])
    agent = Agent("noter", provider=model, tools=[note], max_tool_calls=3)
    result = await agent.run("go")
    assert result.status == "failed" and result.stop_reason == "max_tool_calls"
    assert result.error == "agent noter would exceed its limit of 3 tool calls (2 made, 2 more requested)"
    assert ran == ["1", "2"]
    # every call the model made has a result, so the conversation can go on
    followup = await agent.run("and now?")
    assert followup.answer == "the next run works"
    results = tool_results(model.requests[2])
    assert [r["is_error"] for r in results] == [False, False, True, True]
    assert results[2]["content"].startswith("Error: not run: agent noter would exceed its limit")


# ---------------------------------------------------------------------- approval


async def test_approval_runs_before_each_call_and_a_rejection_is_a_result() -> None:
    asked: list[tuple[str, str]] = []

    async def approve(call: Any, t: Any) -> bool:
        asked.append((call.name, t.name))
        return "Oslo" in call.arguments

    model = ScriptedModel([calls(("forecast", {"city": "Oslo"}, "c1"), ("forecast", {"city": "Paris"}, "c2")),
                           "done"])
    result = await Agent("a", provider=model, tools=[forecast], approve=approve).run("go")
    assert result.status == "answered"
    assert asked == [("forecast", "forecast"), ("forecast", "forecast")]
    ok, refused = tool_results(model.requests[1])
    assert ok["content"] == "Oslo: sunny for 1 day(s)" and not ok["is_error"]
    assert refused["is_error"] and refused["content"] == (
        "Error: the call to forecast was not approved; do not retry it unchanged")


class _Verdict:
    """An awaitable that is not a coroutine (a library's own future type)."""

    def __init__(self, value: object) -> None:
        self.value = value

    def __await__(self):  # type: ignore[no-untyped-def]
        yield from asyncio.sleep(0).__await__()
        return self.value


async def _false() -> bool:
    return False


@pytest.mark.parametrize("answer", [
    lambda: asyncio.ensure_future(_false()), lambda: _Verdict(False), lambda: _Verdict(True),
    lambda: "no", lambda: None, lambda: 1, lambda: [], lambda: _Verdict(_Verdict(False)), lambda: True,
], ids=["future-false", "awaitable-false", "awaitable-true", "str", "none", "one", "list", "nested", "true"])
async def test_only_true_approves_whatever_the_callback_hands_back(answer: Any) -> None:
    ran: list[str] = []

    @tool
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: how much
        """
        ran.append("paid")
        return "paid"

    given = answer()
    approves = given is True or (isinstance(given, _Verdict) and given.value is True)
    model = ScriptedModel([calls(("pay", {"amount": 5})), "done"])
    result = await Agent("a", provider=model, tools=[pay], approve=lambda call, t: given).run("go")
    assert result.status == "answered"
    assert ran == (["paid"] if approves else [])
    (seen,) = tool_results(model.requests[1])
    assert seen["is_error"] is not approves


async def test_approval_is_not_asked_for_a_call_that_cannot_run() -> None:
    asked: list[str] = []
    model = ScriptedModel([raw_call("forecast", "{oops", "c1"), "done"])
    await Agent("a", provider=model, tools=[forecast], approve=lambda c, t: asked.append(c.id) or True).run("go")
    assert asked == []


# ---------------------------------------------------------------------- parallel batches


async def test_calls_run_in_parallel_and_results_land_in_call_order() -> None:
    started: list[str] = []
    all_started = asyncio.Event()
    finished: list[str] = []

    @tool
    async def wait(name: str, delay: float) -> str:
        """Wait a while."""
        started.append(name)
        if len(started) == 3:
            all_started.set()
        await asyncio.wait_for(all_started.wait(), 5)  # only parallel calls all get here
        await asyncio.sleep(delay)
        finished.append(name)
        return f"{name} done"

    model = ScriptedModel([
        calls(("wait", {"name": "a", "delay": 0.03}, "c1"), ("wait", {"name": "b", "delay": 0.0}, "c2"),
              ("wait", {"name": "c", "delay": 0.01}, "c3")),
        "all done",
    ])
    result = await Agent("a", provider=model, tools=[wait]).run("go")
    assert result.answer == "all done"
    assert finished == ["b", "c", "a"]  # the later calls finished first ...
    assert [r["call_id"] for r in tool_results(model.requests[1])] == ["c1", "c2", "c3"]  # ... yet land in order
    kinds = [ci.item.kind for ci in model.requests[1].context if ci.item.kind in ("tool_call", "tool_result")]
    assert kinds == ["tool_call"] * 3 + ["tool_result"] * 3


# ---------------------------------------------------------------------- cancel and busy


async def test_cancel_aborts_a_running_tool() -> None:
    entered = asyncio.Event()
    cancelled = asyncio.Event()

    @tool(timeout=None)
    async def slow() -> str:
        """Slow."""
        entered.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "late"

    model = ScriptedModel([calls(("slow", {}, "c1"), ("forecast", {"city": "Oslo"}, "c2")), "after the cancel"])
    agent = Agent("a", provider=model, tools=[slow, forecast])
    task = asyncio.create_task(agent.run("go"))
    await entered.wait()
    assert agent.busy
    assert agent.cancel() is True
    result = await task
    assert result.status == "cancelled" and result.stop_reason == "cancelled"
    assert cancelled.is_set() and not agent.busy
    # the finished call keeps its result, the cancelled one says so: the next run goes on
    assert (await agent.run("again")).answer == "after the cancel"
    results = tool_results(model.requests[1])
    assert results[0]["content"] == "Error: cancelled before it finished." and results[0]["is_error"]
    assert results[1]["content"] == "Oslo: sunny for 1 day(s)"


async def test_cancel_aborts_the_model_request() -> None:
    entered = asyncio.Event()
    aborted = asyncio.Event()

    async def slow_model(request: ModelRequest) -> str:
        entered.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            aborted.set()
            raise
        return "late"

    agent = Agent("a", provider=FunctionModel(slow_model))
    task = asyncio.create_task(agent.run("go"))
    await entered.wait()
    agent.cancel()
    result = await task
    assert result.status == "cancelled" and aborted.is_set()
    assert agent.cancel() is False  # nothing runs any more


async def test_cancelling_the_caller_cancels_the_run() -> None:
    entered = asyncio.Event()

    async def slow_model(request: ModelRequest) -> str:
        entered.set()
        await asyncio.sleep(30)
        return "late"

    agent = Agent("a", provider=FunctionModel(slow_model))
    task = asyncio.create_task(agent.run("go"))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(5):
        await asyncio.sleep(0)
    assert not agent.busy


async def test_a_second_run_on_a_busy_instance_is_refused() -> None:
    release = asyncio.Event()

    async def waiting_model(request: ModelRequest) -> str:
        await release.wait()
        return "first"

    agent = Agent("a", provider=FunctionModel(waiting_model))
    first = asyncio.create_task(agent.run("one"))
    await asyncio.sleep(0)
    with pytest.raises(AgentBusyError, match="agent a is already running a turn"):
        await agent.run("two")
    with pytest.raises(AgentBusyError):
        async for _ in agent.stream("two"):
            pass  # draining it is what is refused
    release.set()
    assert (await first).answer == "first"
    assert (await agent.run("three")).answer == "first"  # idle again


# ---------------------------------------------------------------------- provider failures


async def test_a_provider_error_fails_the_run() -> None:
    model = ScriptedModel([ProviderServerError("upstream 503", provider="scripted", status=503)])
    result = await Agent("a", provider=model).run("go")
    assert result.status == "failed" and result.stop_reason == "provider_error"
    assert result.error == "ProviderServerError: upstream 503"


# ---------------------------------------------------------------------- hooks and features


async def test_hooks_fire_in_order() -> None:
    events: list[str] = []

    def log(name: str) -> Any:
        async def hook(ctx: Any, *args: Any) -> None:
            events.append(f"{name}:{ctx.turn}" if name.endswith("turn") else name)
        return hook

    hooks = Hooks(**{n: log(n) for n in (
        "before_loop", "after_loop", "before_turn", "after_turn", "before_inference", "after_inference",
        "on_tool_start", "on_tool_end")}, on_progress=lambda ctx, line: events.append(f"progress:{line}"))

    @tool(progress="Checking…")
    async def check() -> str:
        """Check."""
        return "ok"

    model = ScriptedModel([calls(("check", {})), "done"])
    await Agent("a", provider=model, tools=[check], hooks=hooks).run("go")
    assert events == [
        "before_loop",
        "before_turn:1", "before_inference", "after_inference", "on_tool_start", "progress:Checking…", "on_tool_end",
        "after_turn:1",
        "before_turn:2", "before_inference", "after_inference", "after_turn:2",
        "after_loop",
    ]


async def test_a_failing_hook_never_fails_the_run() -> None:
    def broken(ctx: Any, *args: Any) -> None:
        raise RuntimeError("hook bug")

    result = await Agent("a", provider=ScriptedModel(["fine"]), hooks=Hooks(before_inference=broken)).run("go")
    assert result.status == "answered" and result.answer == "fine"


async def test_features_merge_instructions_tools_and_hooks() -> None:
    seen: list[str] = []

    @tool
    async def remember(fact: str) -> str:
        """Remember."""
        return "ok"

    def failing(ctx: Any) -> None:
        seen.append("memory")
        raise RuntimeError("observer bug")

    memory = Feature("memory", instructions="Remember what the user tells you.", tools=[remember],
                     hooks=Hooks(before_loop=failing))
    style = Feature("style", instructions="Answer briefly.", tools=[forecast],
                    hooks=Hooks(before_loop=lambda ctx: seen.append("style")))
    model = ScriptedModel(["ok"])
    agent = Agent("a", provider=model, features=[memory, style])
    await agent.run("hi")
    assert seen == ["memory", "style"]  # observers fan out in order, even past a failing one
    assert list(agent.tools) == ["remember", "forecast"]
    request = model.requests[0]
    sections = [ci.origin.source for ci in request.context if ci.item.kind == "prompt_section"]
    assert sections == ["base", "feature:memory", "feature:style", "tools"]
    assert [d["name"] for d in request.tool_definitions()] == ["remember", "forecast"]
    system = request.system_text()
    assert system.index("Remember what the user") < system.index("Answer briefly.")


# ---------------------------------------------------------------------- streaming


@tool(progress=lambda args: f"Looking up {args['city']}…")
async def lookup(city: str) -> str:
    """Look up the weather."""
    return f"{city}: sunny"


class StreamingModel(Provider):
    """Streams its text word by word; calls ``lookup`` on the first call."""

    name = "streaming"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        raise AssertionError("a streamed run uses stream()")

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        if not tool_results(request):
            yield TextDelta("Let me check. ")
            yield ResponseDone(calls(("lookup", {"city": "Oslo"}, "c1"), text="Let me check. "))
            return
        for word in ("It ", "is ", "sunny."):
            yield TextDelta(word)
        yield ResponseDone(ModelResponse("It is sunny."))


async def test_stream_yields_deltas_tool_events_and_the_result() -> None:
    agent = Agent("a", provider=StreamingModel(), tools=[lookup])
    events = [event async for event in agent.stream("weather?")]
    assert [type(e).__name__ for e in events] == [
        "TextDeltaEvent", "InferenceFinished", "ToolStarted", "ToolFinished",
        "TextDeltaEvent", "TextDeltaEvent", "TextDeltaEvent", "InferenceFinished", "RunFinished",
    ]
    assert [e.text for e in events if isinstance(e, TextDeltaEvent)] == ["Let me check. ", "It ", "is ", "sunny."]
    started = next(e for e in events if isinstance(e, ToolStarted))
    assert (started.call_id, started.name, started.progress) == ("c1", "lookup", "Looking up Oslo…")
    finished = next(e for e in events if isinstance(e, ToolFinished))
    assert (finished.call_id, finished.result, finished.is_error) == ("c1", "Oslo: sunny", False)
    first = next(e for e in events if isinstance(e, InferenceFinished))
    assert (first.turn, first.tool_calls) == (1, 1)
    done = events[-1]
    assert isinstance(done, RunFinished) and done.result.ok and done.result.answer == "It is sunny."


async def test_run_with_stream_inference_uses_the_provider_stream() -> None:
    result = await Agent("a", provider=StreamingModel(), tools=[lookup], stream_inference=True).run("weather?")
    assert result.answer == "It is sunny."


async def test_stream_falls_back_to_complete_for_a_provider_that_does_not_stream() -> None:
    events = [e async for e in Agent("a", provider=ScriptedModel(["whole answer"])).stream("hi")]
    assert [type(e).__name__ for e in events] == ["TextDeltaEvent", "InferenceFinished", "RunFinished"]
    assert isinstance(events[0], TextDeltaEvent) and events[0].text == "whole answer"


async def test_leaving_a_stream_early_cancels_the_run() -> None:
    release = asyncio.Event()

    @tool(timeout=None)
    async def block() -> str:
        """Block."""
        await release.wait()
        return "never"

    agent = Agent("a", provider=ScriptedModel([calls(("block", {}))]), tools=[block])
    async with aclosing(agent.stream("go")) as events:
        async for event in events:
            if isinstance(event, ToolStarted):
                break
    assert not agent.busy

"""AgentOrchestrator: config defaults, the execution context, events, steps, sequential tools,
update_config, cancellation at iteration boundaries, current_execution."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import pytest

from agent import Tool
from agent.errors import AgentBusyError, ProviderServerError
from agent.orchestration import AgentConfig, AgentConfigError, AgentOrchestrator, AgentStep, OrchestratorEvent
from agent.providers import FunctionModel, ModelRequest, ModelResponse, ScriptedModel, calls
from tracer import Recorder, Store


def echo_tool(log: list[str] | None = None, name: str = "echo") -> Tool:
    async def run(arguments: dict[str, Any]) -> str:
        if log is not None:
            log.append(f"start {arguments['text']}")
            await asyncio.sleep(0)
            log.append(f"end {arguments['text']}")
        return f"echo {arguments['text']}"

    return Tool(name, "Echo text", {"type": "object", "properties": {"text": {"type": "string"}},
                                    "required": ["text"]}, run)


def make(provider: Any, **extra: Any) -> AgentOrchestrator:
    return AgentOrchestrator(AgentConfig(name="helper", system_prompt="You help.", provider=provider,
                                         model="m-1", **extra))


def test_config_defaults_are_the_seeds_and_reach_the_model_settings() -> None:
    model = ScriptedModel(["hi"])
    orchestrator = make(model)
    assert (orchestrator.config.max_iterations, orchestrator.config.max_tokens, orchestrator.config.temperature) == (
        10, 4096, 0.7)
    asyncio.run(orchestrator.execute("hello"))
    assert model.requests[0].settings() == {"model": "m-1", "temperature": 0.7, "max_tokens": 4096}
    assert orchestrator.agent.max_turns == 10


@pytest.mark.parametrize("changes, message", [
    ({"max_iterations": 0}, "max_iterations must be at least 1"),
    ({"temperature": 3.0}, "temperature must be between 0 and 2"),
    ({"model": ""}, "missing model"),
    ({"tools": [echo_tool(), echo_tool()]}, "more than one tool named echo"),
])
def test_a_config_out_of_range_names_the_setting(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(AgentConfigError, match=message):
        AgentConfig(**{"name": "a", "system_prompt": "p", "provider": ScriptedModel([]), "model": "m", **changes})


async def test_execute_returns_the_execution_context_with_timed_tool_calls_and_messages(store: Store) -> None:
    model = ScriptedModel([calls(("echo", {"text": "one"}), ("missing", {})), "done"])
    orchestrator = make(model, tools=[echo_tool()], recorder=Recorder(store))
    context = await orchestrator.execute("go", [{"role": "user", "content": "earlier"},
                                                {"role": "assistant", "content": "noted"}], {"ticket": 7})
    assert context.status == "completed" and context.ok and context.response == "done" and context.error is None
    assert context.iteration == 2 and context.metadata["ticket"] == 7
    assert context.started_at <= context.ended_at  # type: ignore[operator]
    assert [(t.name, t.success) for t in context.tool_calls] == [("echo", True), ("missing", False)]
    assert context.tool_calls[0].result == "echo one" and context.tool_calls[0].duration_ms >= 0
    assert "there is no tool named 'missing'" in context.tool_calls[1].result
    kinds = [ci.item.kind for ci in context.messages]
    assert kinds == ["user", "assistant", "user", "tool_call", "tool_call", "tool_result", "tool_result", "assistant"]
    assert orchestrator.current_execution is None and orchestrator.last_execution is context
    store.flush()
    assert store.get_run(context.run_id or "").status == "answered"
    # the history reached the model before the message
    assert [ci.item.text for ci in model.requests[0].context if ci.item.kind in ("user", "assistant")] == [
        "earlier", "noted", "go"]


async def test_history_that_is_not_a_message_is_refused_naming_it() -> None:
    with pytest.raises(AgentConfigError, match="history message 1"):
        await make(ScriptedModel(["x"])).execute("go", [{"role": "user", "content": "a"}, {"text": "b"}])
    with pytest.raises(AgentConfigError, match="role 'robot'"):
        await make(ScriptedModel(["x"])).execute("go", [{"role": "robot", "content": "a"}])


async def test_events_reach_sync_and_async_subscribers_and_a_failing_one_is_only_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    orchestrator = make(ScriptedModel([calls(("echo", {"text": "a"})), "ok"]), tools=[echo_tool()])
    seen: list[tuple[str, int, str | None]] = []

    async def later(event: OrchestratorEvent) -> None:
        await asyncio.sleep(0)
        seen.append((event.type, event.iteration, event.tool.name if event.tool else None))

    def broken(event: OrchestratorEvent) -> None:
        raise RuntimeError("subscriber bug")

    for event in ("iteration", "tool_call", "complete"):
        orchestrator.on(event, later)  # type: ignore[arg-type]
    orchestrator.on("iteration", broken)
    context = await orchestrator.execute("go")
    assert context.status == "completed"
    assert seen == [("iteration", 1, None), ("tool_call", 1, "echo"), ("iteration", 2, None), ("complete", 2, None)]
    assert "subscriber" in caplog.text and "subscriber bug" in caplog.text
    orchestrator.off("iteration", broken)
    with pytest.raises(AgentConfigError, match="no event 'finished'"):
        orchestrator.on("finished", later)  # type: ignore[arg-type]


async def test_a_provider_failure_ends_failed_with_an_error_event() -> None:
    orchestrator = make(ScriptedModel([ProviderServerError("upstream 502", provider="scripted")]))
    errors: list[str | None] = []
    orchestrator.on("error", lambda event: errors.append(event.error))
    context = await orchestrator.execute("go")
    assert context.status == "failed" and "upstream 502" in (context.error or "")
    assert errors == [context.error]


async def test_tools_of_one_response_run_one_after_another() -> None:
    log: list[str] = []
    orchestrator = make(ScriptedModel([calls(("echo", {"text": "a"}), ("echo", {"text": "b"})), "ok"]),
                        tools=[echo_tool(log)])
    await orchestrator.execute("go")
    assert log == ["start a", "end a", "start b", "end b"]  # in parallel it would be start a, start b, ...


async def test_update_config_applies_to_the_next_execution_and_refuses_unknown_settings() -> None:
    model = ScriptedModel(["a", "b"])
    orchestrator = make(model)
    await orchestrator.execute("one")
    orchestrator.update_config(temperature=0.1, tools=[echo_tool()])
    await orchestrator.execute("two")
    assert model.requests[1].settings()["temperature"] == 0.1
    assert [d["name"] for d in model.requests[1].tool_definitions()] == ["echo"]
    with pytest.raises(AgentConfigError, match="no setting named colour"):
        orchestrator.update_config(colour="blue")


async def test_update_config_and_a_second_execute_are_refused_while_executing() -> None:
    gate = asyncio.Event()

    async def slow(request: ModelRequest) -> str:
        await gate.wait()
        return "late"

    orchestrator = make(FunctionModel(slow))
    task = asyncio.ensure_future(orchestrator.execute("go"))
    await asyncio.sleep(0.01)
    assert orchestrator.current_execution is not None and orchestrator.current_execution.status == "running"
    with pytest.raises(AgentBusyError):
        orchestrator.update_config(temperature=0.2)
    with pytest.raises(AgentBusyError):
        await orchestrator.execute("again")
    gate.set()
    assert (await task).response == "late"


async def test_cancel_between_iterations_is_taken_at_the_next_boundary(store: Store) -> None:
    model = ScriptedModel([calls(("echo", {"text": "a"})), "never"])
    orchestrator = make(model, tools=[echo_tool()], recorder=Recorder(store))
    orchestrator.on("tool_call", lambda event: orchestrator.cancel())
    context = await orchestrator.execute("go")
    assert context.status == "cancelled" and model.calls_made == 1
    assert [t.name for t in context.tool_calls] == ["echo"]
    assert orchestrator.cancel() is False  # nothing in flight any more
    store.flush()
    data = store.load_run(context.run_id or "")
    assert data.run.status == "cancelled" and [s.kind for s in data.stages if s.kind == "inference"] == ["inference"]


async def test_cancel_aborts_the_model_call_in_flight() -> None:
    started = asyncio.Event()

    async def hang(request: ModelRequest) -> str:
        started.set()
        await asyncio.sleep(30)
        return "never"

    orchestrator = make(FunctionModel(hang))
    task = asyncio.ensure_future(orchestrator.execute("go"))
    await started.wait()
    assert orchestrator.cancel() is True
    context = await asyncio.wait_for(task, 5)
    assert context.status == "cancelled" and "cancelled" in (context.error or "")


async def test_out_of_iterations_completes_with_the_last_thing_the_model_said() -> None:
    looping = ScriptedModel([calls(("echo", {"text": "x"}), text="still thinking")], repeat=True)
    context = await make(looping, tools=[echo_tool()], max_iterations=2).execute("go")
    assert (context.status, context.response, context.metadata["stop_reason"]) == (
        "completed", "still thinking", "max_iterations")
    silent = ScriptedModel([calls(("echo", {"text": "x"}))], repeat=True)
    context = await make(silent, tools=[echo_tool()], max_iterations=1).execute("go")
    assert context.response == "[Max iterations reached]"


async def test_stream_yields_thinking_tool_steps_and_the_response_with_the_context() -> None:
    def broken(arguments: dict[str, Any]) -> str:
        raise ValueError("disk full")

    tools = [echo_tool(), Tool("save", "Save", {"type": "object", "properties": {}}, broken)]
    model = ScriptedModel([calls(("echo", {"text": "a"}), ("save", {}), text="let me check"), "saved nothing"])
    steps: list[AgentStep] = [step async for step in make(model, tools=tools).stream("go")]
    assert [(s.type, s.tool.name if s.tool else None) for s in steps] == [
        ("thinking", None), ("tool_call", "echo"), ("tool_result", "echo"), ("tool_call", "save"),
        ("tool_result", "save"), ("response", None)]
    assert steps[0].content == "let me check"
    assert steps[4].tool is not None and steps[4].tool.success is False and "disk full" in steps[4].content
    last = steps[-1]
    assert last.context is not None and last.context.status == "completed" and last.content == "saved nothing"


async def test_a_failed_stream_ends_with_an_error_step() -> None:
    steps = [s async for s in make(ScriptedModel([ProviderServerError("down", provider="x")])).stream("go")]
    assert [s.type for s in steps] == ["error"] and steps[0].context is not None
    assert steps[0].context.status == "failed"


async def test_closing_a_stream_early_cancels_the_execution() -> None:
    async def slow_second_turn(request: ModelRequest) -> ModelResponse | str:
        if not any(ci.item.kind == "tool_result" for ci in request.context):
            return calls(("echo", {"text": "a"}))
        await asyncio.sleep(30)
        return "too late"

    orchestrator = make(FunctionModel(slow_second_turn), tools=[echo_tool()])
    stream = orchestrator.stream("go")
    async with contextlib.aclosing(stream):
        async for step in stream:
            if step.type == "tool_call":
                break
    assert orchestrator.current_execution is None
    assert orchestrator.last_execution is not None and orchestrator.last_execution.status == "cancelled"


async def test_verbose_logs_every_event(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="footprint.orchestration")
    await make(ScriptedModel([calls(("echo", {"text": "a"})), "ok"]), tools=[echo_tool()], verbose=True).execute("go")
    logged = [r.getMessage() for r in caplog.records if r.name == "footprint.orchestration"]
    assert any("tool_call 1 echo ok" in line for line in logged) and any("complete" in line for line in logged)


async def test_dynamic_prompts_compose_the_users_facts_into_the_system_prompt() -> None:
    from agent import Fact, InMemoryFacts
    from agent.orchestration import MemoryOptions

    model = FunctionModel(lambda request: request.system_text())
    facts = InMemoryFacts({"maya": [Fact("profile.city", "Maya lives in Lyon")]})
    options = MemoryOptions(facts=facts, custom_instructions=["Answer in French."])
    plain = await make(model, user_id="maya", memory_options=options).execute("hi")
    assert "Lyon" not in plain.response
    dynamic = await make(model, user_id="maya", memory_options=options, dynamic_prompts=True).execute("hi")
    assert "Lyon" in dynamic.response and "Answer in French." in dynamic.response


def test_the_model_response_type_is_what_function_models_return() -> None:
    assert isinstance(calls(("echo", {"text": "a"})), ModelResponse)

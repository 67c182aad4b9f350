"""AgentOrchestrator: an event-driven agent with an execution context, built on the Agent's own loop.

    orchestrator = AgentOrchestrator(AgentConfig(name="researcher", system_prompt="...",
                                                 provider=model, model="gpt-4o", tools=[search]))
    orchestrator.on("tool_call", lambda event: print(event.tool.name, event.tool.success))
    context = await orchestrator.execute("What is the tallest building?")
    async for step in orchestrator.stream("And the second tallest?"):
        print(step.type, step.content)

Each execution is one run of an :class:`agent.Agent` (the one loop footprint has, recorded stage
by stage) on a fresh conversation holding the given history. The orchestrator adds what the seed
asks of it on top: the execution context, events for subscribers, steps for a stream, tools run
one after another, and cancellation — ``cancel()`` aborts the model call or tool in flight and is
checked again at every iteration boundary.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from tracer import ContextItem, Item, ItemKind, Origin, OriginKind

from .._agent import Agent, ModelSettings
from .._events import RunResult
from .._hooks import Hooks, RunContext
from .._pump import pump
from ..errors import AgentBusyError
from ..providers import ModelResponse, ToolCall
from ._config import AgentConfig, AgentStep, ExecutionContext, ToolCallRecord
from ._lineage import ChildLink, LinkedRecorder
from .errors import AgentConfigError

log = logging.getLogger("footprint.orchestration")

EventType = Literal["iteration", "tool_call", "complete", "error"]
EVENT_TYPES: tuple[str, ...] = ("iteration", "tool_call", "complete", "error")
MAX_ITERATIONS_REACHED = "[Max iterations reached]"


@dataclass(frozen=True)
class OrchestratorEvent:
    """What a subscriber is told: the event, the execution, and the iteration, tool call or error."""

    type: EventType
    context: ExecutionContext
    iteration: int = 0
    tool: ToolCallRecord | None = None
    error: str | None = None


Subscriber = Callable[[OrchestratorEvent], Any]
HistoryMessage = ContextItem | dict[str, Any]


class AgentOrchestrator:
    """An agent run through an execution context: ``execute``, ``stream``, events, ``cancel``.

    One execution runs at a time per orchestrator (a second is an :class:`agent.errors.AgentBusyError`).
    """

    def __init__(self, config: AgentConfig) -> None:
        config.check()
        self._config = config
        self._subscribers: dict[str, list[Subscriber]] = {}
        self._current: ExecutionContext | None = None
        self._steps: Callable[[AgentStep], None] | None = None
        self._cancel_requested = False
        self._started_calls: set[str] = set()
        self.last_execution: ExecutionContext | None = None
        self.agent = self._build_agent()
        if config.verbose:
            for event in EVENT_TYPES:
                self.on(event, _log_event)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ configuration

    @property
    def name(self) -> str:
        """The agent's name."""
        return self._config.name

    @property
    def config(self) -> AgentConfig:
        """The current configuration (change it with :meth:`update_config`)."""
        return self._config

    def update_config(self, **changes: Any) -> None:
        """Change settings (``temperature=0.2``, ``tools=[...]``); applies from the next execution.

        Unknown settings and invalid values are an :class:`AgentConfigError`; changing the config
        while an execution runs is an :class:`AgentBusyError`.
        """
        if self._current is not None:
            raise AgentBusyError(f"agent {self.name} is executing; update its config once the execution ends")
        config = self._config.updated(changes)
        config.check()
        self._config = config
        self.agent = self._build_agent()

    def _build_agent(self) -> Agent:
        config = self._config
        recorder = config.recorder
        if recorder is not None and recorder.enabled and not isinstance(recorder, LinkedRecorder):
            recorder = LinkedRecorder(recorder)
        memory = config.memory_options
        dynamic = config.dynamic_prompts and config.user_id is not None
        clock: Callable[[], datetime] | None = None
        if dynamic:
            clock = memory.clock or datetime.now
        return Agent(
            config.name,
            provider=config.provider,
            persona=config.system_prompt,
            model=ModelSettings(config.model, temperature=config.temperature, max_tokens=config.max_tokens),
            tools=config.tools,
            session_id=config.session_id,
            facts=memory.facts if dynamic else None,
            user_id=config.user_id,
            custom_instructions=memory.custom_instructions if dynamic else (),
            capabilities=memory.capabilities if dynamic else (),
            workspace=memory.workspace if dynamic else None,
            autonomy=memory.autonomy if dynamic else None,
            clock=clock,
            recorder=recorder,
            max_turns=config.max_iterations,
            hooks=Hooks(before_turn=self._before_turn, after_inference=self._after_inference,
                        on_tool_start=self._on_tool_start, on_tool_end=self._on_tool_end),
            sequential_tools=True,
        )

    # ------------------------------------------------------------------ events

    def on(self, event: EventType, callback: Subscriber) -> None:
        """Call ``callback(OrchestratorEvent)`` (sync or async) on every ``event``.

        Events: ``iteration`` (a model call starts), ``tool_call`` (a call finished), ``complete``
        and ``error`` (the execution ended). A failing subscriber is logged; it never stops the run.
        """
        if event not in EVENT_TYPES:
            raise AgentConfigError(f"agent {self.name}: no event {event!r} (events: {', '.join(EVENT_TYPES)})")
        self._subscribers.setdefault(event, []).append(callback)

    def off(self, event: EventType, callback: Subscriber) -> None:
        """Stop calling ``callback`` on ``event`` (a callback not subscribed is ignored)."""
        callbacks = self._subscribers.get(event, [])
        if callback in callbacks:
            callbacks.remove(callback)

    async def _emit(self, event: OrchestratorEvent) -> None:
        for callback in list(self._subscribers.get(event.type, ())):
            try:
                value = callback(event)
                if inspect.isawaitable(value):
                    await value
            except Exception:  # a subscriber observes; it never fails the execution
                log.exception("subscriber %r of agent %s failed on %s", callback, self.name, event.type)

    def _step(self, step: AgentStep) -> None:
        if self._steps is not None:
            self._steps(step)

    # ------------------------------------------------------------------ the agent's hooks

    async def _before_turn(self, ctx: RunContext) -> None:
        execution = self._current
        if execution is None:
            return
        if self._cancel_requested:
            raise asyncio.CancelledError()  # the iteration boundary: the run ends recorded as cancelled
        execution.iteration = ctx.turn
        await self._emit(OrchestratorEvent("iteration", execution, iteration=ctx.turn))

    async def _after_inference(self, ctx: RunContext, response: ModelResponse) -> None:
        execution = self._current
        if execution is not None:
            execution.usage = execution.usage + response.usage
            if response.tool_calls and response.text:
                self._step(AgentStep("thinking", response.text, ctx.turn))

    async def _on_tool_start(self, ctx: RunContext, call: ToolCall) -> None:
        self._started_calls.add(call.id)
        self._step(AgentStep("tool_call", call.arguments, ctx.turn,
                             ToolCallRecord(call.id, call.name, call.arguments, started_at=time.time(),
                                            iteration=ctx.turn)))

    async def _on_tool_end(self, ctx: RunContext, call: ToolCall, content: str, is_error: bool,
                           duration_ms: float) -> None:
        execution = self._current
        if execution is None:
            return
        record = ToolCallRecord(call.id, call.name, call.arguments, content, not is_error,
                                time.time() - duration_ms / 1000, round(duration_ms, 3), ctx.turn)
        execution.tool_calls.append(record)
        if call.id not in self._started_calls:  # refused before it ran (unknown tool, bad arguments)
            self._step(AgentStep("tool_call", call.arguments, ctx.turn, record))
        self._step(AgentStep("tool_result", content, ctx.turn, record))
        await self._emit(OrchestratorEvent("tool_call", execution, iteration=ctx.turn, tool=record))

    # ------------------------------------------------------------------ executing

    @property
    def current_execution(self) -> ExecutionContext | None:
        """The execution in flight (None when idle); ``last_execution`` keeps the latest one."""
        return self._current

    async def execute(
        self,
        message: str,
        history: Sequence[HistoryMessage] = (),
        metadata: dict[str, Any] | None = None,
        *,
        link: ChildLink | None = None,
    ) -> ExecutionContext:
        """Run one execution to its end and return its context (never raises for a failed run).

        ``history`` are earlier messages (context items keep their origins; ``{"role", "content"}``
        dicts become user or assistant items). ``link`` records the run as the child of another run's
        ``subagent`` stage (teams and sub-agent tools set it).
        """
        if self._current is not None or self.agent.busy:
            raise AgentBusyError(f"agent {self.name} is already executing; wait for it or cancel it")
        agent = self.agent
        execution = ExecutionContext(id=uuid.uuid4().hex, agent=self.name, metadata=dict(metadata or {}))
        self._current, self._cancel_requested = execution, False
        self._started_calls = set()
        conversation = uuid.uuid4().hex
        agent.memory.create(self._config.system_prompt, id=conversation)
        agent.memory.add(conversation, *(_history_item(m, i) for i, m in enumerate(history)))
        agent.conversation_id = conversation
        execution.messages = agent.memory.require(conversation).messages  # live while it runs
        if link is not None and isinstance(agent.recorder, LinkedRecorder):
            agent.recorder.next_link = link
        try:
            result = await agent.run(message)
        except BaseException as exc:
            execution.status = "cancelled" if isinstance(exc, asyncio.CancelledError) else "failed"
            execution.error = f"{type(exc).__name__}: {exc}" if str(exc) else f"{self.name}'s caller was cancelled"
            execution.ended_at = time.time()
            await agent.settle()  # the run records itself as cancelled; its conversation must outlive it
            raise
        finally:
            agent.memory.delete(conversation)
            self._current = None
            self.last_execution = execution
        self._finish(execution, result)
        if execution.status == "completed":
            self._step(AgentStep("response", execution.response, execution.iteration, context=execution))
            await self._emit(OrchestratorEvent("complete", execution, iteration=execution.iteration))
        else:
            self._step(AgentStep("error", execution.error or execution.status, execution.iteration, context=execution))
            await self._emit(OrchestratorEvent("error", execution, iteration=execution.iteration,
                                               error=execution.error))
        return execution

    def _finish(self, execution: ExecutionContext, result: RunResult) -> None:
        execution.run_id = result.run_id
        execution.ended_at = time.time()
        execution.metadata.setdefault("stop_reason", result.stop_reason)
        if result.status == "answered":
            execution.status, execution.response = "completed", result.answer
        elif result.stop_reason == "max_turns":
            # the seed's rule: out of iterations, the execution completes with the last thing the model said
            last = next((ci.item.text for ci in reversed(execution.messages)
                         if ci.item.kind == ItemKind.ASSISTANT and ci.item.text), "")
            execution.status, execution.response = "completed", last or MAX_ITERATIONS_REACHED
            execution.metadata["stop_reason"] = "max_iterations"
        elif result.status == "cancelled":
            execution.status, execution.error = "cancelled", result.error
        else:
            execution.status, execution.error = "failed", result.error or result.status
            if result.pause is not None:
                execution.error = (f"a tool asked a person ({result.question}); an orchestrated agent does not "
                                   f"pause: use an Agent and Agent.resume() for tools that ask")
                execution.metadata["pause"] = result.pause.to_dict()

    async def stream(
        self,
        message: str,
        history: Sequence[HistoryMessage] = (),
        metadata: dict[str, Any] | None = None,
    ) -> AsyncIterator[AgentStep]:
        """Run one execution, yielding its steps; the last (``response`` or ``error``) holds the context.

        Closing the stream early cancels the execution.
        """
        queue: asyncio.Queue[AgentStep] = asyncio.Queue()
        self._steps = queue.put_nowait
        runner = asyncio.ensure_future(self.execute(message, history, metadata))
        try:
            async with contextlib.aclosing(pump(queue, runner, lambda s: s.context is not None)) as steps:
                async for step in steps:
                    yield step
                    if step.context is not None:
                        return
            runner.result()  # the execution raised before its last step: raise that here
        finally:
            self._steps = None
            if not runner.done():
                self.cancel()
                runner.cancel()
                await asyncio.gather(runner, return_exceptions=True)

    def cancel(self) -> bool:
        """Cancel the execution in flight: True when there was one.

        The model call or tool running now is aborted; a cancel that arrives between them is taken
        at the next iteration boundary. The context ends ``cancelled`` and the run is recorded so.
        """
        if self._current is None:
            return False
        self._cancel_requested = True
        if asyncio.current_task() is not self.agent._task:  # from inside the run (a tool, a subscriber):
            self.agent.cancel()                              # the boundary check ends it, cleanly
        return True


def _history_item(message: HistoryMessage, index: int) -> ContextItem:
    if isinstance(message, ContextItem):
        return message
    if not isinstance(message, dict) or "content" not in message:
        raise AgentConfigError(f"history message {index} must be a ContextItem or a dict with role and content, "
                               f"not {message!r:.80}")
    role = str(message.get("role", "user"))
    kinds = {"user": ItemKind.USER, "assistant": ItemKind.ASSISTANT, "system": ItemKind.SYSTEM}
    if role not in kinds:
        raise AgentConfigError(f"history message {index}: role {role!r} is not one of user, assistant, system")
    return ContextItem(Item.of_text(kinds[role], str(message["content"])),
                       Origin(OriginKind.USER, source=f"history[{index}]"))


def _log_event(event: OrchestratorEvent) -> None:
    """The verbose setting's subscriber: one log line per event."""
    detail = (f"{event.tool.name} {'ok' if event.tool.success else 'error'} {event.tool.duration_ms:.1f} ms"
              if event.tool else event.error or event.context.status)
    log.info("agent %s execution %s: %s %d %s", event.context.agent, event.context.id, event.type, event.iteration,
             detail)

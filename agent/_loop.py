"""The tool-calling loop of one run, recorded stage by stage.

    input -> memory -> prompt -> inference 1 -> tool batch (fork: tool a | tool b, join) ->
    inference 2 -> ... -> answer

Each inference's snapshot is the exact request the provider received; what the memory window or
the prompt length cap left out is recorded beside it as "not in context".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tracer import (
    ContextItem,
    EdgeKind,
    Item,
    ItemKind,
    OriginKind,
    RunRecording,
    RunStatus,
    StageKind,
    StageRecording,
    StageStatus,
)

from ._events import (
    AgentEvent,
    InferenceFinished,
    PauseState,
    RunResult,
    TextDeltaEvent,
    ToolFinished,
    ToolStarted,
)
from ._hooks import RunContext
from ._memory import DROPPED_BY_WINDOW
from ._prompt import PromptContext
from ._tools import PauseRun, Tool, result_text
from .errors import ProviderError, ToolArgumentsError, ToolNotFoundError, ToolRejectedError, ToolTimeoutError
from .providers import ModelRequest, ModelResponse, ResponseDone, TextDelta, ToolCall, Usage
from .providers._pricing import cost_of

if TYPE_CHECKING:
    from ._agent import Agent

APPROVED_WORDS = frozenset({"yes", "y", "approve", "approved", "ok", "okay", "allow", "go", "confirm", "confirmed"})


class _Stop(Exception):  # noqa: N818 - internal control flow
    def __init__(self, status: str, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


class _Paused(Exception):  # noqa: N818 - internal control flow
    def __init__(self, state: PauseState) -> None:
        super().__init__(state.question)
        self.state = state


class RunLoop:
    """One run of an agent: builds each snapshot, calls the provider, runs tools, records it all."""

    def __init__(self, agent: Agent, emit: Callable[[AgentEvent], None] | None) -> None:
        self.agent = agent
        self.emit = emit
        self.usage = Usage()
        self.turns = 0
        self.tool_calls = 0
        self.system: list[ContextItem] = []
        self.dropped_prompt: list[tuple[ContextItem, str]] = []
        self.run: RunRecording | None = None
        self.model = ""
        self.tail: list[StageRecording | str] = []  # the latest stages, for an error stage to follow

    # ------------------------------------------------------------------ entry

    async def execute(self, message: str, pause: PauseState | None) -> RunResult:
        agent = self.agent
        recorder = agent.recorder
        session = agent.session_id or agent.conversation_id
        if pause is None:
            run = recorder.start_run(
                agent=agent.name, input=message, session_id=session, model=agent.settings.model or None,
                labels=agent.labels,
            )
        else:
            run = recorder.continue_run(pause.run_id, agent=agent.name, session_id=session, next_seq=pause.next_seq)
            self.turns, self.tool_calls = pause.turns, pause.tool_calls
            self.usage = Usage(**pause.usage)
        self.run = run
        ctx = RunContext(agent.name, run.id, session)
        try:
            await agent.hooks.fire("before_loop", ctx)
            if pause is None:
                prompt = await self._prepare_prompt(self._input_stage(message))
                result = await self._loop([prompt], EdgeKind.NEXT)
            else:
                result = await self._loop(await self._resume(pause, message), EdgeKind.JOIN)
        except _Paused as paused:
            result = self._result("", RunStatus.AWAITING, stop_reason="awaiting", question=paused.state.question,
                                  pause=paused.state)
        except _Stop as stop:
            result = self._fail(stop.status, stop.reason, stop.message)
        except asyncio.CancelledError:
            result = self._fail(RunStatus.CANCELLED, "cancelled", f"run {run.id} of agent {agent.name} was cancelled")
        except ProviderError as exc:
            result = self._fail(RunStatus.FAILED, "provider_error", f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # a hook or the framework failed: the run fails, recorded, never a crash
            result = self._fail(RunStatus.FAILED, "internal_error", f"{type(exc).__name__}: {exc}")
        run.end(
            result.status, output=result.answer or result.question, model=self.model or None,
            tokens_in=self.usage.input_tokens, tokens_out=self.usage.output_tokens, cost=result.cost,
            error=result.error,
            attributes={"pause": result.pause.to_dict()} if result.pause else ({} if pause is not None else None),
        )
        await agent.hooks.fire("after_loop", ctx, result)
        return result

    def _result(self, answer: str, status: str, **extra: Any) -> RunResult:
        assert self.run is not None
        return RunResult(
            answer=answer, status=str(status), run_id=self.run.id, usage=self.usage,
            cost=cost_of(self.model, self.usage, self.agent.prices), turns=self.turns, tool_calls=self.tool_calls,
            labels=self.agent.labels, **extra,
        )

    def _fail(self, status: str, reason: str, message: str) -> RunResult:
        assert self.run is not None
        with self.run.stage(StageKind.ERROR, reason, after=self.tail, attributes={"reason": reason}) as stage:
            stage.output(Item.of_text(ItemKind.TEXT, message))
        return self._result("", status, error=message, stop_reason=reason)

    # ------------------------------------------------------------------ stages before the loop

    def _input_stage(self, message: str) -> StageRecording:
        assert self.run is not None
        with self.run.stage(StageKind.INPUT, "user message") as stage:
            user = stage.output(Item.of_text(ItemKind.USER, message), origin_kind=OriginKind.USER, source="input")
        self.agent.memory.add(self.agent.conversation_id, user)
        self.tail = [stage]
        return stage

    async def _prepare_prompt(self, last: StageRecording) -> StageRecording:
        agent = self.agent
        assert self.run is not None
        facts = []
        if agent.facts is not None and agent.user_id is not None:
            with self.run.stage(StageKind.MEMORY, "memory load", after=[last]) as mem_stage:
                facts = await agent.facts.facts(agent.user_id)
                mem_stage.set(user_id=agent.user_id, facts=len(facts))
            last = mem_stage
        tool_summaries = [(t.name, t.description) for t in agent.tools.values()]
        conv = agent.memory.require(agent.conversation_id)
        composed = agent.composer.compose(
            PromptContext(
                base=conv.system_prompt or agent.persona, discloses_ai=agent.discloses_ai, facts=facts,
                custom_instructions=agent.custom_instructions, tool_summaries=tool_summaries,
                workspace=agent.workspace, capabilities=agent.capabilities, autonomy=agent.autonomy,
                now=agent.clock() if agent.clock else None, extra_sections=agent.feature_sections(),
            )
        )
        with self.run.stage(StageKind.PROMPT, "prompt composition", after=[last]) as prompt_stage:
            memory_items: list[ContextItem] = []
            if facts:
                memory_items = [
                    ContextItem(Item(ItemKind.MEMORY, {"text": f.text, "key": f.key}),
                                mem_stage.origin(OriginKind.MEMORY, f.key))
                    for f in facts
                ]
                prompt_stage.inputs(memory_items)
            by_key = {ci.item.hash: ci for ci in memory_items}
            for piece in composed.pieces:
                if piece.origin_kind == "memory":
                    self.system.append(by_key.get(piece.item.hash) or ContextItem(
                        piece.item, prompt_stage.origin(OriginKind.MEMORY, piece.source)))
                else:
                    self.system.append(prompt_stage.output(piece.item, origin_kind=OriginKind.PROMPT_SECTION,
                                                           source=piece.source))
            for piece in composed.dropped:
                kind = OriginKind.MEMORY if piece.origin_kind == "memory" else OriginKind.PROMPT_SECTION
                self.dropped_prompt.append((ContextItem(piece.item, prompt_stage.origin(kind, piece.source)),
                                            "prompt_length_cap"))
            prompt_stage.set(sections=len(composed.pieces), dropped=len(composed.dropped),
                             length=len(composed.text))
        self.tail = [prompt_stage]
        return prompt_stage

    # ------------------------------------------------------------------ the loop

    async def _loop(self, after: list[StageRecording | str], edge: str) -> RunResult:
        agent = self.agent
        assert self.run is not None
        while True:
            if self.turns >= agent.max_turns:
                raise _Stop(RunStatus.FAILED, "max_turns",
                            f"agent {agent.name} reached its limit of {agent.max_turns} turns without an answer")
            self.turns += 1
            ctx = RunContext(agent.name, self.run.id, agent.session_id or agent.conversation_id, self.turns)
            await agent.hooks.fire("before_turn", ctx)
            inference, response, outputs = await self._infer(ctx, after, edge)
            if not response.tool_calls:
                with self.run.stage(StageKind.ANSWER, "answer", after=[inference]) as answer:
                    final = outputs[0] if outputs else ContextItem(
                        Item.of_text(ItemKind.ASSISTANT, ""), inference.origin())
                    answer.inputs([final])
                    answer.output(final.item)
                await agent.hooks.fire("after_turn", ctx)
                return self._result(response.text, RunStatus.ANSWERED, stop_reason="answered")
            calls = list(response.tool_calls)
            if self.tool_calls + len(calls) > agent.max_tool_calls:
                raise _Stop(RunStatus.FAILED, "max_tool_calls",
                            f"agent {agent.name} would exceed its limit of {agent.max_tool_calls} tool calls "
                            f"({self.tool_calls} made, {len(calls)} more requested)")
            call_items = [ci for ci in outputs if ci.item.kind == ItemKind.TOOL_CALL]
            after = await self._tool_batch(ctx, inference, calls, call_items, {})
            edge = EdgeKind.JOIN
            await agent.hooks.fire("after_turn", ctx)

    async def _infer(
        self, ctx: RunContext, after: list[StageRecording | str], edge: str
    ) -> tuple[StageRecording, ModelResponse, list[ContextItem]]:
        agent = self.agent
        assert self.run is not None
        history, dropped = agent.memory.context(agent.conversation_id)
        context = [*self.system, *history, *agent.static_context()]
        request = ModelRequest.of(context)
        stage = self.run.stage(StageKind.INFERENCE, f"turn {self.turns}", after=after, edge=edge)
        self.tail = [stage]
        stage.inputs(context, dropped=[*self.dropped_prompt, *((d, DROPPED_BY_WINDOW) for d in dropped)])
        await agent.hooks.fire("before_inference", ctx, request)
        try:
            response = await self._call_provider(request)
        except BaseException as exc:
            stage.close(StageStatus.CANCELLED if isinstance(exc, asyncio.CancelledError) else StageStatus.ERROR,
                        f"{type(exc).__name__}: {exc}")
            raise
        self.usage = self.usage + response.usage
        self.model = response.model or request.model
        outputs: list[ContextItem] = []
        if response.text or not response.tool_calls:
            outputs.append(stage.output(Item.of_text(ItemKind.ASSISTANT, response.text)))
        for call in response.tool_calls:
            outputs.append(stage.output(Item(ItemKind.TOOL_CALL,
                                             {"id": call.id, "name": call.name, "arguments": call.arguments})))
        stage.set(model=self.model, provider=response.provider, finish_reason=response.finish_reason,
                  response_id=response.response_id, input_tokens=response.usage.input_tokens,
                  output_tokens=response.usage.output_tokens, cached_tokens=response.usage.cached_tokens,
                  turn=self.turns)
        stage.close()
        agent.memory.add(agent.conversation_id, *outputs)
        await agent.hooks.fire("after_inference", ctx, response)
        self._emit(InferenceFinished(self.turns, response.text, len(response.tool_calls), response.usage))
        return stage, response, outputs

    async def _call_provider(self, request: ModelRequest) -> ModelResponse:
        provider = self.agent.provider
        if not self.agent.stream_inference and self.emit is None:
            return await provider.complete(request)
        response: ModelResponse | None = None
        async for event in provider.stream(request):
            if isinstance(event, TextDelta):
                self._emit(TextDeltaEvent(event.text, self.turns))
            elif isinstance(event, ResponseDone):
                response = event.response
        if response is None:
            raise ProviderError(f"{provider.name}: the stream ended without a response", provider=provider.name)
        return response

    def _emit(self, event: AgentEvent) -> None:
        if self.emit is not None:
            self.emit(event)

    # ------------------------------------------------------------------ tools

    async def _tool_batch(
        self,
        ctx: RunContext,
        inference: StageRecording | str,
        calls: list[ToolCall],
        call_items: list[ContextItem],
        decided: dict[str, tuple[str, bool] | None],
    ) -> list[StageRecording | str]:
        """Run one response's tool calls in parallel; results join memory in call order.

        ``decided`` maps a call id to a result already known (from before a pause) or to None for a
        call that a person approved on resume.
        """
        assert self.run is not None
        batch = self.run.stage(StageKind.TOOL_BATCH, f"{len(calls)} tool call(s)", after=[inference])
        stages = [
            self.run.stage(StageKind.TOOL, call.name, after=[batch], edge=EdgeKind.FORK, parent=batch)
            for call in calls
        ]
        self.tail = list(stages)
        outcomes = await asyncio.gather(
            *(self._one_tool(ctx, call, ci, stage, decided) for call, ci, stage in zip(calls, call_items, stages, strict=True)),
            return_exceptions=True,
        )
        cancelled = next((o for o in outcomes if isinstance(o, asyncio.CancelledError)), None)
        if cancelled is not None:
            batch.close(StageStatus.CANCELLED)
            raise cancelled
        failures = [o for o in outcomes if isinstance(o, BaseException) and not isinstance(o, PauseRun)]
        if failures:
            batch.close(StageStatus.ERROR, str(failures[0]))
            raise failures[0]
        self.tool_calls += len(calls)
        pauses = [(call, o) for call, o in zip(calls, outcomes, strict=True) if isinstance(o, PauseRun)]
        if pauses:
            batch.set(paused=len(pauses))
            batch.close()
            self._pause(calls, outcomes, pauses, stages)
        results = [o for o in outcomes if isinstance(o, ContextItem)]
        batch.close()
        self.agent.memory.add(self.agent.conversation_id, *results)
        return list(stages)

    async def _one_tool(
        self,
        ctx: RunContext,
        call: ToolCall,
        call_item: ContextItem,
        stage: StageRecording,
        decided: dict[str, tuple[str, bool] | None],
    ) -> ContextItem | PauseRun:
        agent = self.agent
        stage.inputs([call_item])
        stage.set(call_id=call.id, arguments=call.arguments)
        started = time.perf_counter()
        is_error = False
        try:
            if call.id in decided and decided[call.id] is not None:
                content, is_error = decided[call.id]  # type: ignore[misc]
                stage.set(served_from="pause")
            else:
                content = await self._execute(ctx, call, skip_approval=call.id in decided)
        except PauseRun as pause:
            stage.set(paused=True, question=pause.question, pause_kind=pause.kind)
            stage.close()
            return pause
        except asyncio.CancelledError:
            stage.close(StageStatus.CANCELLED)
            raise
        except Exception as exc:
            is_error = True
            content = _error_text(call, exc)
            stage.set(error_type=type(exc).__name__)
        duration = (time.perf_counter() - started) * 1000
        item = Item(ItemKind.TOOL_RESULT, {"call_id": call.id, "name": call.name, "content": content, "is_error": is_error})
        result = stage.output(item)
        stage.set(is_error=is_error, duration_ms=round(duration, 3))
        stage.close(StageStatus.ERROR if is_error else StageStatus.OK)
        await agent.hooks.fire("on_tool_end", ctx, call, content, is_error, duration)
        self._emit(ToolFinished(call.id, call.name, content, is_error, duration))
        return result

    async def _execute(self, ctx: RunContext, call: ToolCall, *, skip_approval: bool) -> str:
        agent = self.agent
        tool = agent.tools.get(call.name)
        if tool is None:
            raise ToolNotFoundError(
                f"there is no tool named {call.name!r}; the tools you can call are: "
                f"{', '.join(agent.tools) or 'none'}"
            )
        arguments = tool.parse_arguments(call.arguments)
        if agent.approve is not None and not skip_approval:
            verdict = agent.approve(call, tool)
            if asyncio.iscoroutine(verdict):
                verdict = await verdict
            if not verdict:
                raise ToolRejectedError(f"the call to {call.name} was not approved; do not retry it unchanged")
        progress = tool.progress_line(arguments)
        await agent.hooks.fire("on_tool_start", ctx, call)
        if progress:
            await agent.hooks.fire("on_progress", ctx, progress)
        self._emit(ToolStarted(call.id, call.name, call.arguments, progress))
        return result_text(await _run_tool(tool, arguments))

    # ------------------------------------------------------------------ pause and resume

    def _pause(
        self,
        calls: list[ToolCall],
        outcomes: list[Any],
        pauses: list[tuple[ToolCall, PauseRun]],
        stages: list[StageRecording],
    ) -> None:
        assert self.run is not None
        question = pauses[0][1].question
        with self.run.stage(StageKind.PAUSE, "awaiting a person", after=[s for s in stages]) as pause_stage:
            pause_stage.output(Item.of_text(ItemKind.TEXT, question, kind="question"))
        results = {
            call.id: {"content": o.item.body["content"], "is_error": o.item.body["is_error"]}
            for call, o in zip(calls, outcomes, strict=True) if isinstance(o, ContextItem)
        }
        state = PauseState(
            run_id=self.run.id, conversation_id=self.agent.conversation_id, question=question,
            pending=[{"call": _call_dict(c), "kind": p.kind, "question": p.question} for c, p in pauses],
            results=results, calls=[_call_dict(c) for c in calls], turns=self.turns, tool_calls=self.tool_calls,
            usage={"input_tokens": self.usage.input_tokens, "output_tokens": self.usage.output_tokens,
                   "cached_tokens": self.usage.cached_tokens},
            next_seq=self.run.next_seq, last_stage=pause_stage.id,
        )
        raise _Paused(state)

    async def _resume(self, pause: PauseState, decision: str) -> list[StageRecording | str]:
        assert self.run is not None
        with self.run.stage(StageKind.RESUME, "resume", after=[pause.last_stage], edge=EdgeKind.RESUME) as stage:
            decision_item = stage.output(Item.of_text(ItemKind.USER, decision, kind="decision"),
                                         origin_kind=OriginKind.USER, source="decision")
        prompt = await self._prepare_prompt(stage)
        calls = [ToolCall(c["id"], c["name"], c["arguments"]) for c in pause.calls]
        decided: dict[str, tuple[str, bool] | None] = {
            cid: (r["content"], r["is_error"]) for cid, r in pause.results.items()
        }
        approved = decision.strip().lower().rstrip(".!") in APPROVED_WORDS
        for pending in pause.pending:
            cid = pending["call"]["id"]
            if pending["kind"] == "approval":
                decided[cid] = None if approved else (
                    f"A person declined this call (their answer: {decision!r}); do not retry it unchanged.", True)
            else:
                decided[cid] = (decision, False)
        ctx = RunContext(self.agent.name, self.run.id, self.agent.session_id or self.agent.conversation_id, self.turns)
        recorded_calls = {
            ci.item.body.get("id"): ci
            for ci in self.agent.memory.require(self.agent.conversation_id).messages
            if ci.item.kind == ItemKind.TOOL_CALL
        }
        call_items = [recorded_calls.get(c["id"]) or ContextItem(Item(ItemKind.TOOL_CALL, c), decision_item.origin)
                      for c in pause.calls]
        self.tool_calls -= len(calls)  # the batch is counted again when it completes
        return await self._tool_batch(ctx, prompt, calls, call_items, decided)


def _call_dict(call: ToolCall) -> dict[str, str]:
    return {"id": call.id, "name": call.name, "arguments": call.arguments}


async def _run_tool(tool: Tool, arguments: dict[str, Any]) -> Any:
    if tool.timeout is None:
        return await tool.execute(arguments)
    try:
        return await asyncio.wait_for(tool.execute(arguments), tool.timeout)
    except TimeoutError:
        raise ToolTimeoutError(f"{tool.name} did not finish within {tool.timeout:g} s") from None


def _error_text(call: ToolCall, exc: Exception) -> str:
    if isinstance(exc, ToolNotFoundError | ToolArgumentsError | ToolRejectedError | ToolTimeoutError):
        return f"Error: {exc}"
    return f"Error: {call.name} failed: {type(exc).__name__}: {exc}"

"""The tool-calling loop of one run, recorded stage by stage.

    input -> memory -> prompt -> inference 1 -> tool batch (fork: tool a | tool b, join) ->
    inference 2 -> ... -> answer

Each inference's snapshot is the exact request the provider received; what the memory window or
the prompt length cap left out is recorded beside it as "not in context". A response's tool calls
run in :mod:`agent._batch`; pausing for a person and resuming live in :mod:`agent._pause`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tracer import (
    DROPPED_SINCE,
    ContextItem,
    EdgeKind,
    Item,
    ItemKind,
    LeftOut,
    OriginKind,
    Recorded,
    RedactionPolicy,
    RunRecording,
    RunStatus,
    StageKind,
    StageRecording,
    StageStatus,
)

from ._accept import accepted
from ._batch import result_item, run_batch
from ._driver import LoopDriver
from ._events import AgentEvent, InferenceFinished, PauseState, RunResult, TextDeltaEvent
from ._hooks import RunContext
from ._memory import DROPPED_BY_WINDOW, LeftBehind, WindowRecord
from ._pause import Paused, resume_batch
from ._prompt import DROPPED_BY_LENGTH_CAP, PromptContext
from .errors import ProviderCancelledError, ProviderError, ReplayMismatchError
from .providers import ModelRequest, ModelResponse, ResponseDone, TextDelta, ToolCall, Usage
from .providers._pricing import cost_of

if TYPE_CHECKING:
    from ._agent import Agent

log = logging.getLogger("footprint.agent")
#: How many runs in a row record only what their window left out since the run before (then a whole list).
WINDOW_CHAIN = 16
_DEFAULT_POLICY = RedactionPolicy()

#: decided[call id]: a result already known (content, is_error), or None: run it without asking again
Decided = dict[str, tuple[str, bool] | None]


class _Stop(Exception):  # internal control flow, never seen outside the loop
    """A limit ended the run; ``unrun`` are tool calls the model asked for that will not run."""

    def __init__(self, reason: str, message: str, unrun: list[ContextItem] | None = None) -> None:
        super().__init__(message)
        self.reason, self.message, self.unrun = reason, message, unrun or []


class RunLoop:
    """One run of an agent: builds each snapshot, calls the provider, runs tools, records it all."""

    def __init__(
        self, agent: Agent, emit: Callable[[AgentEvent], None] | None, driver: LoopDriver | None = None
    ) -> None:
        self.agent = agent
        self.emit = emit
        self.driver = driver
        self.usage = Usage()
        self.turns = 0
        self.tool_calls = 0
        self.system: list[ContextItem] = []
        self.dropped_prompt: list[tuple[ContextItem, str]] = []
        self.run: RunRecording | None = None
        self.model = ""
        self.tail: list[StageRecording | str] = []  # the latest stages, for an error stage to follow
        self.window: WindowRecord | None = None  # what the window left out of this run's latest call
        self.hook_errors: list[str] = []
        self.session = agent.session_id or agent.conversation_id
        self.error_stage: str | None = None  # the id of the error stage of a run that failed
        #: the latest response stopped at the output token limit: a call's arguments may be cut off
        self.cut_off = False

    # ------------------------------------------------------------------ entry

    async def execute(self, message: str, pause: PauseState | None) -> RunResult:
        """Run the loop to its end; every outcome (even a crash of a hook or tool) becomes a RunResult."""
        agent = self.agent
        recorder = agent.recorder
        if pause is None:
            # deferred sync points: a closed stage is made durable when the next one opens, and
            # before any hook or event can see it (see hook() and the emits)
            run = recorder.start_run(
                agent=agent.name, input=message, session_id=self.session, model=agent.settings.model or None,
                labels=agent.labels, deferred_sync=True,
            )
        else:
            run = recorder.continue_run(pause.run_id, agent=agent.name, session_id=self.session,
                                        next_seq=pause.next_seq, deferred_sync=True)
            self.turns, self.tool_calls = pause.turns, pause.tool_calls
            self.usage = Usage(**pause.usage)
        self.run = run
        ctx = RunContext(agent.name, run.id, self.session)
        reraise: BaseException | None = None
        try:
            await self.hook("before_loop", ctx)
            if self.driver is not None:
                result = await self._driven(self.driver)
            elif pause is None:
                prompt = await self._prepare_prompt(self._input_stage(message), message)
                result = await self._loop([prompt], EdgeKind.NEXT)
            else:
                result = await self._loop(await resume_batch(self, pause, message), EdgeKind.JOIN)
        except Paused as paused:
            result = self.result("", RunStatus.AWAITING, stop_reason="awaiting", question=paused.state.question,
                                 pause=paused.state)
        except _Stop as stop:
            result = self._fail(RunStatus.FAILED, stop.reason, stop.message, stop.unrun)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                task.uncancel()  # the cancellation is handled here: the run ends recorded as cancelled
            result = self._fail(RunStatus.CANCELLED, "cancelled", f"run {run.id} of agent {agent.name} was cancelled")
        except ReplayMismatchError as exc:
            # a stale recording is a test failure, not a model failure: record it, then raise it
            result = self._fail(RunStatus.FAILED, "replay_mismatch", str(exc))
            reraise = exc
        except ProviderCancelledError as exc:  # the provider's cancel(): the run was stopped, it did not fail
            result = self._fail(RunStatus.CANCELLED, "cancelled", f"run {run.id} of agent {agent.name}: {exc}")
        except ProviderError as exc:
            result = self._fail(RunStatus.FAILED, "provider_error", f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # the framework failed: the run fails, recorded, never a crash
            log.error("run %s of agent %s failed: %s", run.id, agent.name,
                      self._masked("".join(traceback.format_exception(exc)).rstrip()))
            result = self._fail(RunStatus.FAILED, "internal_error", f"{type(exc).__name__}: {exc}")
        except BaseException as exc:  # not ours to swallow (gevent's Timeout, pytest's outcomes, trio's
            # Cancelled, a tool's KeyboardInterrupt): the run ends recorded as interrupted, then it is raised
            result = self._fail(RunStatus.FAILED, "interrupted", f"{type(exc).__name__}: {exc}")
            reraise = exc
        attributes: dict[str, Any] = {"stop_reason": result.stop_reason, "turns": self.turns,
                                      "tool_calls": self.tool_calls}
        if result.pause is not None:
            attributes["pause"] = result.pause.to_dict()
        if self.hook_errors:
            attributes["hook_errors"] = self.hook_errors
        run.end(
            result.status, output=result.answer or result.question, model=self.model or None,
            tokens_in=self.usage.input_tokens, tokens_out=self.usage.output_tokens, cost=result.cost,
            error=result.error, attributes=attributes,
        )
        await self.hook("after_loop", ctx, result)
        if reraise is not None:
            raise reraise
        return result

    def settle(self) -> None:
        """Wait until the stages closed so far are durable (under ``sync``; at once otherwise)."""
        if self.run is not None:
            self.run.settle()

    async def hook(self, name: str, *args: Any) -> None:
        """Fire a hook (once the stages closed so far are durable); its failure is recorded with the
        run and never ends it."""
        hooks = self.agent.hooks
        if getattr(hooks, name) is None:
            return
        self.settle()
        error = await hooks.fire(name, *args)
        if error is not None:
            self.hook_errors.append(f"{name}: {type(error).__name__}: {error}")

    def result(self, answer: str, status: str, **extra: Any) -> RunResult:
        """The run's result with its usage, cost and counters."""
        assert self.run is not None
        return RunResult(
            answer=answer, status=str(status), run_id=self.run.id, usage=self.usage,
            cost=cost_of(self.model, self.usage, self.agent.prices), turns=self.turns, tool_calls=self.tool_calls,
            labels=self.agent.labels, **extra,
        )

    def _masked(self, text: str) -> str:
        """``text`` with credentials masked: by the recorder's policy, or the default one when nothing records."""
        recorder = self.agent.recorder
        return (recorder.redaction if recorder.enabled else _DEFAULT_POLICY).text(text)

    def _fail(self, status: str, reason: str, message: str, unrun: list[ContextItem] | None = None) -> RunResult:
        """Record an error stage after the latest stages; calls left without a result get one from it.

        The message is masked first: a provider's error may quote the API key, and the message
        reaches the result, the reply and the conversation.
        """
        assert self.run is not None
        agent = self.agent
        message = self._masked(message)
        with self.run.stage(StageKind.ERROR, reason, after=self.tail, attributes={"reason": reason}) as stage:
            self.error_stage = stage.id
            # the conversation must stay valid for the next run: every tool call gets a result
            pending = list(unrun or ())
            if agent.memory.has(agent.conversation_id):
                known = {ci.item.body.get("id") for ci in pending}
                pending += [ci for ci in agent.memory.unanswered_calls(agent.conversation_id)
                            if ci.item.body.get("id") not in known]
            if pending:
                stage.inputs(pending)
                agent.memory.add(agent.conversation_id, *(
                    stage.output(result_item(ci.item.body.get("id", ""), ci.item.body.get("name", ""),
                                              f"Error: not run: {message}", True))
                    for ci in pending
                ))
            stage.output(Item.of_text(ItemKind.TEXT, message))  # last: the error stage's message
        return self.result("", status, error=message, stop_reason=reason)

    def emit_event(self, event: AgentEvent) -> None:
        """Send an event to the caller, once the stages closed so far are durable."""
        if self.emit is not None:
            if self.run is not None:
                self.run.settle()
            self.emit(event)

    # ------------------------------------------------------------------ stages before the loop

    def _input_stage(self, message: str) -> StageRecording:
        assert self.run is not None
        agent = self.agent
        with self.run.stage(StageKind.INPUT, "user message") as stage:
            user = stage.output(Item.of_text(ItemKind.USER, message), origin_kind=OriginKind.USER, source="input")
            # a run that was cut off mid-batch (paused and never resumed, or restored from a store)
            # left tool calls without results; a model refuses such a history, so each gets one first
            unanswered = agent.memory.unanswered_calls(agent.conversation_id)
            if unanswered:
                stage.inputs(unanswered)
                stage.set(closed_calls=len(unanswered))
                agent.memory.add(agent.conversation_id, *(
                    stage.output(result_item(ci.item.body.get("id", ""), ci.item.body.get("name", ""),
                                              "Error: this call never finished (its run ended first).", True))
                    for ci in unanswered
                ))
        agent.memory.add(agent.conversation_id, user)
        self.tail = [stage]
        return stage

    async def _prepare_prompt(self, last: StageRecording, message: str | None = None) -> StageRecording:
        """Load the memory facts for ``message`` (a memory stage) and compose the system prompt (a prompt stage).

        Without ``message`` (a resumed or driven run), memory is chosen for the question the run is
        answering: the conversation's latest user message.
        """
        agent = self.agent
        assert self.run is not None
        facts = []
        memory_items: list[ContextItem] = []
        if agent.facts is not None and agent.user_id is not None:
            with self.run.stage(StageKind.MEMORY, "memory load", after=[last]) as mem_stage:
                if message is None:
                    messages = agent.memory.require(agent.conversation_id).messages
                    message = next((ci.item.text for ci in reversed(messages) if ci.item.kind == ItemKind.USER), "")
                facts = await agent.facts.facts_for(agent.user_id, message)
                mem_stage.set(user_id=agent.user_id, facts=len(facts))
                memory_items = [
                    mem_stage.output(Item(ItemKind.MEMORY, {"text": f.text, "key": f.key}),
                                     origin_kind=OriginKind.MEMORY, source=f.key)
                    for f in facts
                ]
            last = mem_stage
        conv = agent.memory.require(agent.conversation_id)
        composed = agent.composer.compose(
            PromptContext(
                base=conv.system_prompt or agent.persona, discloses_ai=agent.discloses_ai, facts=facts,
                custom_instructions=agent.custom_instructions,
                tool_summaries=[(t.name, t.description) for t in agent.offered],
                tool_categories=agent.catalog.categories() if agent.meta_tools else None,
                workspace=agent.workspace, capabilities=agent.capabilities, autonomy=agent.autonomy,
                now=agent.clock() if agent.clock else None, extra_sections=agent.feature_sections(),
            )
        )
        with self.run.stage(StageKind.PROMPT, "prompt composition", after=[last]) as prompt_stage:
            if memory_items:
                prompt_stage.inputs(memory_items)
            by_hash = {ci.item.hash: ci for ci in memory_items}
            for piece in composed.pieces:
                if piece.origin_kind == "memory" and piece.item.hash in by_hash:
                    self.system.append(by_hash[piece.item.hash])  # the fact keeps its memory-stage origin
                else:
                    kind = OriginKind.MEMORY if piece.origin_kind == "memory" else OriginKind.PROMPT_SECTION
                    self.system.append(prompt_stage.output(piece.item, origin_kind=kind, source=piece.source))
            for piece in composed.dropped:
                kind = OriginKind.MEMORY if piece.origin_kind == "memory" else OriginKind.PROMPT_SECTION
                dropped = by_hash.get(piece.item.hash) or ContextItem(piece.item, prompt_stage.origin(kind, piece.source))
                self.dropped_prompt.append((dropped, DROPPED_BY_LENGTH_CAP))
            prompt_stage.set(sections=len(composed.pieces), dropped=len(composed.dropped), length=len(composed.text))
        self.tail = [prompt_stage]
        return prompt_stage

    async def _driven(self, driver: LoopDriver) -> RunResult:
        """A run whose input comes from its driver: queued messages, and a batch a crash cut off."""
        assert self.run is not None
        with self.run.stage(StageKind.INPUT, "turn input") as stage:
            added = await driver.begin(self, stage)
            stage.set(messages=len(added))
        self.agent.memory.add(self.agent.conversation_id, *added)
        self.tail = [stage]
        prompt = await self._prepare_prompt(stage)
        interrupted = driver.interrupted_batch(self)
        if interrupted is None:
            return await self._loop([prompt], EdgeKind.NEXT)
        calls, call_items, decided = interrupted
        ctx = RunContext(self.agent.name, self.run.id, self.session, self.turns)
        after = await self.tool_batch(ctx, prompt, calls, call_items, decided)
        self.run.settle()
        return await self._loop(await driver.between_inferences(self, after), EdgeKind.JOIN)

    # ------------------------------------------------------------------ the loop

    async def _loop(self, after: list[StageRecording | str], edge: str) -> RunResult:
        agent = self.agent
        assert self.run is not None
        while True:
            if self.turns >= agent.max_turns:
                raise _Stop("max_turns", f"agent {agent.name} reached its limit of {agent.max_turns} turns "
                                         f"without an answer")
            self.turns += 1
            ctx = RunContext(agent.name, self.run.id, self.session, self.turns)
            await self.hook("before_turn", ctx)
            inference, response, outputs = await self._infer(ctx, after, edge)
            calls = response.tool_calls
            if calls and any(c.settled for c in calls):  # the provider ran these itself: nothing to run
                calls = tuple(c for c in calls if not c.settled)
                outputs = [ci for ci in outputs if not ci.item.body.get("settled")]
            if not calls:
                with self.run.stage(StageKind.ANSWER, "answer", after=[inference]) as answer:
                    final = outputs[0] if outputs and outputs[0].item.kind == ItemKind.ASSISTANT else ContextItem(
                        Item.of_text(ItemKind.ASSISTANT, response.text), inference.origin())
                    answer.inputs([final])
                    answer.output(final.item)
                self.tail = [answer]
                await self.hook("after_turn", ctx)
                return self.result(response.text, RunStatus.ANSWERED, stop_reason="answered")
            call_items = [ci for ci in outputs if ci.item.kind == ItemKind.TOOL_CALL]
            if self.tool_calls + len(call_items) > agent.max_tool_calls:
                raise _Stop("max_tool_calls",
                            f"agent {agent.name} would exceed its limit of {agent.max_tool_calls} tool calls "
                            f"({self.tool_calls} made, {len(call_items)} more requested)", call_items)
            self.cut_off = response.finish_reason == "length"
            after = await self.tool_batch(ctx, inference, list(calls), call_items, {})
            edge = EdgeKind.JOIN
            await self.hook("after_turn", ctx)
            if self.driver is not None:
                self.run.settle()
                after = await self.driver.between_inferences(self, after)

    async def _infer(
        self, ctx: RunContext, after: list[StageRecording | str], edge: str
    ) -> tuple[StageRecording, ModelResponse, list[ContextItem]]:
        agent = self.agent
        assert self.run is not None
        stage = self.run.stage(StageKind.INFERENCE, f"turn {self.turns}", after=after, edge=edge)
        self.tail = [stage]
        memory, conversation = agent.memory, agent.conversation_id
        older = memory.require(conversation).older
        if older is not None and (self.dropped_prompt or not stage.can_name(older.receipt)):
            # the recorder must be handed every item it did not record this way: read them back
            await memory.hold_all(conversation)
        history, dropped, older = await memory.window(conversation)
        context = [*self.system, *history, *agent.static_context()]
        request = ModelRequest.of(context)
        base: Recorded | None = None
        if dropped or older is not None:
            stage.set(window_dropped=len(dropped) + (older.count if older is not None else 0))
            newly, named, base = self._newly_dropped(stage, dropped, older)
            # the window's list as it is, not a pair per message: it grows with the conversation
            stage.inputs(context, dropped=LeftOut(*(((ci,), why) for ci, why in self.dropped_prompt),
                                                  (newly, DROPPED_BY_WINDOW),
                                                  recorded=named.receipt if named is not None else None))
        else:
            stage.inputs(context, dropped=self.dropped_prompt)
        await self.hook("before_inference", ctx, request)
        try:
            response, replaced_ids = accepted(await self._call_provider(request), agent.provider.name, self.turns)
        except BaseException as exc:
            stage.set(turn=self.turns)
            _record_routing(stage, getattr(exc, "route", None), getattr(exc, "attempts", None))
            stage.close(StageStatus.CANCELLED if isinstance(exc, asyncio.CancelledError) else StageStatus.ERROR,
                        f"{type(exc).__name__}: {exc}")
            raise
        usage = response.usage
        self.usage = self.usage + usage
        self.model = response.model or request.model
        outputs: list[ContextItem] = []
        if response.text or not response.tool_calls:
            outputs.append(stage.output(Item(ItemKind.ASSISTANT, {"text": response.text})))
        for call in response.tool_calls:
            body: dict[str, Any] = {"id": call.id, "name": call.name, "arguments": call.arguments}
            if call.settled:
                body["settled"] = True
            outputs.append(stage.output(Item(ItemKind.TOOL_CALL, body)))
        stage.set(model=self.model, provider=response.provider, finish_reason=response.finish_reason,
                  response_id=response.response_id, input_tokens=usage.input_tokens,
                  output_tokens=usage.output_tokens, cached_tokens=usage.cached_tokens, turn=self.turns,
                  cost=cost_of(self.model, usage, agent.prices))
        if replaced_ids:
            stage.set(call_ids_replaced=replaced_ids)
        if response.route is not None or response.attempts:
            _record_routing(stage, response.route, response.attempts)
        stage.close()
        if self.window is not None and self.window.stage_id == stage.id:
            self._took_receipt(stage, base)
        agent.memory.add(agent.conversation_id, *outputs)
        if self.driver is not None:
            self.run.settle()  # a driver persists what it is told: the stage is durable first
            await self.driver.responded(self, outputs)
        await self.hook("after_inference", ctx, response)
        if self.emit is not None:
            self.emit_event(InferenceFinished(self.turns, response.text, len(response.tool_calls), usage))
        return stage, response, outputs

    def _newly_dropped(
        self, stage: StageRecording, dropped: list[ContextItem], older: LeftBehind | None
    ) -> tuple[list[ContextItem], LeftBehind | None, Recorded | None]:
        """What the window left out of this call that it had not left out of the conversation's previous
        one: (the items to hand over, the receipt naming the ones before them, and the receipt the
        recorder's receipt for this call must say it continues — see :meth:`_took_receipt`).

        Every left-out message is recorded, by reference (an entry naming the stored item). When this
        call's list continues the previous recorded call's (the same messages, then more), only the new
        ones are recorded, with ``dropped_since`` naming that call ([run, stage] when it was another
        run's): a long conversation does not record its early history again at every turn. Every
        ``WINDOW_CHAIN`` runs the whole list is recorded again, so a reader follows a short chain.
        ``older`` names the list's first messages when the conversation does not hold them.
        """
        assert self.run is not None
        memory, conversation = self.agent.memory, self.agent.conversation_id
        previous = self.window or memory.last_window(conversation)
        own_run = previous is not None and previous.run_id == self.run.id
        record = WindowRecord(self.run.id, stage.id, dropped, older=older)
        newly, named, base = dropped, older, older.receipt if older is not None else None
        if previous is not None and (own_run or previous.depth < WINDOW_CHAIN) and previous.older is older:
            before = previous.dropped
            kept = len(before)
            # one comparison in C (of the same objects, mostly), not a call per message of the history
            if kept <= len(dropped) and (not kept or before[-1] is dropped[kept - 1]) and dropped[:kept] == before:
                since: str | list[str] = previous.stage_id if own_run else [previous.run_id, previous.stage_id]
                stage.set(**{DROPPED_SINCE: {DROPPED_BY_WINDOW: since}})
                record = WindowRecord(self.run.id, stage.id, dropped, previous.depth + (0 if own_run else 1), older)
                newly, named, base = dropped[len(before):], None, previous.receipt
        self.window = record
        memory.remember_window(conversation, record)
        return newly, named, base

    def _took_receipt(self, stage: StageRecording, base: Recorded | None) -> None:
        """Keep the recorder's receipt for what this call's window left out, when it names exactly
        that: as long as the list it was handed (the receipt says which one it continues), and
        continuing the receipt this call named or, for a list of what fell out since, the previous
        call's. The conversation's holder may then let go of those messages (``Conversation.recorded``)."""
        record, receipt = self.window, stage.left_receipt
        if record is None or receipt is None or receipt.count != record.count or receipt.base is not base:
            return
        if self.dropped_prompt or not stage.can_name(receipt):
            return  # (the next call could not name it: the conversation is better held whole)
        record = dataclasses.replace(record, receipt=receipt)
        self.window = record
        memory = self.agent.memory
        memory.remember_window(self.agent.conversation_id, record)
        memory.require(self.agent.conversation_id).recorded = LeftBehind(receipt, memory.max_tokens, memory.max_messages)

    async def _call_provider(self, request: ModelRequest) -> ModelResponse:
        provider = self.agent.provider
        if not self.agent.stream_inference and self.emit is None:
            return await provider.complete(request)
        response: ModelResponse | None = None
        async for event in provider.stream(request):
            if isinstance(event, TextDelta):
                self.emit_event(TextDeltaEvent(event.text, self.turns))
            elif isinstance(event, ResponseDone):
                response = event.response
        if response is None:
            raise ProviderError(f"{provider.name}: the stream ended without a response", provider=provider.name)
        return response

    async def tool_batch(
        self,
        ctx: RunContext,
        inference: StageRecording | str,
        calls: list[ToolCall],
        call_items: list[ContextItem],
        decided: Decided,
    ) -> list[StageRecording | str]:
        """Run one response's tool calls (see :func:`agent._batch.run_batch`); returns their stages."""
        return await run_batch(self, ctx, inference, calls, call_items, decided)


def _record_routing(stage: StageRecording, route: Any, attempts: Any) -> None:
    """The route a router chose and every provider tried, on the inference stage."""
    if route:
        stage.set(route=dict(route))
    if attempts:
        stage.set(attempts=[a.to_dict() if hasattr(a, "to_dict") else a for a in attempts])

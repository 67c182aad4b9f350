"""One turn of one session: hydrate, continue or start fresh, persist, reply.

The durability dial decides when the session is persisted:

``exit``  once, when the run ends (answered, awaiting, failed). A crash loses the turn in flight;
          the stored conversation is the one before it.
``sync``  also when the run starts (a ``running`` turn marker), after each inference, after each
          tool call finishes (its result, kept beside the conversation until its batch joins) and
          after each tool batch. A crash loses at most the step in flight, and the next request
          for the session finishes the interrupted turn first (see :mod:`hosting._recovery`):
          tool results already persisted are served; of the missing calls only durable tools run.

Either way a turn's reply is sent only once the turn is committed — its run's recorded rows first
(under ``exit`` the recorder writes them in the background, so the host waits for them: see
:mod:`hosting._committed`), then the session — and a save appends only what the turn added (see
:mod:`hosting.sessions._records`). So a stored session never names a run that is not recorded.

The hooks below are merged into every agent instance the host runs; they find the turn by the
run's session id, so anonymous runs and runs outside the host are untouched.
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent import Agent, AgentEvent, Conversation, Hooks, PauseState, RunContext, RunFinished, RunResult
from tracer import ContextItem, Item, ItemKind, Origin, OriginKind, RedactionPolicy

from ._committed import RecordingsCommits
from ._reply import TurnReply
from .sessions import Envelope, SessionStore

Emit = Callable[[str, dict[str, Any]], None]
_ANONYMOUS_POLICY = RedactionPolicy()  # a one-off turn's reply is masked like a session's


@dataclass(eq=False)
class TurnState:
    """What the host knows about a turn in flight; the sync hooks persist from it."""

    session_id: str
    agent: Agent
    envelope: Envelope  # the latest saved (or loaded) envelope: its version is the one to save against
    conversation_id: str
    kind: str  # run | resume | recover
    text: str  # the message, or the decision
    turn_id: str | None
    base: int  # messages in the conversation before this turn
    pause: dict[str, Any] | None = None  # the paused run being resumed, until its batch joins
    run_id: str | None = None
    turns: int = 0
    tool_calls: int = 0
    usage: dict[str, int] = field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0,
                                                           "cached_tokens": 0})
    tool_results: dict[str, dict[str, Any]] = field(default_factory=dict)
    last_had_calls: bool = False
    interrupt: bool = False  # set by a shutdown that cancels the run: store it to finish later
    started_at: float = field(default_factory=time.time)
    failure: Exception | None = None  # a sync checkpoint that could not be saved
    save_lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class SessionTurns:
    """Runs turns against a session store with a durability mode; owns the sync hooks."""

    def __init__(self, sessions: SessionStore, *, durability: str, host_id: str, lease_seconds: float) -> None:
        self.sessions = sessions
        self.durability = durability
        self.host_id = host_id
        self.lease_seconds = lease_seconds
        self.active: dict[str, TurnState] = {}
        self.commits = RecordingsCommits()
        self.hooks = Hooks(
            before_loop=self._before_loop, after_inference=self._after_inference,
            on_tool_end=self._on_tool_end, after_turn=self._after_turn,
        )

    @property
    def sync(self) -> bool:
        """True under ``sync`` durability."""
        return self.durability == "sync"

    # ------------------------------------------------------------------ hydrate

    def hydrate(
        self, agent: Agent, session_id: str, envelope: Envelope | None, *, kind: str, text: str,
        turn_id: str | None,
    ) -> TurnState:
        """Put the session's conversation on the instance (a fresh one when nothing is stored)."""
        if envelope is None:
            envelope = Envelope(session_id, Conversation(session_id, agent.persona).to_dict())
        conversation = envelope.conversation_obj()
        if envelope.older is not None:  # (the store has the messages the envelope let go of)
            conversation.load_older = functools.partial(self.sessions.older_messages, session_id, envelope.offset)
        agent.memory.put(conversation)
        agent.conversation_id = conversation.id
        agent.session_id = session_id
        state = TurnState(
            session_id, agent, envelope, conversation.id, kind, text, turn_id, len(conversation.messages),
            pause=envelope.pause,
        )
        self.active[session_id] = state
        return state

    def release(self, state: TurnState) -> None:
        """Take the conversation off the instance: the store has it, and an idle instance stays small."""
        if self.active.get(state.session_id) is state:
            del self.active[state.session_id]
        state.agent.memory.delete(state.conversation_id)

    # ------------------------------------------------------------------ run

    async def run(
        self, state: TurnState, *, pause: PauseState | None = None, decision: str | None = None,
        emit: Emit | None = None,
    ) -> RunResult:
        """Run the turn (or resume ``pause`` with ``decision``, default the turn's text) on the instance."""
        agent = state.agent
        text = state.text if decision is None else decision
        if emit is None:
            if pause is None:
                return await agent.run(text)
            return await agent.resume(pause, text)
        result: RunResult | None = None
        policy = self.sessions.policy
        async for event in agent.stream(text, pause=pause):
            if isinstance(event, RunFinished):
                result = event.result
            else:
                name, data = event_payload(event)
                emit(name, policy.value(data))
        assert result is not None  # stream() always ends with RunFinished
        return result

    async def finish(self, state: TurnState, result: RunResult, *, recovered: dict[str, Any] | None = None) -> TurnReply:
        """Persist what the run left behind and build the reply."""
        return await self.persist(state, *self.capture(state, result, recovered=recovered))

    def capture(
        self, state: TurnState, result: RunResult, *, recovered: dict[str, Any] | None = None
    ) -> tuple[Envelope, TurnReply]:
        """The envelope to save and the reply, taken from the instance (which is free afterwards)."""
        if state.failure is not None:
            raise state.failure  # a sync checkpoint failed (another writer, or the store): nothing more is saved
        conversation = state.agent.memory.require(state.conversation_id)
        interrupted = result.status == "cancelled" and state.interrupt
        if interrupted:
            drop_unfinished_results(conversation, state.tool_results)
        elif result.status in ("failed", "cancelled"):
            seal_dangling_calls(conversation, state.tool_results, result.run_id)
        if interrupted:
            reply = TurnReply(
                "interrupted", state.session_id, result.run_id,
                error=f"the host stopped during this turn of session {state.session_id!r}; it was stored "
                      f"and finishes on the session's next request",
            )
        else:
            reply = TurnReply(
                result.status, state.session_id, result.run_id, answer=result.answer,
                question=result.question, error=result.error, recovered=recovered,
            )
        reply = reply.masked(self.sessions.policy)  # the reply is sent and kept: no credential in it
        marker = self._marker(state, "interrupted" if interrupted else "done")
        if not interrupted:
            marker["reply"] = reply.to_dict()
        pause: dict[str, Any] | None
        if interrupted:
            pause = state.pause
        else:
            pause = result.pause.to_dict() if result.status == "awaiting" and result.pause else None
        envelope = state.envelope.successor(
            conversation, pause=pause, status=reply.status, last_run_id=result.run_id or state.run_id, turn=marker,
            tool_results=dict(state.tool_results) if interrupted else {},
        )
        return envelope, reply

    async def recorded(self, agent: Agent) -> None:
        """Return once the runs ``agent`` recorded so far are committed (group-committed with the
        other turns finishing now; at once when its recorder writes nothing in the background)."""
        await self.commits.committed(agent.recorder)

    async def persist(self, state: TurnState, envelope: Envelope, reply: TurnReply) -> TurnReply:
        """Save the captured envelope against the latest version this turn saved; returns once it
        is committed, under either durability (a reply is never sent for a turn not stored).

        The run's recorded rows are committed first: a session saved, then a crash before the
        recorder's background write, left a stored turn (and its replayed reply, and later turns'
        history) naming a run that was never recorded.
        """
        await self.recorded(state.agent)
        async with state.save_lock:
            # awaited directly: this runs in the host's own task, after the run, so no shutdown
            # cancels it midway (a sync checkpoint inside the run can be: see _save)
            latest = state.envelope
            state.envelope = await self.sessions.save(
                envelope.replace(version=latest.version, stored=latest.held() if latest.version else (),
                                 stored_at=latest.offset if latest.version else 0))
        return reply

    # ------------------------------------------------------------------ sync checkpoints

    def _marker(self, state: TurnState, status: str) -> dict[str, Any]:
        now = time.time()
        return {
            "state": status, "kind": state.kind, "text": state.text, "turn_id": state.turn_id,
            "run_id": state.run_id, "base": state.base, "host": self.host_id, "started_at": state.started_at,
            "lease_until": now + self.lease_seconds, "turns": state.turns, "tool_calls": state.tool_calls,
            "usage": dict(state.usage),
        }

    async def checkpoint(self, state: TurnState) -> None:
        """Persist the turn as it stands (a ``running`` marker, the conversation, finished tool results).

        A checkpoint that cannot be saved stops the run: under ``sync`` a step that is not durable
        must not be followed by more steps (and a version conflict means another writer owns the
        session now). :meth:`finish` then raises the error.
        """
        if state.failure is not None:
            return
        try:
            await self._checkpoint(state)
        except Exception as exc:
            state.failure = exc
            if state.agent.cancel():
                # the run is usually this very task: take the cancellation here, inside the run,
                # where the loop ends the run "cancelled". Left pending, it would cancel the host's
                # own task once the run returned, and the caller would get a cancellation instead
                # of this error.
                await asyncio.sleep(0)
            raise

    async def _checkpoint(self, state: TurnState) -> None:
        async with state.save_lock:
            conversation = state.agent.memory.require(state.conversation_id)
            envelope = state.envelope.successor(
                conversation, pause=state.pause, status="running", last_run_id=state.run_id,
                turn=self._marker(state, "running"), tool_results=dict(state.tool_results),
            )
            await self._save(state, envelope)

    async def _save(self, state: TurnState, envelope: Envelope) -> None:
        save = asyncio.ensure_future(self.sessions.save(envelope))
        try:
            state.envelope = await asyncio.shield(save)
        except asyncio.CancelledError:
            # a shutdown cancelled the run mid-save: learn the version the store now holds, then stop
            state.envelope = await save
            raise

    def _state(self, ctx: RunContext) -> TurnState | None:
        state = self.active.get(ctx.session_id) if ctx.session_id else None
        return state if state is not None and (state.run_id is None or state.run_id == ctx.run_id) else None

    async def _before_loop(self, ctx: RunContext) -> None:
        state = self._state(ctx)
        if state is None:
            return
        state.run_id = ctx.run_id
        if self.sync:
            await self.checkpoint(state)

    async def _after_inference(self, ctx: RunContext, response: Any) -> None:
        state = self._state(ctx)
        if state is None:
            return
        state.turns = ctx.turn
        usage = response.usage
        state.usage = {
            "input_tokens": state.usage["input_tokens"] + usage.input_tokens,
            "output_tokens": state.usage["output_tokens"] + usage.output_tokens,
            "cached_tokens": state.usage["cached_tokens"] + usage.cached_tokens,
        }
        state.tool_calls += len(response.tool_calls)
        state.last_had_calls = bool(response.tool_calls)
        if self.sync:
            await self.checkpoint(state)

    async def _on_tool_end(self, ctx: RunContext, call: Any, content: str, is_error: bool, duration: float) -> None:
        state = self._state(ctx)
        if state is None:
            return
        state.tool_results[call.id] = {"content": content, "is_error": is_error, "name": call.name}
        if self.sync:
            await self.checkpoint(state)

    async def _after_turn(self, ctx: RunContext) -> None:
        state = self._state(ctx)
        if state is None or not state.last_had_calls:
            return  # an answering turn is persisted by finish() right after
        # the batch joined: its results are in the conversation now, and a resumed pause is spent
        state.tool_results.clear()
        state.pause = None
        if self.sync:
            await self.checkpoint(state)


def event_payload(event: AgentEvent) -> tuple[str, dict[str, Any]]:
    """An agent stream event as an SSE event name and JSON data."""
    from agent import InferenceFinished, TextDeltaEvent, ToolFinished, ToolStarted

    if isinstance(event, TextDeltaEvent):
        return "text", {"text": event.text, "turn": event.turn}
    if isinstance(event, ToolStarted):
        return "tool_started", {"call_id": event.call_id, "name": event.name, "arguments": event.arguments,
                                "progress": event.progress}
    if isinstance(event, ToolFinished):
        return "tool_finished", {"call_id": event.call_id, "name": event.name, "result": event.result,
                                 "is_error": event.is_error, "duration_ms": round(event.duration_ms, 3)}
    if isinstance(event, InferenceFinished):
        return "inference", {"turn": event.turn, "text": event.text, "tool_calls": event.tool_calls,
                             "input_tokens": event.usage.input_tokens, "output_tokens": event.usage.output_tokens}
    return "event", {"repr": repr(event)}


def seal_dangling_calls(conversation: Conversation, known: dict[str, dict[str, Any]], run_id: str | None) -> None:
    """Give tool calls left without a result by a failed or cancelled run a result.

    A model API rejects a history with unanswered tool calls, so the next turn could never run.
    A result that finished is kept; a call that never finished gets an error result saying so —
    it is not run again behind the user's back.
    """
    messages = conversation.messages
    answered = {m.item.body.get("call_id") for m in messages if m.item.kind == ItemKind.TOOL_RESULT}
    origin = Origin(OriginKind.HOOK, run_id, None, "host:sealed")
    for message in list(messages):
        if message.item.kind != ItemKind.TOOL_CALL:
            continue
        call_id = str(message.item.body.get("id"))
        if call_id in answered:
            continue
        name = message.item.body.get("name", "")
        done = known.get(call_id)
        content, is_error = (
            (done["content"], bool(done["is_error"])) if done
            else (f"Error: {name} did not finish: the turn ended before its result; it was not re-run.", True)
        )
        body = {"call_id": call_id, "name": name, "content": content, "is_error": is_error}
        messages.append(ContextItem(Item(ItemKind.TOOL_RESULT, body), origin))
        answered.add(call_id)


def drop_unfinished_results(conversation: Conversation, finished: dict[str, dict[str, Any]]) -> None:
    """Remove the "cancelled" results a stopped batch left for calls that never finished.

    A turn stopped by a shutdown is finished later; its calls without a real result must run
    then, so their placeholders are not stored as if they were results.
    """
    messages = conversation.messages
    end = len(messages)
    while end > 0 and messages[end - 1].item.kind == ItemKind.TOOL_RESULT:
        end -= 1
    start = end
    while start > 0 and messages[start - 1].item.kind == ItemKind.TOOL_CALL:
        start -= 1
    batch = {m.item.body.get("id") for m in messages[start:end]}
    messages[end:] = [m for m in messages[end:]
                      if m.item.body.get("call_id") not in batch or m.item.body.get("call_id") in finished]


async def run_anonymous(agent: Agent, message: str, emit: Emit | None) -> TurnReply:
    """A one-off turn (no session): a fresh conversation on the instance, nothing stored."""
    conversation_id = new_anonymous_id()
    agent.memory.create(agent.persona, id=conversation_id)
    agent.conversation_id, agent.session_id = conversation_id, None
    result: RunResult | None = None
    try:
        if emit is None:
            result = await agent.run(message)
        else:
            async for event in agent.stream(message):
                if isinstance(event, RunFinished):
                    result = event.result
                else:
                    name, data = event_payload(event)
                    emit(name, _ANONYMOUS_POLICY.value(data))
    finally:
        agent.memory.delete(conversation_id)
    assert result is not None  # a stream always ends with RunFinished
    error = result.error
    if result.status == "awaiting":
        error = "a one-off turn cannot be resumed: send a session_id to keep a paused run"
    return TurnReply(result.status, None, result.run_id, answer=result.answer, question=result.question,
                     error=error).masked(_ANONYMOUS_POLICY)


def new_anonymous_id() -> str:
    """The conversation id of a one-off turn (its runs are recorded under it)."""
    return f"anon-{uuid.uuid4().hex[:16]}"

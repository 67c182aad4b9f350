"""Pausing a run to ask a person, and resuming it with their decision.

A tool (or the approval callback) raises :class:`~agent.PauseRun`. The batch it belongs to still
finishes; the run records a ``pause`` stage and ends ``awaiting`` with a :class:`PauseState` that
holds the results of the calls that finished. Resuming records a ``resume`` stage, serves those
results back without running the calls again, settles the paused calls with the decision, and the
loop goes on from there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracer import ContextItem, EdgeKind, Item, ItemKind, OriginKind, StageKind, StageRecording

from ._events import PauseState
from ._hooks import RunContext
from .errors import UserError
from .providers import ToolCall
from .tools import PauseRun

if TYPE_CHECKING:
    from ._agent import Agent
    from ._loop import Decided, RunLoop

APPROVED_WORDS = frozenset({"yes", "y", "approve", "approved", "ok", "okay", "allow", "go", "confirm", "confirmed"})


class Paused(Exception):  # internal control flow, never seen outside the loop
    """The run stops here, awaiting a person."""

    def __init__(self, state: PauseState) -> None:
        super().__init__(state.question)
        self.state = state


def pause_state(
    loop: RunLoop,
    calls: list[ToolCall],
    outcomes: list[Any],
    pauses: list[tuple[ToolCall, PauseRun]],
    stages: list[StageRecording],
) -> PauseState:
    """Record the pause stage and return what a resume needs."""
    assert loop.run is not None
    question = pauses[0][1].question
    with loop.run.stage(StageKind.PAUSE, "awaiting a person", after=list(stages)) as stage:
        stage.output(Item(ItemKind.TEXT, {"text": question, "role": "question"}))
        stage.set(pending=[call.id for call, _ in pauses])
    results = {
        call.id: {"content": o.item.body["content"], "is_error": o.item.body["is_error"]}
        for call, o in zip(calls, outcomes, strict=True) if isinstance(o, ContextItem)
    }
    usage = loop.usage
    return PauseState(
        run_id=loop.run.id, conversation_id=loop.agent.conversation_id, question=question,
        pending=[{"call": _call_dict(c), "kind": p.kind, "question": p.question} for c, p in pauses],
        results=results, calls=[_call_dict(c) for c in calls], turns=loop.turns, tool_calls=loop.tool_calls,
        usage={"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
               "cached_tokens": usage.cached_tokens},
        next_seq=loop.run.next_seq, last_stage=stage.id,
    )


async def resume_batch(loop: RunLoop, pause: PauseState, decision: str) -> list[StageRecording | str]:
    """Finish the paused batch with ``decision``; returns the batch's tool stages for the next inference."""
    assert loop.run is not None
    agent = loop.agent
    messages = agent.memory.require(agent.conversation_id).messages
    with loop.run.stage(StageKind.RESUME, "resume", after=[pause.last_stage], edge=EdgeKind.RESUME) as stage:
        decision_item = stage.output(Item(ItemKind.USER, {"text": decision, "role": "decision"}),
                                     origin_kind=OriginKind.USER, source="decision")
        stage.set(question=pause.question)
    prompt = await loop._prepare_prompt(stage)
    calls = [ToolCall(c["id"], c["name"], c["arguments"]) for c in pause.calls]
    decided: Decided = {cid: (r["content"], r["is_error"]) for cid, r in pause.results.items()}
    approved = decision.strip().lower().rstrip(".!") in APPROVED_WORDS
    for pending in pause.pending:
        cid = pending["call"]["id"]
        if pending["kind"] == "approval":
            decided[cid] = None if approved else (
                f"A person declined this call (their answer: {decision!r}); do not retry it unchanged.", True)
        else:
            decided[cid] = (decision, False)
    ctx = RunContext(agent.name, loop.run.id, loop.session, loop.turns)
    recorded = {ci.item.body.get("id"): ci for ci in messages if ci.item.kind == ItemKind.TOOL_CALL}
    call_items = [recorded.get(c["id"]) or ContextItem(Item(ItemKind.TOOL_CALL, c), decision_item.origin)
                  for c in pause.calls]
    loop.tool_calls -= len(calls)  # the batch is counted again when it completes
    return await loop.tool_batch(ctx, prompt, calls, call_items, decided)


def check_resumable(agent: Agent, pause: PauseState) -> None:
    """Raise a :class:`UserError` when ``pause`` cannot continue on ``agent``."""
    if pause.conversation_id != agent.conversation_id:
        raise UserError(
            f"run {pause.run_id} paused in conversation {pause.conversation_id}, but agent {agent.name} "
            f"is on conversation {agent.conversation_id}; resume it on an agent with that conversation"
        )
    conv = agent.memory.get(agent.conversation_id)
    if conv is None:
        raise UserError(f"run {pause.run_id} cannot be resumed: conversation {pause.conversation_id} is not in memory")
    # only a result after the pause's own calls counts: a model may give every turn's calls the same
    # ids (local servers and the offline demo model number them per response: 'call_1' each turn)
    ids = {c["id"] for c in pause.calls}
    messages = conv.messages
    calls_at = max((i for i, ci in enumerate(messages)
                    if ci.item.kind == ItemKind.TOOL_CALL and ci.item.body.get("id") in ids), default=-1)
    answered = {ci.item.body.get("call_id") for ci in messages[calls_at + 1:] if ci.item.kind == ItemKind.TOOL_RESULT}
    if ids & answered:
        raise UserError(f"run {pause.run_id} cannot be resumed: its conversation went on without it")


def _call_dict(call: ToolCall) -> dict[str, str]:
    return {"id": call.id, "name": call.name, "arguments": call.arguments}

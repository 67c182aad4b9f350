"""Finishing a turn that a host stop interrupted, without re-running what already ran.

A session whose stored turn marker says ``running`` (a crash under ``sync``) or ``interrupted``
(a shutdown that cancelled the turn) is finished before the session takes its next turn:

* nothing of the turn reached the store but its message: the message runs again (the old run is
  recorded as failed, "interrupted");
* the conversation ends with a tool batch: results already persisted — in the conversation or
  beside it — are served, and only the calls without a result execute; then the loop continues to
  the model's answer. This goes through the agent's own resume path (``Agent.resume`` with a
  paused-run state built from the stored batch), so it is recorded as a ``resume`` stage of the
  interrupted run, with ``served_from`` on each served tool stage;
* the conversation already ends with the model's answer: the turn is marked done.

Only tools marked ``durable=True`` run again. A call that was interrupted — executing at the
crash, or never started because the batch stopped — has no stored result, and the host cannot
know whether its side effects happened: a payment or an email must not go out twice. So every
interrupted call of a non-durable tool becomes an error result for the model saying exactly
that (:data:`INTERRUPTED_RESULT`), and the model decides what to do; a durable tool (one that is
safe to execute again with the same arguments) is executed again.

A run the dead process left ``running`` in the recordings is ended by :func:`end_abandoned_runs`
(``failed``, stop reason ``interrupted``) unless a session's stored turn will continue it.
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agent import Agent, PauseState, RunResult
from tracer import Item, ItemKind, OriginKind, Recorder, StageKind

from ._reply import TurnReply
from ._turn import Emit, SessionTurns, TurnState
from .errors import SessionBusyError
from .sessions import Envelope

#: The decision recorded on the resume stage of a recovered turn (the agent records decisions as user input).
RECOVERY_DECISION = (
    "(host recovery) the host stopped during this turn; persisted tool results are served and only "
    "the calls without a result run"
)


def needs_recovery(envelope: Envelope, *, shared: bool, host_id: str, now: float | None = None) -> bool:
    """True when the stored turn marker is a leftover to finish.

    On a store several hosts share, a turn another host marked running is that host's business
    until its lease expires: :class:`SessionBusyError` says so.
    """
    turn = envelope.turn
    if not turn or turn.get("state") not in ("running", "interrupted"):
        return False
    now = time.time() if now is None else now
    if turn["state"] == "running" and shared and turn.get("host") != host_id and turn.get("lease_until", 0) > now:
        raise SessionBusyError(
            f"session {envelope.session_id!r} is running a turn on host {turn.get('host')!r} "
            f"(lease for {turn['lease_until'] - now:.0f} s more)", session_id=envelope.session_id,
        )
    return True


#: The result an interrupted call of a non-durable tool gets on recovery (``{name}``: the tool).
INTERRUPTED_RESULT = (
    "Error: {name} was interrupted: the host stopped while this call was running, so it may or may "
    "not have taken effect. It was not run again; check before you retry it."
)


def settle_interrupted_calls(agent: Agent, pause: PauseState) -> list[str]:
    """Give every interrupted call of a non-durable tool its error result; the ids of those calls.

    A call is interrupted when it has no stored result and no person's answer is awaited for it
    (an approved call was executing too). Calls of durable tools are left to run again.
    """
    waiting_for_answer = {p["call"]["id"] for p in pause.pending if p.get("kind") != "approval"}
    settled: list[str] = []
    for call in pause.calls:
        cid = call["id"]
        if cid in pause.results or cid in waiting_for_answer:
            continue
        tool = agent.tools.get(call["name"])
        if tool is not None and tool.durable:
            continue
        pause.results[cid] = {"content": INTERRUPTED_RESULT.format(name=call["name"]), "is_error": True}
        settled.append(cid)
    if settled:
        pause.pending = [p for p in pause.pending if p["call"]["id"] not in settled]
    return settled


@dataclass
class RecoveryPlan:
    """What finishing an interrupted turn takes."""

    action: str  # rerun | resume | done
    keep: int  # messages of the conversation to keep
    pause: PauseState | None = None
    decision: str = RECOVERY_DECISION
    answer: str = ""


def plan_recovery(envelope: Envelope, state: TurnState) -> RecoveryPlan:
    """Read the stored conversation's tail and decide how to finish the turn."""
    marker = envelope.turn or {}
    messages = state.agent.memory.require(state.conversation_id).messages
    if marker.get("kind") == "resume" and envelope.pause is not None:
        # crashed while resuming a pause, before its batch joined: resume it again, serving what finished
        pause = PauseState.from_dict(copy.deepcopy(envelope.pause))  # the envelope's parts are read-only
        done = {cid: r for cid, r in envelope.tool_results.items() if cid not in pause.results}
        pause.results.update({cid: {"content": r["content"], "is_error": r["is_error"]} for cid, r in done.items()})
        pause.pending = [p for p in pause.pending if p["call"]["id"] not in done]
        return RecoveryPlan("resume", len(messages), pause, decision=str(marker.get("text", "")))
    base = int(marker.get("base", 0))
    tail = messages[base:]
    if marker.get("kind") == "run" and len(tail) <= 1 and all(m.item.kind == ItemKind.USER for m in tail):
        return RecoveryPlan("rerun", base)
    end = len(messages)
    results: dict[str, dict[str, Any]] = {}
    while end > base and messages[end - 1].item.kind == ItemKind.TOOL_RESULT:
        body = messages[end - 1].item.body
        results[body["call_id"]] = {"content": body["content"], "is_error": bool(body["is_error"])}
        end -= 1
    start = end
    while start > base and messages[start - 1].item.kind == ItemKind.TOOL_CALL:
        start -= 1
    calls = [dict(m.item.body) for m in messages[start:end]]
    if not calls:
        last = messages[-1] if messages else None
        answer = last.item.text if last is not None and last.item.kind == ItemKind.ASSISTANT else ""
        return RecoveryPlan("done", len(messages), answer=answer)
    for cid, r in envelope.tool_results.items():
        results.setdefault(cid, {"content": r["content"], "is_error": bool(r["is_error"])})
    known = {c["id"] for c in calls}
    pause = PauseState(
        run_id=str(marker.get("run_id") or ""), conversation_id=state.conversation_id, question="",
        pending=[], results={cid: r for cid, r in results.items() if cid in known},
        calls=[{"id": c["id"], "name": c["name"], "arguments": c.get("arguments", "")} for c in calls],
        turns=int(marker.get("turns", 0)), tool_calls=int(marker.get("tool_calls", 0)),
        usage=dict(marker.get("usage") or {"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0}),
        next_seq=0, last_stage="",
    )
    return RecoveryPlan("resume", end, pause)


async def recover(turns: SessionTurns, agent: Agent, envelope: Envelope, emit: Emit | None) -> TurnReply:
    """Finish the interrupted turn stored in ``envelope`` and persist it; its reply."""
    marker = envelope.turn or {}
    state = turns.hydrate(agent, envelope.session_id, envelope, kind=str(marker.get("kind", "run")),
                          text=str(marker.get("text", "")), turn_id=marker.get("turn_id"))
    try:
        await agent.memory.hold_all(state.conversation_id)  # (the plan counts the conversation's messages)
        state.base = int(marker.get("base", state.base))
        state.run_id = marker.get("run_id")
        state.turns, state.tool_calls = int(marker.get("turns", 0)), int(marker.get("tool_calls", 0))
        state.tool_results = {k: dict(v) for k, v in envelope.tool_results.items()}
        plan = plan_recovery(envelope, state)
        del agent.memory.require(state.conversation_id).messages[plan.keep:]
        if emit is not None:
            emit("recovering", {"session_id": envelope.session_id, "run_id": state.run_id, "action": plan.action})
        if plan.action == "done":
            _end_recorded_run(agent, state, "answered", output=plan.answer)
            result = RunResult(plan.answer, "answered", state.run_id or "")
        elif plan.action == "rerun":
            _end_recorded_run(agent, state, "failed", error="interrupted: the host stopped during this run; "
                                                             "its message ran again in a new run")
            state.run_id, state.turns, state.tool_calls = None, 0, 0
            state.tool_results.clear()
            result = await turns.run(state, emit=emit)
        else:
            assert plan.pause is not None
            if not plan.pause.run_id:
                plan.pause.run_id = state.run_id = agent.recorder.start_run(
                    agent=agent.name, input=state.text, session_id=envelope.session_id).id
            plan.pause.next_seq, plan.pause.last_stage = _recording_position(agent, state, plan.pause)
            settle_interrupted_calls(agent, plan.pause)
            result = await turns.run(state, pause=plan.pause, decision=plan.decision, emit=emit)
        return await turns.finish(state, result)
    finally:
        turns.release(state)


def _end_recorded_run(agent: Agent, state: TurnState, status: str, **outcome: Any) -> None:
    recorder = agent.recorder
    if recorder.enabled and state.run_id:
        recorder.continue_run(state.run_id, agent=agent.name, session_id=state.session_id).end(status, **outcome)


def _recording_position(agent: Agent, state: TurnState, pause: PauseState) -> tuple[int, str]:
    """Where the interrupted run's recording stops: the next stage number and the last stage written."""
    recorder = agent.recorder
    if not recorder.enabled:
        return pause.next_seq, pause.last_stage
    store = recorder.store
    store.flush()
    rows = store.query("SELECT id, seq FROM stages WHERE run_id = ? ORDER BY seq DESC LIMIT 1", [pause.run_id])
    if rows:
        return int(rows[0][1]) + 1, str(rows[0][0])
    # nothing of the run reached the store (exit durability): give the continuation a start
    if store.query("SELECT 1 FROM runs WHERE id = ?", [pause.run_id]):
        run = recorder.continue_run(pause.run_id, agent=agent.name, session_id=state.session_id)
    else:
        run = recorder.start_run(agent=agent.name, input=state.text, session_id=state.session_id,
                                 run_id=pause.run_id)
    with run.stage(StageKind.INPUT, "user message (recovered)") as stage:
        stage.output(Item.of_text(ItemKind.USER, state.text), origin_kind=OriginKind.USER, source="input")
    return run.next_seq, stage.id


INTERRUPTED_RUN = "interrupted: the process recording this run stopped before it ended"


async def end_abandoned_runs(recorder: Recorder, continued: Callable[[str, str], Awaitable[bool]]) -> list[str]:
    """End every run the store holds as ``running`` — left by a process that died — as ``failed``.

    Call it when the host starts, before any turn (the host owns the recordings file, so no live
    process records those runs). ``continued(session_id, run_id)`` says whether that session's
    stored turn will continue the run on its next request: such a run is left for recovery to
    end. Returns the ids of the runs ended.
    """
    store = recorder.store
    if store.read_only:
        return []
    await asyncio.to_thread(store.flush)
    rows = await asyncio.to_thread(
        store.query, "SELECT id, session_id, agent, attributes FROM runs WHERE status = 'running' ORDER BY id")
    ended = []
    for run_id, session_id, agent_name, attributes in rows:
        if session_id and await continued(str(session_id), str(run_id)):
            continue
        try:
            kept = json.loads(attributes) if attributes else {}
        except ValueError:
            kept = {}
        recorder.continue_run(str(run_id), agent=str(agent_name or ""), session_id=session_id).end(
            "failed", error=INTERRUPTED_RUN,
            attributes={**(kept if isinstance(kept, dict) else {}), "stop_reason": "interrupted"})
        ended.append(str(run_id))
    if ended:
        await asyncio.to_thread(store.flush)
    return ended

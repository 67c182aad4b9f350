"""The one rebuild that replay, counterfactual and blame share: run a recorded run again, as planned.

A :class:`~._edits.Plan` says what changes (nothing, for a control re-run) and from which call the
live provider answers. Before that call the recorded responses are served; with ``check`` each of
those requests must be exactly the recorded snapshot (a replay, a control). The model's own
outputs that a plan edits are changed in every response that holds them, recorded or live.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tracer import ContextItem, NullRecorder, Recorder, SnapshotEntry, diff_snapshots

from .._events import RunResult
from ..errors import ProviderError, ReplayMismatchError
from ..providers import ModelRequest, ModelResponse, Provider
from ._edits import ConversationEdits, Plan, edit_response
from ._rebuild import ForkRecorder, ServedTools, rebuild_agent
from ._recording import RecordedInference, RecordedRun
from ._window import RecordedWindowMemory


def snapshot_key(recording: RecordedRun, inference: RecordedInference) -> str:
    """The key (:attr:`ModelRequest.key`) of the request the recorded inference sent."""
    items = recording.data.items
    return ModelRequest.of([ContextItem(items[e.item_hash], e.origin) for e in inference.entries]).key


def describe_difference(recording: RecordedRun, expected: RecordedInference, request: ModelRequest) -> str:
    """What the request has that the recorded snapshot has not, and the other way round, in a line or two."""
    items = dict(recording.data.items)
    sent = []
    for position, ci in enumerate(request.context):
        items.setdefault(ci.item.hash, ci.item)
        sent.append(SnapshotEntry(position, ci.item.hash, ci.origin))
    diff = diff_snapshots(expected.entries, sent, items)
    if diff.changed:
        parts = []
        for entry in diff.entries[:4]:
            where = f"{entry.origin_kind} {entry.origin_source}" if entry.origin_source else entry.origin_kind
            text = f"{entry.change} {entry.item_kind} from {where}: {_short(entry.text)}"
            if entry.before_text is not None:
                text += f" (recorded: {_short(entry.before_text)})"
            parts.append(text)
        more = len(diff.entries) - 4
        return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")
    recorded = [e.item_hash for e in expected.entries]
    replayed = [e.item_hash for e in sent]
    for position, (a, b) in enumerate(zip(recorded, replayed, strict=False)):
        if a != b:
            return (f"the same items in another order (position {position}: recorded {_describe(items, a)}, "
                    f"replayed {_describe(items, b)})")
    return f"the recording sent {len(recorded)} items, the replay {len(replayed)}"


def _describe(items: dict[str, Any], item_hash: str) -> str:
    item = items.get(item_hash)
    return f"{item.kind} {_short(item.text)}" if item else item_hash[:12]


def _short(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")


class ForkModel(Provider):
    """Serves the recorded responses before the fork call, then asks the live provider.

    With ``check``, every request before the fork (and the fork's own, ``check_fork``) must be the
    recorded snapshot; the first that is not raises :class:`ReplayMismatchError` (kept in
    :attr:`mismatch`). Without a live provider, a call past the recording fails the same way.
    """

    def __init__(self, recording: RecordedRun, fork: int, live: Provider | None, *, plan: Plan | None = None,
                 check: bool = False) -> None:
        self.recording, self.fork, self.live = recording, fork, live
        self.outputs = [] if plan is None else plan.outputs
        self.check = check
        self.name = live.name if live is not None else "recording"
        self.labels = tuple(getattr(live, "labels", ()))
        self.calls = 0
        self.live_calls = 0
        self.mismatch: ReplayMismatchError | None = None

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The recorded response for a call before the fork, the live one after (edited as planned)."""
        n = self.calls
        self.calls += 1
        inferences = self.recording.inferences
        # the call that produced an edited output is served its recorded response, edited: the edit is
        # what is tested there, not whatever else a live model might say
        produced_here = any(e.first == n for e in self.outputs)
        if n < self.fork or self.live is None or produced_here:
            if n >= len(inferences):
                last = inferences[-1].stage
                self._fail(last.id, f"the re-run made model call {n + 1}, but the recording has only "
                                    f"{len(inferences)} (after inference {last.name!r})")
            expected = inferences[n]
            if self.check and request.key != snapshot_key(self.recording, expected):
                self._fail(expected.stage.id, describe_difference(self.recording, expected, request),
                           expected.stage.name)
            if expected.response is None:
                raise ProviderError(expected.error or "the recorded model call failed", provider="recording")
            response = expected.response
        else:
            self.live_calls += 1
            response = await self.live.complete(request)
        edits = [e for e in self.outputs if e.first <= n]
        return edit_response(response, edits) if edits else response

    def _fail(self, stage_id: str, difference: str, stage_name: str | None = None) -> None:
        where = f"inference {stage_name!r} (stage {stage_id})" if stage_name else f"stage {stage_id}"
        self.mismatch = ReplayMismatchError(
            f"re-run of run {self.recording.run_id} stopped at {where}: the request differs from the recording: "
            f"{difference}",
            stage=stage_id, difference=difference,
        )
        raise self.mismatch


@dataclass
class Rerun:
    """One finished re-run: its result, what the model and the tools did, and a mismatch if checked."""

    result: RunResult
    model: ForkModel
    tools: ServedTools

    @property
    def mismatch(self) -> ReplayMismatchError | None:
        """The first request that differed from the recording (checked re-runs only)."""
        return self.model.mismatch


async def rerun(
    recording: RecordedRun,
    plan: Plan,
    *,
    live: Provider | None,
    tools: ServedTools,
    recorder: Recorder | None,
    kind: str,
    check: bool = False,
    edit: dict[str, Any] | None = None,
    session_id: str | None = None,
    on_agent: Callable[[Any], None] | None = None,
) -> Rerun:
    """Run ``recording`` again as ``plan`` says; record it as a fork into ``recorder`` (None: not recorded)."""
    model = ForkModel(recording, plan.fork, live, plan=plan, check=check)
    fork_stage = recording.inferences[plan.fork].stage.id if plan.fork < len(recording.inferences) else None
    target: Recorder = NullRecorder() if recorder is None else ForkRecorder(
        recorder, source=recording, kind=kind, stage=fork_stage, edit=edit, labels=model.labels)
    memory = RecordedWindowMemory(recording.left_out_keys(), recording.history_runs, restored=plan.restored,
                                  edit=ConversationEdits(plan.conversation) if plan.conversation else None)
    agent = rebuild_agent(recording, parts=plan.parts, provider=model, tools=tools, recorder=target,
                          session_id=session_id or f"{kind}:{recording.run_id}", memory=memory)
    if on_agent is not None:
        on_agent(agent)
    result = await agent.run(plan.message)
    return Rerun(result, model, tools)

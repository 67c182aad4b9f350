"""Replay: run a recorded run again through the real loop, with zero network calls and zero side effects.

The agent is rebuilt from the recording (see :mod:`._rebuild`); :class:`RecordedModel` answers
each model call with the recorded response, after checking that the request is the very snapshot
the recording holds for that turn (same items, same order: the request's key); the tools serve the
recorded results. The first request that differs stops the replay with a
:class:`~agent.errors.ReplayMismatchError` naming the stage and the difference. The replayed run is
recorded as a new run, forked from the original and labelled ``replay``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracer import ContextItem, Recorder, RunDivergence, SnapshotEntry, Store, compare_runs, diff_snapshots

from ..errors import ProviderError, ReplayMismatchError
from ..providers import ModelRequest, ModelResponse, Provider
from ._rebuild import AgentParts, ForkRecorder, ServedTools, rebuild_agent
from ._recording import RecordedInference, RecordedRun, read_recording


class RecordedModel(Provider):
    """A provider keyed by the snapshot: it serves a recorded run's responses, and nothing else.

    The n-th request must be exactly the snapshot of the recording's n-th inference; otherwise the
    call fails with a :class:`ReplayMismatchError` (kept in :attr:`mismatch`).
    """

    name = "recording"

    def __init__(self, recording: RecordedRun) -> None:
        self.recording = recording
        self.calls = 0
        self.mismatch: ReplayMismatchError | None = None

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The recorded response for this turn, when the request matches the recorded snapshot."""
        n = self.calls
        self.calls += 1
        inferences = self.recording.inferences
        if n >= len(inferences):
            last = inferences[-1].stage
            self._fail(last.id, f"the replay made model call {n + 1}, but the recording has only {len(inferences)} "
                                f"(after inference {last.name!r})")
        expected = inferences[n]
        if request.key != snapshot_key(self.recording, expected):
            self._fail(expected.stage.id, describe_difference(self.recording, expected, request),
                       expected.stage.name)
        if expected.response is None:
            raise ProviderError(expected.error or "the recorded model call failed", provider=self.name)
        return expected.response

    def _fail(self, stage_id: str, difference: str, stage_name: str | None = None) -> None:
        where = f"inference {stage_name!r} (stage {stage_id})" if stage_name else f"stage {stage_id}"
        self.mismatch = ReplayMismatchError(
            f"replay of run {self.recording.run_id} stopped at {where}: the request differs from the recording: "
            f"{difference}",
            stage=stage_id, difference=difference,
        )
        raise self.mismatch


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


@dataclass
class ReplayResult:
    """A finished replay: the new run, how it ended, and whether it reproduced the recording exactly."""

    source_run_id: str
    run_id: str
    status: str
    answer: str
    model_calls: int
    tool_calls: int
    divergence: RunDivergence

    @property
    def identical(self) -> bool:
        """True when the replayed run has the same stages, snapshots and outputs as the recording."""
        return self.divergence.index is None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "source_run_id": self.source_run_id, "run_id": self.run_id, "status": self.status,
            "answer": self.answer, "model_calls": self.model_calls, "tool_calls": self.tool_calls,
            "identical": self.identical, "divergence": self.divergence.to_dict(),
        }


async def replay(store: Store, run: str, *, recorder: Recorder | None = None) -> ReplayResult:
    """Run the recorded run ``run`` (an id, a unique prefix or ``last``) again from its recording.

    No model is called and no tool is executed. The replay is recorded into ``store`` as a new run
    (forked from ``run``, labelled ``replay``). Raises :class:`ReplayMismatchError` at the first
    request that differs from the recording, and :class:`NotReplayableError` when the recording
    cannot be rebuilt.
    """
    store.flush()
    run_id = store.resolve_run_id(run)
    recording = read_recording(store.load_run(run_id))
    model = RecordedModel(recording)
    tools = ServedTools(recording)
    fork = ForkRecorder(recorder or Recorder(store), source=recording, kind="replay")
    agent = rebuild_agent(recording, parts=AgentParts.of(recording), provider=model, tools=tools, recorder=fork,
                          session_id=f"replay:{run_id}")
    result = await agent.run(recording.message)
    store.flush()
    if model.mismatch is not None:
        mismatch = model.mismatch
        raise ReplayMismatchError(f"{mismatch} (the replay is recorded as run {result.run_id})",
                                  stage=mismatch.stage, difference=mismatch.difference)
    return ReplayResult(run_id, result.run_id, result.status, result.answer, model.calls, len(tools.served),
                        compare_runs(store, run_id, result.run_id).divergence)

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

from tracer import Recorder, RunDivergence, Store, compare_runs

from ..errors import ReplayMismatchError
from ._edits import plan
from ._rebuild import ServedTools
from ._recording import RecordedRun, read_recording
from ._rerun import ForkModel, rerun


class RecordedModel(ForkModel):
    """A provider keyed by the snapshot: it serves a recorded run's responses, and nothing else.

    The n-th request must be exactly the snapshot of the recording's n-th inference; otherwise the
    call fails with a :class:`ReplayMismatchError` (kept in :attr:`mismatch`).
    """

    name = "recording"

    def __init__(self, recording: RecordedRun) -> None:
        super().__init__(recording, len(recording.inferences), None, check=True)


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
    tools = ServedTools(recording)
    started: list[Any] = []
    try:
        done = await rerun(recording, plan(recording, []), live=None, tools=tools, recorder=recorder or Recorder(store),
                           kind="replay", check=True, session_id=f"replay:{run_id}", on_agent=started.append)
    except ReplayMismatchError as mismatch:
        store.flush()
        raise ReplayMismatchError(f"{str(mismatch).replace('re-run', 'replay', 1)} (the replay is recorded as run "
                                  f"{_last_run(store, run_id)})", stage=mismatch.stage,
                                  difference=mismatch.difference) from None
    store.flush()
    result = done.result
    return ReplayResult(run_id, result.run_id, result.status, result.answer, done.model.calls, len(tools.served),
                        compare_runs(store, run_id, result.run_id).divergence)


def _last_run(store: Store, source: str) -> str:
    rows = store.query("SELECT id FROM fp_run WHERE forked_from_run = ? ORDER BY id DESC LIMIT 1", [source])
    return str(rows[0][0]) if rows else "?"

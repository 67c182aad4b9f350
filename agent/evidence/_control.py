"""Control re-runs: before any verdict, a re-run with no edit must reproduce the recording.

Two checks, each made once and cached (per run, and per run and stage):

* **the snapshots**: the run rebuilt with every recorded response served must send, call by call,
  exactly the recorded snapshots (no model, no tool runs). Up to the first call that differs the
  rebuild is faithful; a counterfactual from a later call would compare against a context that never
  existed;
* **the live model**: from the stage a counterfactual starts at, the live provider with nothing
  edited must give the recorded answer again. If it does not, a changed answer says nothing about
  the edit.

A counterfactual whose control fails gets the verdict ``inconclusive`` with the reason, never ``flips``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import ReplayMismatchError
from ..providers import Provider
from ._edits import plan
from ._rebuild import ServedTools
from ._recording import RecordedRun
from ._rerun import rerun

#: comparator(original answer, new answer) -> True when they count as the same answer.
Comparator = Callable[[str, str], bool]


@dataclass
class Control:
    """The outcome of a control: did the rebuild reproduce the recording from this stage? Why not?"""

    run_id: str
    stage: int  # 0-based index of the inference the counterfactual starts at
    reproduced: bool
    reason: str = ""
    reruns: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return dict(self.__dict__)


@dataclass
class Controls:
    """Control results cached per run (the snapshots) and per run and stage (the live model)."""

    snapshots: dict[str, tuple[int, str]] = field(default_factory=dict)  # run -> (calls reproduced, why not)
    live: dict[tuple[str, int], Control] = field(default_factory=dict)
    reruns: int = 0

    async def check(self, recording: RecordedRun, stage: int, *, provider: Provider, tools: ServedTools,
                    same: Comparator, original: str) -> Control:
        """The control for a counterfactual of ``recording`` from inference ``stage`` (0-based)."""
        cached = self.live.get((recording.run_id, stage))
        if cached is not None:
            return cached
        reproduced, why_not = await self._snapshots(recording)
        if reproduced <= stage:
            inference = recording.inferences[reproduced]
            control = Control(recording.run_id, stage, False,
                              f"a re-run with no edit does not reproduce the recorded context of inference "
                              f"{inference.stage.name!r} ({inference.stage.id}): {why_not}", 1)
        else:
            done = await rerun(recording, plan(recording, [], fork=stage), live=provider, tools=tools, recorder=None,
                               kind="control")
            self.reruns += 1
            answer = done.result.answer or done.result.question or ""
            status = done.result.status
            if status == recording.data.run.status and same(original, answer):
                control = Control(recording.run_id, stage, True, reruns=1)
            else:
                control = Control(recording.run_id, stage, False,
                                  f"with no edit, the live model ({provider.name}) does not give the recorded answer "
                                  f"from inference {stage + 1} on ({status}: {answer[:120]!r}); is it the model the "
                                  f"run was made with (--provider)?", 1)
        self.live[(recording.run_id, stage)] = control
        return control

    async def _snapshots(self, recording: RecordedRun) -> tuple[int, str]:
        cached = self.snapshots.get(recording.run_id)
        if cached is None:
            self.reruns += 1
            try:
                done = await rerun(recording, plan(recording, []), live=None, tools=ServedTools(recording),
                                   recorder=None, kind="control", check=True)
                cached = (done.model.calls, "")
            except ReplayMismatchError as mismatch:
                calls = next((i for i, inf in enumerate(recording.inferences) if inf.stage.id == mismatch.stage), 0)
                cached = (calls, mismatch.difference or str(mismatch))
            self.snapshots[recording.run_id] = cached
        return cached

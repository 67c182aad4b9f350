"""How a run started by another run is linked to it: the parent's ``subagent`` stage and the child run.

    parent run:  ... tool ask_researcher -> subagent "researcher" (child_run = R2) ...
    child run R2: attributes parent_run = R1, parent_stage = that subagent stage

The ``subagent`` stage's inputs are what the parent handed over (the call, the shared context) and
the child's answer with its origin in the child run, so `why` walks from the parent's answer into
the child; the child's shared-context items carry origins in the parent, so it walks back out too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracer import (
    CHILD_RUN,
    PARENT_AGENT,
    PARENT_RUN,
    PARENT_STAGE,
    ContextItem,
    Recorder,
    RunRecording,
    StageKind,
    StageRecording,
)


@dataclass(frozen=True)
class ChildLink:
    """Where a child run comes from: the parent run's ``subagent`` stage (and the parent agent's name)."""

    run_id: str
    stage_id: str
    agent: str

    def attributes(self) -> dict[str, str]:
        """The child run's link attributes."""
        return {PARENT_RUN: self.run_id, PARENT_STAGE: self.stage_id, PARENT_AGENT: self.agent}


class LinkedRecorder(Recorder):
    """A recorder whose next run is recorded as the child of a ``subagent`` stage, when one is set.

    One orchestrator runs one execution at a time, so the link it sets before starting a run is the
    one that run takes (and clears).
    """

    def __init__(self, base: Recorder) -> None:
        super().__init__(base.store, durability=base.durability, redaction=base.redaction,
                         listeners=getattr(base, "listeners", ()))
        self.base = base
        self.next_link: ChildLink | None = None

    def start_run(self, **kwargs: Any) -> RunRecording:
        """Open the run, with its link to the parent stage when one was set."""
        link, self.next_link = self.next_link, None
        if link is not None:
            kwargs["attributes"] = {**(kwargs.get("attributes") or {}), **link.attributes()}
        return super().start_run(**kwargs)


def open_subagent_stage(
    run: RunRecording, agent: str, *, after: list[StageRecording | str], parent: StageRecording | None,
    handed: list[ContextItem], attributes: dict[str, Any],
) -> StageRecording:
    """Open the ``subagent`` stage of ``run`` for a hand-over to ``agent`` (its inputs: what was handed over)."""
    stage = run.stage(StageKind.SUBAGENT, agent, after=after, parent=parent, attributes={"agent": agent, **attributes})
    if handed:
        stage.inputs(handed)
    return stage


def close_subagent_stage(
    stage: StageRecording, *, child_run: str | None, answer: ContextItem | None, status: str, error: str | None,
) -> ContextItem | None:
    """Record the child's run and answer on the stage and close it; the answer as this stage's output."""
    if child_run is not None:
        stage.set(**{CHILD_RUN: child_run, "child_status": status})
    out = None
    if answer is not None:
        stage.inputs([answer])  # with its origin in the child run: `why` walks into the child from here
        out = stage.output(answer.item)
    stage.close("ok" if error is None else "error", error)
    return out

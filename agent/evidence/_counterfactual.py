"""Counterfactual: would the answer change without this item (or with this text instead)?

Take the recorded run, apply edits (:mod:`._edits`: remove, replace, a tool that returned nothing or
an error, an item restored into the window), and run the rest of the run again from the first call
an edit changes, against a live provider, N times:

* first, a control (:mod:`._control`): the run rebuilt with no edit must reproduce the recorded
  snapshots, and the live model must give the recorded answer from that call; when it does not,
  the verdict is ``inconclusive`` with the reason, and no edited re-run is made;
* the model calls before the fork are served their recorded responses; from the fork on, the live
  provider answers;
* a tool call identical to one the recording made (same name and arguments) gets the recorded
  result (or its edit); a new call runs the real tool when it is durable (``new_calls="durable"``,
  the default), or any tool (``"all"``), or none (``"none"``); a refused call gets an error result
  the model sees. A non-durable tool never runs twice for the same call.

Each re-run is recorded as a run forked from the original, pointing at the stage and the edit.
The verdict: ``flips`` when at least two thirds of the re-runs answer differently, ``holds`` when
none does, ``inconclusive`` otherwise (including re-runs that failed, and a failed control).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracer import NotFoundError, Recorder, RedactionPolicy, Store, resolve_item

from ..errors import ToolRejectedError
from ..providers import Provider
from ..tools import DEFAULT_MAX_RESULT_CHARS, Tool, ToolRegistry, cut_result, result_text, storable
from ._control import Comparator, Control, Controls
from ._edits import Edit, Plan, ResolvedEdit, plan, resolve
from ._rebuild import Once, ServedTools
from ._recording import RecordedInference, RecordedRun, call_key, read_recording
from ._rerun import rerun
from .errors import EditError, EvidenceError

NEW_CALL_POLICIES = ("durable", "all", "none")


@dataclass
class Outcome:
    """One re-run: its run id, how it ended, and whether its answer is the original one."""

    run_id: str
    status: str
    answer: str
    result: str  # same | changed | error
    error: str | None = None
    frozen_calls: int = 0
    new_calls: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return dict(self.__dict__)


@dataclass
class CounterfactualResult:
    """The verdict of a counterfactual, the control it started from, and the outcomes behind it."""

    source_run_id: str
    stage_id: str
    stage_name: str
    edits: list[ResolvedEdit]
    original_status: str
    original_answer: str
    outcomes: list[Outcome] = field(default_factory=list)
    control: Control | None = None
    seconds: float = 0.0

    @property
    def changed(self) -> int:
        """How many re-runs answered differently."""
        return sum(1 for o in self.outcomes if o.result == "changed")

    @property
    def verdict(self) -> str:
        """``flips``, ``holds`` or ``inconclusive`` (always, when the control failed)."""
        if self.control is not None and not self.control.reproduced:
            return "inconclusive"
        return verdict_of([o.result for o in self.outcomes])

    @property
    def reason(self) -> str:
        """Why the verdict is inconclusive when the control says so ("" otherwise)."""
        return self.control.reason if self.control is not None and not self.control.reproduced else ""

    @property
    def reruns(self) -> int:
        """Re-runs made: the edited ones and the controls this counterfactual made itself."""
        return len(self.outcomes) + (self.control.reruns if self.control is not None else 0)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "source_run_id": self.source_run_id, "stage_id": self.stage_id, "stage_name": self.stage_name,
            "edits": [e.to_dict() for e in self.edits], "original_status": self.original_status,
            "original_answer": self.original_answer, "verdict": self.verdict, "reason": self.reason,
            "changed": self.changed, "control": None if self.control is None else self.control.to_dict(),
            "reruns": self.reruns, "seconds": round(self.seconds, 3),
            "outcomes": [o.to_dict() for o in self.outcomes],
        }


def verdict_of(results: Sequence[str]) -> str:
    """``flips`` (a clear majority, two thirds or more, changed), ``holds`` (every one the same), else ``inconclusive``."""
    changed = sum(1 for r in results if r == "changed")
    if results and changed * 3 >= 2 * len(results):
        return "flips"
    if results and all(r == "same" for r in results):
        return "holds"
    return "inconclusive"


def exact(original: str, answer: str) -> bool:
    """The default comparator: the very same text."""
    return original == answer


def resolve_stage(recording: RecordedRun, stage: str | int | None, items: Sequence[str]) -> RecordedInference:
    """The inference ``stage`` names: a stage id or unique prefix, or a turn number (1 = the first call).

    Without one, the first inference (each edit then starts at the first call it changes).
    """
    inferences = recording.inferences
    listing = ", ".join(f"{i.turn}: {i.stage.id}" for i in inferences)
    if stage is None:
        for ref in items:
            try:
                resolve_item(recording.data, ref, recording.names)
            except NotFoundError as exc:
                raise EditError(str(exc)) from None
        return inferences[0]
    text = str(stage)
    if text.isdigit() and 1 <= int(text) <= len(inferences):
        return inferences[int(text) - 1]
    matches = [i for i in inferences if i.stage.id.startswith(text)]
    if len(matches) == 1:
        return matches[0]
    if any(s.id.startswith(text) for s in recording.data.stages):
        raise EditError(f"stage {text} of run {recording.run_id} is not an inference; a counterfactual starts "
                        f"at an inference (turn: stage) {listing}")
    raise NotFoundError(f"no inference of run {recording.run_id} matches {text!r}; its inferences (turn: stage): "
                        f"{listing}")


def _tool_map(tools: Sequence[Tool] | ToolRegistry) -> dict[str, Tool]:
    if isinstance(tools, ToolRegistry):
        return {name: tools.get(name) for name in tools.names()}
    return {t.name: t for t in tools}


def new_call_handler(
    tools: dict[str, Tool], policy: str, executions: Once, *, redaction: RedactionPolicy | None = None
) -> Callable[[str, dict[str, Any]], Any]:
    """What a call the recording did not make gets, by ``policy`` (see the module docstring).

    A new result is cut as the live loop cuts one: to the tool's ``max_result_chars``, else
    :data:`agent.tools.DEFAULT_MAX_RESULT_CHARS`, its cut points kept out of what ``redaction`` masks.
    """
    if policy not in NEW_CALL_POLICIES:
        raise EvidenceError(f"new_calls must be one of {', '.join(NEW_CALL_POLICIES)}, not {policy!r}")

    async def handle(name: str, arguments: dict[str, Any]) -> str:
        real = tools.get(name)
        if real is None:
            raise ToolRejectedError(f"{name} was not run: this call is new in the counterfactual and no "
                                    f"implementation of {name} was given; its result is unknown")
        if policy == "none" or (policy == "durable" and not real.durable):
            raise ToolRejectedError(f"{name} was not run: this call is new in the counterfactual and {name} is not "
                                    f"durable (it may have side effects); its result is unknown")

        async def run() -> str:
            text = storable(result_text(await real.execute(arguments)))
            cut = cut_result(text, real.max_result_chars or DEFAULT_MAX_RESULT_CHARS, redaction)
            return text if cut is None else cut.text

        return await executions.get(call_key(name, arguments), run)

    return handle


async def counterfactual(
    store: Store,
    run: str,
    *,
    edits: Edit | Sequence[Edit],
    provider: Provider,
    stage: str | int | None = None,
    tools: Sequence[Tool] | ToolRegistry = (),
    repeats: int = 3,
    comparator: Comparator | None = None,
    new_calls: str = "durable",
    recorder: Recorder | None = None,
    executions: Once | None = None,
    controls: Controls | None = None,
    recording: RecordedRun | None = None,
    on_outcome: Callable[[Outcome], None] | None = None,
    flush: bool = True,
) -> CounterfactualResult:
    """Re-run ``run`` with ``edits`` applied, ``repeats`` times, against ``provider``, after a control.

    ``stage`` is a stage id (or unique prefix) or a turn number the edits apply from; without it,
    each edit applies from the first call it changes. ``tools`` are the real tools for calls the
    recording did not make. ``comparator(original, new)`` says whether two answers are the same
    (default: identical text). ``executions`` shares new tool results between counterfactuals and
    ``controls`` the control re-runs (blame passes both); ``recording`` saves reading the run again.
    The re-runs are in the store when this returns (``flush=False``: once the store is flushed).
    """
    started = time.perf_counter()
    if repeats < 1:
        raise EvidenceError(f"repeats must be at least 1, not {repeats}")
    edit_list = [edits] if isinstance(edits, Edit) else list(edits)
    if not edit_list:
        raise EditError("a counterfactual needs at least one edit (remove or replace an item)")
    if recording is None:
        store.flush()
        recording = read_recording(store.load_run(store.resolve_run_id(run)), store)
    start = resolve_stage(recording, stage, [e.item for e in edit_list])
    resolved = resolve(recording, start.turn - 1, edit_list)
    planned = plan(recording, resolved)
    return await run_plan(store, recording, planned, resolved, provider=provider, tools=tools, repeats=repeats,
                          comparator=comparator, new_calls=new_calls, recorder=recorder, executions=executions,
                          controls=controls, on_outcome=on_outcome, flush=flush, started=started)


async def run_plan(
    store: Store,
    recording: RecordedRun,
    planned: Plan,
    resolved: list[ResolvedEdit],
    *,
    provider: Provider,
    tools: Sequence[Tool] | ToolRegistry = (),
    repeats: int = 3,
    comparator: Comparator | None = None,
    new_calls: str = "durable",
    recorder: Recorder | None = None,
    executions: Once | None = None,
    controls: Controls | None = None,
    on_outcome: Callable[[Outcome], None] | None = None,
    flush: bool = True,
    started: float | None = None,
    described: dict[str, Any] | None = None,
) -> CounterfactualResult:
    """The counterfactual of a prepared plan: the control first, then ``repeats`` re-runs compared to the
    recorded answer (``described`` is recorded as the forks' edit instead of ``resolved``)."""
    started = time.perf_counter() if started is None else started
    run_id = recording.run_id
    fork = recording.inferences[min(planned.fork, len(recording.inferences) - 1)]
    real_tools = _tool_map(tools)
    shared = executions or Once()
    same = comparator or exact
    original = recording.data.run
    result = CounterfactualResult(run_id, fork.stage.id, fork.stage.name, resolved, original.status,
                                  original.output or "")

    def served(edited: bool = True) -> ServedTools:
        return ServedTools(recording, new_call_handler(real_tools, new_calls, shared,
                                                       redaction=recorder.redaction if recorder is not None else RedactionPolicy()),
                           {n: t.durable for n, t in real_tools.items()},
                           results=planned.results if edited else None, refetch=planned.refetch if edited else None)

    checks = controls if controls is not None else Controls()
    before = checks.reruns
    result.control = await checks.check(recording, planned.fork, provider=provider, tools=served(False), same=same,
                                        original=original.output or "")
    result.control = Control(**{**result.control.__dict__, "reruns": checks.reruns - before})
    if not result.control.reproduced:
        result.seconds = time.perf_counter() - started
        return result
    base = recorder or Recorder(store)
    for repeat in range(repeats):
        tools_now = served()
        done = await rerun(recording, planned, live=provider, tools=tools_now, recorder=base, kind="counterfactual",
                           edit={**(described or {"edits": [e.to_dict() for e in resolved]}), "repeat": repeat + 1,
                                 "of": repeats},
                           session_id=f"counterfactual:{run_id}")
        answer = done.result.answer or done.result.question or ""
        if done.result.status == original.status:
            outcome = "same" if same(original.output or "", answer) else "changed"
        elif done.result.status in ("failed", "cancelled"):
            outcome = "error"
        else:
            outcome = "changed"
        result.outcomes.append(Outcome(done.result.run_id, done.result.status, answer, outcome, done.result.error,
                                       len(tools_now.served), len(tools_now.new)))
        if on_outcome is not None:
            on_outcome(result.outcomes[-1])
    if flush:
        store.flush()
    result.seconds = time.perf_counter() - started
    return result

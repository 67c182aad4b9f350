"""Running a plan: steps in dependency order, retries with exponential backoff, deadlocks found first.

Each step type does one thing (its ``config`` says how):

* ``tool_call``: the tool ``tool_name`` with ``tool_args`` (``"{{step.N}}"`` in a value becomes step N's result);
* ``llm_decision``: the decider (an agent) answers the step's description, given its dependencies' results;
* ``user_input``: a person answers ``config["question"]`` (the runner's ``ask``, or an input given to
  :meth:`PlanRunner.execute`); without either the plan pauses at that step;
* ``condition``: true when step ``config["step"]``'s result ``contains`` / ``equals`` a text (or is
  ``not_empty``); steps that depend on a false condition are skipped;
* ``parallel``: the tool calls ``config["calls"]`` (``[{"tool", "args"}]``) at the same time;
* ``loop``: the tool ``config["tool"]`` up to ``config["times"]`` times, until its result contains
  ``config["until"]``.

A failed step is retried ``max_retries`` times, waiting ``base_delay``, then twice that, ...
(``sleep`` is injectable). A plan whose steps wait on each other or on a step it does not have is
refused before anything runs (:class:`PlanDeadlockError`). ``pause_plan`` stops a running plan at
its next step boundary; a cancelled run leaves the plan ``cancelled`` (an interrupt: ``paused``) with
the finished steps kept, and executing it again runs only what is left. A plan executing now in
this process is refused (:meth:`PlanStore.executing`); one stored ``in_progress`` but executing
nowhere here was left so by a crash, and is resumed the same way. Inside a recorded tool call, every step is a
``plan_step`` stage of the calling run, under the call's tool stage.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from tracer import ContextItem, Item, ItemKind, StageKind, StageRecording

from .._batch import running_tool, running_under
from ..errors import ToolArgumentsError
from ..tools import Tool, ToolLike, as_tools, result_text
from ._orchestrator import AgentOrchestrator
from ._plan import REFERENCE, Plan, PlanStep, ancestors, check_acyclic
from ._plan_store import PlanStore
from ._subagent import run_subagent
from .errors import PlanDeadlockError, PlanError

Decider = AgentOrchestrator | Callable[[str], Awaitable[str]]
Ask = Callable[[str], Awaitable[str]]
MAX_LOOP = 20


class _NotRetryable(PlanError):
    """A step failure retrying cannot fix (an unknown tool, arguments that do not fit)."""


class _NeedsInput(Exception):  # control flow: a user_input step with no answer yet
    def __init__(self, question: str) -> None:
        super().__init__(question)
        self.question = question


class PlanRunner:
    """Runs the plans of a :class:`PlanStore` with the given tools, decider and person."""

    def __init__(
        self,
        store: PlanStore,
        *,
        tools: Sequence[ToolLike] = (),
        decider: Decider | None = None,
        ask: Ask | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        base_delay: float = 0.5,
    ) -> None:
        self.store = store
        self.tools: dict[str, Tool] = {t.name: t for t in as_tools(tools, "plan runner")}
        self.decider = decider
        self.ask = ask
        self.sleep = sleep
        self.base_delay = base_delay

    async def execute(self, plan_id: str, inputs: Mapping[int, str] | None = None) -> Plan:
        """Run the plan's pending steps; return the plan as it ended (completed, failed, paused, ...).

        A plan executing now in this process (over the same persistence) is refused with a
        :class:`PlanError`. A plan stored ``in_progress`` that is not executing here was left so by a
        crash: it is resumed, running only the steps that did not finish.
        """
        with self.store.executing(plan_id):
            return await self._execute(plan_id, inputs)

    async def _execute(self, plan_id: str, inputs: Mapping[int, str] | None) -> Plan:
        plan = await self.store.get(plan_id)
        try:
            check_runnable(plan)
        except PlanDeadlockError as exc:
            plan.status, plan.note = "failed", str(exc)
            await self.store.save(plan)
            raise
        plan.status, plan.note = "in_progress", None
        await self.store.save(plan)
        recording = _Recording.start()
        answers = {int(k): v for k, v in (inputs or {}).items()}
        for left in plan.steps:
            if left.status == "in_progress":  # left so by a crash: run it again
                left.status = "pending"
        while True:
            step = _next_step(plan)
            if step is None:
                break
            plan.current_step = step.id
            step.status = "in_progress"
            try:
                await self._run_step(plan, step, answers, recording)
            except asyncio.CancelledError:
                step.status, plan.status, plan.note = "pending", "cancelled", f"cancelled during {step.label}"
                plan.current_step = 0
                await self.store.save(plan)
                raise
            except _NeedsInput as needs:
                step.status, plan.status = "pending", "paused"
                plan.note = f"{step.label} needs input from a person: {needs.question}"
                plan.current_step = 0
                await self.store.save(plan)
                return plan
            except BaseException as exc:  # an interrupt (KeyboardInterrupt, SystemExit, ...): leave it resumable
                step.status, plan.status, plan.current_step = "pending", "paused", 0
                plan.note = (f"interrupted during {step.label} by {type(exc).__name__}: {exc}; "
                             "executing the plan again runs what is left")
                await self.store.save(plan)
                raise
            if await self._stopped(plan, step):
                return plan
        plan.current_step = 0
        failed = [s for s in plan.steps if s.status == "failed"]
        plan.status = "failed" if failed else "completed"
        plan.note = f"{failed[0].label} failed: {failed[0].error}" if failed else None
        await self.store.save(plan)
        return plan

    async def _stopped(self, plan: Plan, step: PlanStep) -> bool:
        """Store the step's progress; True when the plan was paused (or deleted) meanwhile: stop here."""
        stored = await self.store.status(plan.id)
        if stored is None:
            plan.status, plan.note = "cancelled", "the plan was deleted while it ran"
            return True
        if stored[0] == "paused":
            plan.status, plan.note, plan.current_step = "paused", stored[1] or "paused by pause_plan", 0
        await self.store.save_step(plan, step)
        return plan.status == "paused"

    async def _run_step(self, plan: Plan, step: PlanStep, answers: dict[int, str], recording: _Recording) -> None:
        stage = recording.open(plan, step)
        last: Exception | None = None
        for attempt in range(step.max_retries + 1):
            step.attempts += 1
            try:
                with recording.under(stage, step):
                    step.result = await self._do(plan, step, answers)
                step.status, step.error = "completed", None
                recording.close(stage, step)
                return
            except (_NeedsInput, asyncio.CancelledError):
                recording.close(stage, step, "cancelled")
                raise
            except _NotRetryable as exc:
                last = exc
                break
            except Exception as exc:
                last = exc
                if attempt < step.max_retries:
                    await self.sleep(self.base_delay * 2**attempt)
            except BaseException as exc:
                step.error = f"{type(exc).__name__}: {exc}"
                recording.close(stage, step, "error")
                raise
        step.status, step.error = "failed", f"{type(last).__name__}: {last}" if last else "failed"
        recording.close(stage, step, "error")

    async def _do(self, plan: Plan, step: PlanStep, answers: dict[int, str]) -> Any:
        config = step.config
        if step.type == "tool_call":
            return await self._call(step.tool_name or "", step.tool_args, plan, step)
        if step.type == "parallel":
            calls = config.get("calls")
            if not isinstance(calls, list) or not calls:
                raise _NotRetryable(f"{step.label}: a parallel step needs config.calls, a list of {{tool, args}}")
            return list(await asyncio.gather(*(self._call(str(c.get("tool", "")), c.get("args") or {}, plan, step)
                                               for c in calls)))
        if step.type == "loop":
            times = int(config.get("times", 3))
            if not 1 <= times <= MAX_LOOP:
                raise _NotRetryable(f"{step.label}: loop times must be 1 to {MAX_LOOP}, not {times}")
            result = ""
            for _ in range(times):
                result = await self._call(str(config.get("tool") or step.tool_name or ""),
                                          config.get("args") or step.tool_args, plan, step)
                if config.get("until") and str(config["until"]) in result:
                    break
            return result
        if step.type == "condition":
            return _condition(plan, step)
        if step.type == "user_input":
            question = str(config.get("question") or step.description)
            if step.id in answers:
                return answers[step.id]
            if self.ask is None:
                raise _NeedsInput(question)
            return await self.ask(question)
        if step.type == "llm_decision":
            return await self._decide(plan, step)
        raise _NotRetryable(f"{step.label}: unknown step type {step.type!r}")

    async def _call(self, name: str, args: Mapping[str, Any], plan: Plan, step: PlanStep) -> str:
        tool = self.tools.get(name)
        if tool is None:
            raise _NotRetryable(f"there is no tool named {name!r}; the plan's tools: {', '.join(self.tools) or 'none'}")
        # only a finished dependency's result: another step's may not exist yet, or run after this one
        waited = ancestors(plan.steps, step)
        given = {s.id: s.result for s in plan.steps if s.id in waited and s.status == "completed"}
        try:
            arguments = tool.parse_arguments(json.dumps(substitute(dict(args), given, step.label)))
        except ToolArgumentsError as exc:
            raise _NotRetryable(str(exc)) from exc
        return result_text(await tool.run(arguments))

    async def _decide(self, plan: Plan, step: PlanStep) -> str:
        if self.decider is None:
            raise _NotRetryable(f"{step.label} is a decision, and this plan runner has no decider (agent) to ask")
        prompt = decision_prompt(plan.goal, step.description, step.depends_on, _results(plan))
        if isinstance(self.decider, AgentOrchestrator):
            execution = await run_subagent(self.decider, prompt)
            if execution.status != "completed":
                raise PlanError(f"the decider {self.decider.name} {execution.status}: {execution.error}")
            return execution.response
        return await self.decider(prompt)


def check_runnable(plan: Plan) -> None:
    """Raise :class:`PlanDeadlockError` when pending steps can never run: a cycle, or a missing step."""
    ids = {s.id for s in plan.steps}
    for step in plan.steps:
        missing = [d for d in step.depends_on if d not in ids]
        if missing and step.status == "pending":
            raise PlanDeadlockError(f"plan {plan.id}: {step.label} waits for step {missing[0]}, which the plan "
                                    f"does not have; it can never run (add the step or change depends_on)")
    try:
        check_acyclic(plan.steps)
    except PlanDeadlockError as exc:
        raise PlanDeadlockError(f"plan {plan.id}: {exc}; none of them can ever run") from None


def _next_step(plan: Plan) -> PlanStep | None:
    """The first pending step whose dependencies are done; steps behind a failure or a false condition
    are skipped on the way."""
    by_id = {s.id: s for s in plan.steps}
    changed = True
    while changed:
        changed = False
        for step in plan.steps:
            if step.status != "pending":
                continue
            deps = [by_id[d] for d in step.depends_on]
            blocked = next((d for d in deps if d.status in ("failed", "skipped")
                            or (d.type == "condition" and d.status == "completed" and d.result is False)), None)
            if blocked is not None:
                step.status = "skipped"
                step.error = (f"condition step {blocked.id} was false" if blocked.type == "condition"
                              and blocked.status == "completed" else f"step {blocked.id} {blocked.status}")
                changed = True
    return next((s for s in plan.steps if s.status == "pending"
                 and all(by_id[d].status == "completed" for d in s.depends_on)), None)


def _condition(plan: Plan, step: PlanStep) -> bool:
    config = step.config
    try:
        target = plan.step(int(config["step"]))
    except (KeyError, ValueError, TypeError):
        raise _NotRetryable(f"{step.label}: a condition needs config.step, the id of the step it tests") from None
    return condition_holds(config, step_text(target.result), step.label)


def condition_holds(config: Mapping[str, Any], value: str, label: str) -> bool:
    """Whether a condition step with ``config`` is true of the tested step's result ``value`` (as text)."""
    if "contains" in config:
        return str(config["contains"]) in value
    if "equals" in config:
        return value == str(config["equals"])
    if config.get("not_empty"):
        return bool(value.strip())
    raise _NotRetryable(f"{label}: a condition needs contains, equals or not_empty")


def _results(plan: Plan) -> dict[int, Any]:
    return {s.id: s.result for s in plan.steps}


def substitute(value: Any, results: Mapping[int, Any], label: str = "the step") -> Any:
    """``value`` (a step's arguments) with each ``{{step.N}}`` replaced by step N's result in ``results``.

    A reference to a step ``results`` lacks fails the step at once, without retries: retrying cannot
    make the result appear (the step must depend on step N; :func:`parse_plan` refuses such a plan).
    """
    def result(match: re.Match[str]) -> str:
        number = int(match.group(1))
        if number not in results:
            given = ", ".join(map(str, results)) or "none"
            raise _NotRetryable(f"{label} uses step {number}'s result, which it was not given: only the results "
                                f"of the finished steps it waits for are ({given}); add {number} to its depends_on")
        return step_text(results[number])

    if isinstance(value, str):
        return REFERENCE.sub(result, value)
    if isinstance(value, dict):
        return {k: substitute(v, results, label) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, results, label) for v in value]
    return value


def decision_prompt(goal: str, description: str, depends_on: Sequence[int], results: Mapping[int, Any]) -> str:
    """What an ``llm_decision`` step asks its decider: the goal, the decision, its dependencies' results."""
    known = "\n".join(f"- step {d}: {step_text(results.get(d))}" for d in depends_on)
    return f"Plan goal: {goal}\nDecide: {description}" + (f"\nWhat the plan found:\n{known}" if known else "")


def step_text(value: Any) -> str:
    """A step's result as text: what ``{{step.N}}`` stands for and its ``plan_step`` stage outputs."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


class _Recording:
    """Plan steps as ``plan_step`` stages of the run whose tool call executes the plan (if it is recorded)."""

    def __init__(self, tool_stage: StageRecording | None) -> None:
        self.tool_stage = tool_stage
        self.outputs: dict[int, tuple[StageRecording, ContextItem]] = {}

    @classmethod
    def start(cls) -> _Recording:
        running = running_tool()
        if running is None or not running[0].run.recorder.enabled:
            return cls(None)
        return cls(running[0])

    def open(self, plan: Plan, step: PlanStep) -> StageRecording | None:
        if self.tool_stage is None:
            return None
        after = [self.outputs[d][0] for d in step.depends_on if d in self.outputs] or [self.tool_stage]
        stage = self.tool_stage.run.stage(
            StageKind.PLAN_STEP, f"step {step.id}: {step.name or step.description}"[:80], after=after,
            parent=self.tool_stage, attributes={"plan": plan.id, "step": step.id, "type": step.type,
                                                "tool": step.tool_name, "depends_on": step.depends_on,
                                                # what blame needs to test the condition on a changed result
                                                **({"config": step.config} if step.type == "condition" else {})})
        known = [self.outputs[d][1] for d in step.depends_on if d in self.outputs]
        if known:
            stage.inputs(known)
        return stage

    def under(self, stage: StageRecording | None, step: PlanStep) -> Any:
        if stage is None:
            return contextlib.nullcontext()
        task = ContextItem(Item.of_text(ItemKind.TEXT, step.description), stage.origin())
        return running_under(stage, task)

    def close(self, stage: StageRecording | None, step: PlanStep, status: str = "ok") -> None:
        if stage is None or stage.closed:
            return
        stage.set(attempts=step.attempts, step_status=step.status)
        if step.status == "completed":
            self.outputs[step.id] = (stage, stage.output(Item.of_text(ItemKind.TEXT, step_text(step.result))))
        stage.close(status, step.error)
        if self.tool_stage is not None and step.id in self.outputs:
            self.tool_stage.inputs([self.outputs[step.id][1]])

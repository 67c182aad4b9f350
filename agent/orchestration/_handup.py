"""Handing a changed answer up a team: from a re-run sub-agent to the run at the top.

A sub-agent's answer reaches the run above it in one of two ways, and each is re-run its own way:

* a tool call (``agent_tool``): the call's result *is* the answer, so the parent is re-run from
  the model call that saw it, with that result replaced by the new answer;
* a plan step (``execute_plan``): the answer is the step's result, which later steps were given
  (``{{step.N}}`` in a sub-agent's task, a decider's prompt, a condition's test). The plan is
  carried on as it ran: each later sub-agent whose task held a changed result is re-run with the
  task rewritten, a condition is tested again, and the plan's result (``execute_plan``'s JSON)
  is rewritten with the new step results; the parent is re-run with that as the tool's result.

A plan cannot be carried on where it would take another branch (a condition that turns) or run a
plain tool on a changed result (blame has the agents' tools, not the plan's): the hand-up then
stops with an ``error`` and a note saying which step, so the verdict is ``inconclusive``, never a
guess. Every re-run is recorded as a fork (the evidence).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tracer import NotFoundError, Recorder, RunData, Stage, StageKind, Store, started_run

from ..evidence import Comparator, Controls, Edit, EvidenceError, Outcome, counterfactual
from ..providers import Provider
from ..tools import Tool
from ._plan_runner import condition_holds, decision_prompt, step_text, substitute
from ._plan_tools import plan_json
from .errors import PlanError


@dataclass
class Member:
    """What re-runs one agent of the team: its provider and its tools."""

    provider: Provider
    tools: list[Tool]


class HandUpError(Exception):
    """The changed answer cannot be carried further up; the message says where and why."""


@dataclass
class Team:
    """The recorded runs of a team and what re-runs them (one blame's worth)."""

    store: Store
    runs: dict[str, RunData]
    root_id: str
    members: dict[str, Member]
    same: Comparator
    recorder: Recorder | None
    controls: Controls = field(default_factory=Controls)
    parents: dict[str, tuple[str, str]] = field(default_factory=dict)  # child run -> (parent run, subagent stage)

    def __post_init__(self) -> None:
        for data in self.runs.values():
            for stage in data.stages:
                child = started_run(stage)
                if child is not None and child in self.runs:
                    self.parents[child] = (data.run.id, stage.id)

    async def rerun(self, run_id: str, edit: Edit, forks: list[str], repeats: int = 1) -> list[Outcome]:
        """Re-run ``run_id`` with ``edit`` by its agent's member; the re-runs' ids go to ``forks``."""
        agent = self.runs[run_id].run.agent
        member = self.members.get(agent)
        if member is None:
            raise HandUpError(f"no provider given for agent {agent}")
        try:
            result = await counterfactual(self.store, run_id, edits=[edit], provider=member.provider,
                                          tools=member.tools, repeats=repeats, comparator=self.same,
                                          recorder=self.recorder, controls=self.controls)
        except (EvidenceError, NotFoundError) as exc:
            raise HandUpError(f"could not re-run {agent}: {exc}") from exc
        if result.control is not None and not result.control.reproduced:
            raise HandUpError(f"a re-run of {agent} with no edit does not answer as recorded: {result.reason}")
        forks.extend(o.run_id for o in result.outcomes)
        return result.outcomes

    async def carry(self, run_id: str, answer: str, forks: list[str]) -> str:
        """``run_id``'s new answer carried up to the team's run: the final answer it gives."""
        while run_id != self.root_id:
            if self.same(self.runs[run_id].run.output or "", answer):
                return self.runs[self.root_id].run.output or ""  # the hand-over is unchanged: so is all above it
            parent_id, subagent_id = self.parents[run_id]
            parent = self.runs[parent_id]
            holder_id = parent.stage(subagent_id).parent_id
            if holder_id is None:  # routed by a team: the team answers with the agent's answer
                run_id = parent_id
                continue
            holder = parent.stage(holder_id)
            if holder.kind == StageKind.PLAN_STEP:
                tool_stage, result = await self.carry_plan(parent, holder, forks, answers={subagent_id: answer})
            elif holder.kind == StageKind.TOOL:
                tool_stage, result = holder, answer
            else:
                raise HandUpError(f"the hand-over to {self.runs[run_id].run.agent} went through a {holder.kind} "
                                  f"stage, which blame cannot re-run with a new answer")
            outcome = (await self.rerun(parent_id, Edit.replace(self.tool_result(parent, tool_stage), result),
                                        forks))[0]
            if outcome.result == "error":
                raise HandUpError(outcome.error or f"the re-run of {parent.run.agent} failed")
            answer, run_id = outcome.answer, parent_id
        return answer

    @staticmethod
    def tool_result(parent: RunData, tool_stage: Stage) -> str:
        """The hash of the result ``tool_stage`` of ``parent`` recorded (what its model saw)."""
        recorded = parent.outputs.get(tool_stage.id)
        if not recorded or recorded[-1] not in parent.items:
            raise HandUpError(f"tool stage {tool_stage.name!r} of {parent.run.agent} recorded no result")
        return recorded[-1]

    async def carry_plan(self, parent: RunData, step: Stage, forks: list[str], *,
                         answers: dict[str, str] | None = None,
                         results: dict[int, Any] | None = None) -> tuple[Stage, str]:
        """The plan ``step`` belongs to, carried on from it with sub-agents' new ``answers`` (subagent
        stage -> answer) or steps' new ``results`` (step number -> result): the tool stage that ran
        the plan and the result it gives now."""
        tool_stage = parent.stage(step.parent_id) if step.parent_id and parent.has_stage(step.parent_id) else None
        if tool_stage is None or tool_stage.kind != StageKind.TOOL:
            raise HandUpError(f"plan step {step.name!r} of {parent.run.agent} is not under a tool call")
        item = parent.items[self.tool_result(parent, tool_stage)]
        try:
            details = json.loads(item.text)
            entries = {int(s["id"]): s for s in details["steps"]}
        except (ValueError, KeyError, TypeError) as exc:
            raise HandUpError(f"the result of {tool_stage.name!r} is not a plan's details ({exc}): blame cannot "
                              f"put the new step results in it") from None
        plan = _RecordedPlan(str(details.get("goal", "")), entries)
        later = sorted((s for s in parent.stages if s.kind == StageKind.PLAN_STEP and s.parent_id == tool_stage.id
                        and s.seq >= step.seq), key=lambda s: s.seq)
        for stage in later:
            number = int(stage.attributes.get("step", 0))
            if number not in entries:
                raise HandUpError(f"the result of {tool_stage.name!r} has no step {number}")
            if results is not None and number in results:
                new = results[number] if results[number] != entries[number].get("result") else None
            else:
                new = await self._carry_step(parent, stage, plan, number, answers or {}, forks)
            if new is not None:
                plan.changed.add(number)
                entries[number]["result"] = new
        return tool_stage, plan_json(details)

    async def _carry_step(self, parent: RunData, stage: Stage, plan: _RecordedPlan, number: int,
                          answers: dict[str, str], forks: list[str]) -> Any | None:
        """The new result of plan step ``number`` given the changes before it (None: unchanged)."""
        entry = plan.entries[number]
        subagents = sorted((s for s in parent.stages if s.kind == StageKind.SUBAGENT and s.parent_id == stage.id),
                           key=lambda s: s.seq)
        swaps: dict[str, str] = {}  # a sub-agent's recorded answer -> its new one
        for sub in subagents:
            child = self.runs.get(started_run(sub) or "")
            if child is None:
                continue
            new = answers.get(sub.id)
            if new is None:
                new = await self._rerun_on_new_input(child, plan, entry, forks)
            if new is not None and not self.same(child.run.output or "", new):
                swaps[child.run.output or ""] = new
        if swaps:
            return _swapped_result(entry.get("result"), swaps, stage)
        if subagents:
            return None  # the sub-agents answer as recorded: so does the step
        waits_on = [d for d in entry.get("depends_on") or [] if d in plan.changed]
        if not waits_on:
            return None
        config = stage.attributes.get("config")
        if entry.get("type") == "condition" and isinstance(config, dict):
            try:
                tested = plan.results(new=True)[int(config["step"])]
                now = condition_holds(config, step_text(tested), stage.name)
            except (PlanError, KeyError, ValueError, TypeError) as exc:
                raise HandUpError(f"condition {stage.name!r} cannot be tested again: {exc}") from None
            if now == entry.get("result"):
                return None
            raise HandUpError(f"with the new result of step {config['step']}, condition {stage.name!r} turns "
                              f"{'true' if now else 'false'}: the plan would take another branch, which blame does "
                              f"not run")
        raise HandUpError(f"{stage.name!r} ({entry.get('type')}) ran on the result of step {waits_on[0]}, which "
                          f"changed; blame does not run a plan's own tools again")

    async def _rerun_on_new_input(self, child: RunData, plan: _RecordedPlan, entry: dict[str, Any],
                                  forks: list[str]) -> str | None:
        """The child's answer to what its step gives it now (None: the step gives it what it was given)."""
        try:
            if entry.get("type") == "llm_decision":
                depends_on = [int(d) for d in entry.get("depends_on") or []]
                given = [decision_prompt(plan.goal, str(entry.get("description", "")), depends_on,
                                         plan.results(new=new)) for new in (False, True)]
            else:
                args = entry.get("args") or {}
                was, now = (substitute(args, plan.results(new=new)) for new in (False, True))
                key = next((k for k, v in was.items() if v == child.run.input), None) if was != now else None
                if was != now and key is None:
                    raise HandUpError(f"no argument of {entry.get('tool')!r} is the task {child.run.agent} was given")
                given = [child.run.input, str(now[key])] if key is not None else [child.run.input] * 2
        except (KeyError, TypeError, AttributeError, PlanError) as exc:
            raise HandUpError(f"step {entry.get('id')} of the plan cannot be given its new input: {exc}") from None
        if given[0] == given[1]:
            return None
        if given[0] != child.run.input:
            raise HandUpError(f"the run of {child.run.agent} was not given what step {entry.get('id')} gives")
        question = next((child.outputs[s.id][-1] for s in sorted(child.stages, key=lambda s: s.seq)
                         if s.kind == StageKind.INPUT and child.outputs.get(s.id)), None)
        if question is None:
            raise HandUpError(f"the run of {child.run.agent} recorded no task to rewrite")
        outcome = (await self.rerun(child.run.id, Edit.replace(question, given[1]), forks))[0]
        if outcome.result == "error":
            raise HandUpError(outcome.error or f"the re-run of {child.run.agent} failed")
        return outcome.answer


@dataclass
class _RecordedPlan:
    """A plan as execute_plan reported it (``entries``: step number -> its details), and the steps changed."""

    goal: str
    entries: dict[int, dict[str, Any]]
    changed: set[int] = field(default_factory=set)
    recorded: dict[int, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.recorded = {n: e.get("result") for n, e in self.entries.items()}

    def results(self, *, new: bool) -> dict[int, Any]:
        """Every step's result: as recorded, or with the changes made so far."""
        return {n: e.get("result") for n, e in self.entries.items()} if new else dict(self.recorded)


def _swapped_result(recorded: Any, swaps: dict[str, str], step: Stage) -> Any:
    """The step's result with its sub-agents' answers swapped for their new ones."""
    if isinstance(recorded, str) and recorded in swaps:
        return swaps[recorded]
    if isinstance(recorded, list) and any(isinstance(v, str) and v in swaps for v in recorded):
        return [swaps.get(v, v) if isinstance(v, str) else v for v in recorded]
    raise HandUpError(f"the result of {step.name!r} is not its sub-agents' answers: blame cannot write the new one "
                      f"in it")


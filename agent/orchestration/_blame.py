"""Who and when: which agent of a team went wrong, and at which stage — tested, not guessed.

The answer of a team's run depends on every run below it (the runs its ``subagent`` stages
started). Each stage whose output one of those runs' models saw is a suspect: a tool result, a
prompt section, a memory fact, the shared context handed down — and each plan step a plan's own
tool did (its result reached the models through later steps and the plan's result; it is tested
by the plan carried on with that result replaced by nothing). A suspect is tested by replacing
its output — a tool result by nothing (the call kept), anything else by leaving it out — and
re-running its run from the model call that first saw it (:func:`agent.evidence.counterfactual`).
The new answer of that run is then handed up (:mod:`._handup`): the parent is re-run with the
sub-agent's result replaced by it — through a plan, the plan's later steps are carried on with the
new step result first — and so on to the top. The final answers decide the verdict (``flips``,
``holds``, ``inconclusive``), and every re-run is recorded as a fork: the evidence.

Suspects are tested in the order their stages finished; the **decisive stage** is the earliest
one whose replacement flips the final answer, and the **responsible agent** is the agent whose run
holds it. Stages after it are effects of it (they carry the wrong output on), so they are left
untested unless asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracer import ItemKind, OriginKind, Recorder, RunData, Stage, StageKind, Store, child_runs

from .._agent import Agent
from ..evidence import Comparator, Edit, exact, verdict_of
from ._handup import HandUpError, Member, Team
from ._orchestrator import AgentOrchestrator

TeamMember = AgentOrchestrator | Agent
_NOT_SUSPECTS = {ItemKind.TOOL_CALL, ItemKind.ASSISTANT, ItemKind.USER, ItemKind.SETTINGS}


@dataclass
class StageTest:
    """One suspect stage, the edit that tested it, and what the final answer did under it."""

    run_id: str
    agent: str
    stage_id: str
    stage_kind: str
    stage_name: str
    item_hash: str
    item_kind: str
    text: str
    sent_in: str  # the run whose model saw the item (where the edit is made)
    edit: str  # "replaced by nothing" | "removed"
    verdict: str = "untested"
    changed: int = 0
    repeats: int = 0
    answers: list[str] = field(default_factory=list)  # the final answers under the edit
    fork_runs: list[str] = field(default_factory=list)  # the recorded re-runs, every level
    note: str | None = None
    finished_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return dict(self.__dict__)


@dataclass
class TeamBlameReport:
    """Which agent and stage made a team's answer what it is, with the counterfactual evidence."""

    run_id: str
    answer: str
    agents: dict[str, str]  # run id -> agent, every run of the team
    tested: list[StageTest]
    untested: list[StageTest] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def decisive(self) -> StageTest | None:
        """The earliest stage whose replaced output flips the final answer (None: no tested stage does)."""
        return next((t for t in self.tested if t.verdict == "flips"), None)

    @property
    def responsible_agent(self) -> str | None:
        """The agent whose run holds the decisive stage."""
        decisive = self.decisive
        return decisive.agent if decisive else None

    @property
    def downstream(self) -> list[StageTest]:
        """Tested stages after the decisive one that flip too: they carried its output on."""
        decisive = self.decisive
        if decisive is None:
            return []
        return [t for t in self.tested[self.tested.index(decisive) + 1:] if t.verdict == "flips"]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        decisive = self.decisive
        return {"run_id": self.run_id, "answer": self.answer, "responsible_agent": self.responsible_agent,
                "decisive_stage": decisive.stage_id if decisive else None, "agents": self.agents,
                "tested": [t.to_dict() for t in self.tested], "untested": [t.to_dict() for t in self.untested],
                "notes": self.notes}

    def summary(self) -> list[str]:
        """The report as lines a person reads."""
        lines = [f"team run {self.run_id}: {len(set(self.agents.values()))} agents, {len(self.agents)} runs",
                 f"answer: {self.answer[:100]}"]
        decisive = self.decisive
        if decisive is None:
            lines.append("no tested stage changes the answer when replaced: the fault is in a model's own reasoning,"
                         " or in context not tested (see notes)")
        else:
            lines.append(f"responsible agent: {decisive.agent}")
            lines.append(f"decisive stage: {decisive.stage_kind} {decisive.stage_name!r} ({decisive.stage_id}) of run "
                         f"{decisive.run_id}: {decisive.edit}, the answer changed in {decisive.changed} of "
                         f"{decisive.repeats} re-runs ({decisive.verdict})")
        for t in self.tested:
            lines.append(f"  {t.verdict:12} {t.agent:12} {t.stage_kind} {t.stage_name!r}: {t.text[:50]!r} {t.edit}")
        lines += [f"note: {n}" for n in self.notes]
        return lines


def _member(agent: TeamMember) -> tuple[str, Member]:
    if isinstance(agent, AgentOrchestrator):
        return agent.name, Member(agent.config.provider, list(agent.config.tools))
    return agent.name, Member(agent.provider, list(agent.tools.values()))


async def blame_team(
    store: Store,
    run: str,
    *,
    agents: Sequence[TeamMember] | Mapping[str, TeamMember],
    repeats: int = 3,
    comparator: Comparator | None = None,
    include_tool_definitions: bool = False,
    test_all: bool = False,
    recorder: Recorder | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> TeamBlameReport:
    """Name the agent and the stage of a team's run whose output decided its answer (see the module docstring).

    ``agents`` are the team's agents (their providers answer the re-runs; their tools serve calls
    the recording did not make). ``test_all`` also tests the stages after the decisive one.
    """
    store.flush()
    root_id = store.resolve_run_id(run)
    root = store.load_run(root_id)
    runs = {root_id: root, **child_runs(store, root)}
    members = dict(_member(a) for a in (agents.values() if isinstance(agents, Mapping) else agents))
    team = Team(store, runs, root_id, members, comparator or exact, recorder)
    report = TeamBlameReport(root_id, root.run.output or "", {r: d.run.agent for r, d in runs.items()}, [])
    progress = on_progress or (lambda _line: None)
    suspects = _suspects(runs, include_tool_definitions)
    for index, suspect in enumerate(suspects):
        if report.decisive is not None and not test_all:
            report.untested = suspects[index:]
            break
        await _test(team, suspect, repeats)
        progress(f"{suspect.agent} {suspect.stage_kind} {suspect.stage_name!r} {suspect.edit}: {suspect.verdict}")
        report.tested.append(suspect)
    missing = sorted({d.run.agent for d in runs.values() if d.inferences() and d.run.agent not in members})
    if missing:
        report.notes.append(f"no provider given for {', '.join(missing)}: their stages could not be re-run")
    return report


def _suspects(runs: dict[str, RunData], include_tool_definitions: bool) -> list[StageTest]:
    """The stages whose output a model of the team saw, earliest finished first (one test per item and run)."""
    out: list[StageTest] = []
    seen: set[tuple[str, str]] = set()
    for data in runs.values():
        for inference in data.inferences():
            for entry in data.snapshot(inference.id):
                item = data.items.get(entry.item_hash)
                origin = entry.origin
                if item is None or (data.run.id, entry.item_hash) in seen:
                    continue
                seen.add((data.run.id, entry.item_hash))
                if item.kind in _NOT_SUSPECTS or origin.stage_id is None or origin.run_id not in runs:
                    if not (include_tool_definitions and item.kind == ItemKind.TOOL_DEFINITION):
                        continue
                if origin.kind == OriginKind.CONFIG and origin.stage_id is None:
                    stage = inference  # a tool definition: blamed on the agent's config, tested at its first call
                else:
                    producer = _stage(runs, origin.run_id, origin.stage_id)
                    if producer is None:
                        continue
                    stage = producer
                owner = runs[origin.run_id] if origin.run_id in runs else data
                out.append(StageTest(
                    owner.run.id, owner.run.agent, stage.id, stage.kind, stage.name, entry.item_hash, item.kind,
                    item.text, data.run.id, "replaced by nothing" if item.kind == ItemKind.TOOL_RESULT else "removed",
                    finished_at=stage.ended_at or stage.started_at,
                ))
    out += _plan_steps(runs)
    out.sort(key=lambda t: (t.finished_at, t.stage_id))
    return out


#: the plan steps whose result is a tool's (no agent did them): tested by their result replaced by nothing
_TOOL_STEPS = ("tool_call", "loop")


def _plan_steps(runs: dict[str, RunData]) -> list[StageTest]:
    """The plan steps a plan's own tool did (not an agent): what they gave reached the models only
    through later steps and the plan's result, so each is a suspect of its own."""
    out = []
    for data in runs.values():
        agents_in = {s.parent_id for s in data.stages if s.kind == StageKind.SUBAGENT}
        for stage in data.stages:
            produced = data.outputs.get(stage.id)
            item = data.items.get(produced[-1]) if produced else None
            if (not produced or stage.kind != StageKind.PLAN_STEP or stage.id in agents_in or item is None
                    or stage.attributes.get("type") not in _TOOL_STEPS):
                continue
            out.append(StageTest(data.run.id, data.run.agent, stage.id, stage.kind, stage.name, produced[-1], item.kind,
                                 item.text, data.run.id, "replaced by nothing",
                                 finished_at=stage.ended_at or stage.started_at))
    return out


def _stage(runs: dict[str, RunData], run_id: str | None, stage_id: str | None) -> Stage | None:
    data = runs.get(run_id or "")
    if data is None or stage_id is None or not data.has_stage(stage_id):
        return None
    return data.stage(stage_id)


async def _test(team: Team, suspect: StageTest, repeats: int) -> None:
    """Re-run the run that saw the suspect with its output replaced, and carry each new answer to the top."""
    edit = Edit.returned_nothing(suspect.item_hash) if suspect.item_kind == ItemKind.TOOL_RESULT else \
        Edit.remove(suspect.item_hash)
    try:
        if suspect.stage_kind == StageKind.PLAN_STEP:  # the plan carried on without it, then its run re-run
            run = team.runs[suspect.sent_in]
            step = run.stage(suspect.stage_id)
            tool_stage, result = await team.carry_plan(run, step, suspect.fork_runs,
                                                       results={int(step.attributes.get("step", 0)): ""})
            edit = Edit.replace(team.tool_result(run, tool_stage), result)
        outcomes = await team.rerun(suspect.sent_in, edit, suspect.fork_runs, repeats)
    except HandUpError as exc:
        suspect.verdict, suspect.note = "inconclusive", str(exc)
        return
    original = team.runs[team.root_id].run.output or ""
    results: list[str] = []
    for outcome in outcomes:
        if outcome.result == "error":
            results.append("error")
            suspect.note = outcome.error
            continue
        try:
            final = await team.carry(suspect.sent_in, outcome.answer, suspect.fork_runs)
        except HandUpError as exc:
            results.append("error")
            suspect.note = str(exc)
            continue
        results.append("same" if team.same(original, final) else "changed")
        suspect.answers.append(final)
    suspect.verdict = verdict_of(results)
    suspect.changed, suspect.repeats = results.count("changed"), len(results)

"""Generated teams for tests and benchmarks: random trees of agents and tools, with a known answer to blame.

    spec = random_team(random.Random(7))
    lead, members = build_team(spec, recorder)
    context = await lead.execute("start")
    expected = influential(spec)      # (agent, tool stage name) of every stage the answer depends on

    plan = random_plan_team(random.Random(7))   # a lead executing a plan whose steps other agents do,
    team = await plan.build(recorder)           # one of them (the culprit) with a tool planted wrong
    context = await team.run()
    plan.carrying_steps()                       # the culprit's steps whose result reaches the answer

Each agent calls its children one per turn — a tool, or a sub-agent through :func:`agent_tool` —
then answers with the results of a random subset of them (``uses``). A stage's output therefore
decides the final answer exactly when every agent on its way up uses it: the ground truth
:func:`agent.orchestration.blame_team` is checked against. Every model is a FunctionModel: no
network, fully deterministic.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from tracer import Recorder, StageKind, Store, started_run

from ..providers import FunctionModel, ModelRequest, ModelResponse, calls
from ..tools import Tool
from ._config import AgentConfig, ExecutionContext
from ._orchestrator import AgentOrchestrator
from ._plan import PlanStep
from ._plan_runner import PlanRunner
from ._plan_store import PlanStore
from ._plan_tools import plan_tools
from ._subagent import agent_tool


@dataclass
class TeamSpec:
    """One agent of a generated team: its children (sub-agents or tool names) and which results it uses."""

    name: str
    children: list[TeamSpec | str] = field(default_factory=list)
    uses: set[int] = field(default_factory=set)


def random_team(rng: random.Random, *, max_depth: int = 2, max_children: int = 3) -> TeamSpec:
    """A random team: up to ``max_children`` children per agent, sub-agents down to ``max_depth``."""
    counter = itertools.count()

    def node(depth: int) -> TeamSpec:
        spec = TeamSpec(f"agent{next(counter)}")
        for _ in range(rng.randint(1, max_children if depth < max_depth else 2)):
            if depth < max_depth and rng.random() < 0.5:
                spec.children.append(node(depth + 1))
            else:
                spec.children.append(f"tool{next(counter)}")
        spec.uses = {i for i in range(len(spec.children)) if rng.random() < 0.6}
        return spec

    return node(0)


def _model(spec: TeamSpec) -> FunctionModel:
    def answer(request: ModelRequest) -> ModelResponse | str:
        last = max(i for i, ci in enumerate(request.context) if ci.item.kind == "user")
        results = [str(ci.item.body["content"]) for ci in request.context[last:] if ci.item.kind == "tool_result"]
        if len(results) < len(spec.children):
            child = spec.children[len(results)]
            return calls(("ask_" + child.name, {"task": "go"}) if isinstance(child, TeamSpec) else (child, {}))
        return f"{spec.name}[" + "|".join(results[i] for i in sorted(spec.uses)) + "]"

    return FunctionModel(answer, name=spec.name)


def build_team(spec: TeamSpec, recorder: Recorder | None) -> tuple[AgentOrchestrator, list[AgentOrchestrator]]:
    """The team's lead and every member (the lead last), all recording into ``recorder``."""
    members: list[AgentOrchestrator] = []

    def build(node: TeamSpec) -> AgentOrchestrator:
        tools = []
        for child in node.children:
            if isinstance(child, TeamSpec):
                tools.append(agent_tool(build(child)))
            else:
                tools.append(Tool(child, "a fact", {"type": "object", "properties": {}},
                                  lambda a, name=child: f"fact from {name}", durable=True))
        orchestrator = AgentOrchestrator(AgentConfig(name=node.name, system_prompt=f"You are {node.name}.",
                                                     model="generated", tools=tools, provider=_model(node),
                                                     recorder=recorder))
        members.append(orchestrator)
        return orchestrator

    lead = build(spec)
    return lead, members


def influential(spec: TeamSpec) -> set[tuple[str, str]]:
    """``(agent, tool stage name)`` of every tool stage whose result has a path of use to the lead's answer."""
    out: set[tuple[str, str]] = set()
    for i, child in enumerate(spec.children):
        if i not in spec.uses:
            continue
        out.add((spec.name, "ask_" + child.name if isinstance(child, TeamSpec) else child))
        if isinstance(child, TeamSpec):
            out |= influential(child)
    return out


def agents_of(spec: TeamSpec) -> Iterator[TeamSpec]:
    """Every agent of the team, the lead first."""
    yield spec
    for child in spec.children:
        if isinstance(child, TeamSpec):
            yield from agents_of(child)


def expected_decisive(spec: TeamSpec, tool_stages: list[tuple[float, str, str, str]]) -> tuple[str, str] | None:
    """From ``(ended_at, agent, stage name, stage id)`` of the recorded tool stages: the ``(agent, stage id)``
    blame must name — the earliest stage with a path of use to the answer (None: no stage has one)."""
    wanted = influential(spec)
    found = min((t for t in tool_stages if (t[1], t[2]) in wanted), default=None)
    return None if found is None else (found[1], found[3])


PLANTED = "WRONG"


@dataclass
class PlanAgent:
    """An agent of a generated plan team: it calls its lookup tool, then answers with its task and/or the fact
    (``uses_task``, ``uses_fact``)."""

    name: str
    uses_task: bool
    uses_fact: bool


@dataclass
class PlanTeamSpec:
    """A lead that executes one plan; each step is an agent's (a tool call or the decider's decision)."""

    agents: list[PlanAgent]
    culprit: str  # the agent whose lookup tool returns the planted fact
    steps: list[PlanStep]
    step_agent: dict[int, str]  # step id -> the agent that does it (the decider for llm_decision steps)
    decider: str
    answer_uses: list[int]  # the steps whose results the lead's answer quotes

    def agent(self, name: str) -> PlanAgent:
        """The agent named ``name``."""
        return next(a for a in self.agents if a.name == name)

    def carrying_steps(self) -> set[int]:
        """The steps of the culprit whose fact reaches the answer (through their result, then later steps)."""
        used_by: dict[int, set[int]] = {s.id: set() for s in self.steps}
        for step in self.steps:
            doer = self.step_agent.get(step.id)
            if doer is not None and self.agent(doer).uses_task:
                for d in step.depends_on:
                    used_by[d].add(step.id)
        reaches: dict[int, bool] = {}
        for step in reversed(self.steps):
            reaches[step.id] = step.id in self.answer_uses or any(reaches[u] for u in used_by[step.id])
        return {s for s, r in reaches.items() if r and self.step_agent.get(s) == self.culprit
                and self.agent(self.culprit).uses_fact}

    def culprit_stages(self, store: Store, lead_run: str) -> dict[str, int]:
        """The culprit's tool stages in the recorded team run ``lead_run``, each with the plan step its run did."""
        lead = store.load_run(lead_run)
        step_of = {s.id: int(s.attributes["step"]) for s in lead.stages if s.kind == StageKind.PLAN_STEP}
        out: dict[str, int] = {}
        for sub in lead.stages:
            child = started_run(sub)
            if child is None or sub.attributes.get("agent") != self.culprit:
                continue
            out.update({s.id: step_of[sub.parent_id or ""] for s in store.load_run(child).stages
                        if s.kind == StageKind.TOOL})
        return out

    async def build(self, recorder: Recorder | None) -> PlanTeam:
        """The team's agents recording into ``recorder``, and the plan made (not yet run)."""
        def model(agent: PlanAgent) -> FunctionModel:
            def answer(request: ModelRequest) -> ModelResponse | str:
                last = max(i for i, ci in enumerate(request.context) if ci.item.kind == "user")
                task = request.context[last].item.text
                results = [str(ci.item.body["content"]) for ci in request.context[last:]
                           if ci.item.kind == "tool_result"]
                if not results:
                    return calls((f"lookup_{agent.name}", {}))
                used = [task] * agent.uses_task + [results[0]] * agent.uses_fact
                return f"{agent.name}<{' / '.join(used)}>"

            return FunctionModel(answer, name=agent.name)

        members: dict[str, AgentOrchestrator] = {}
        for agent in self.agents:
            fact = f"{PLANTED} fact of {agent.name}" if agent.name == self.culprit else f"fact of {agent.name}"
            lookup = Tool(f"lookup_{agent.name}", "Look up a fact", {"type": "object", "properties": {}},
                          lambda a, fact=fact: fact, durable=True)
            members[agent.name] = AgentOrchestrator(AgentConfig(
                name=agent.name, system_prompt=f"You are {agent.name}.", model="generated", tools=[lookup],
                provider=model(agent), recorder=recorder))
        plans = PlanStore()
        runner = PlanRunner(plans, tools=[agent_tool(m) for m in members.values()], decider=members[self.decider])
        uses = self.answer_uses

        def lead_answer(request: ModelRequest) -> ModelResponse | str:
            last = max(i for i, ci in enumerate(request.context) if ci.item.kind == "user")
            results = [str(ci.item.body["content"]) for ci in request.context[last:] if ci.item.kind == "tool_result"]
            if not results:
                return calls(("execute_plan", {"plan_id": request.context[last].item.text.split()[-1]}))
            if not results[0]:
                return "lead: the plan gave nothing"
            by_id = {s["id"]: s["result"] for s in json.loads(results[0])["steps"]}
            return "lead: " + " + ".join(str(by_id[u]) for u in uses)

        lead = AgentOrchestrator(AgentConfig(name="lead", system_prompt="You are the lead.", model="generated",
                                             tools=plan_tools(runner), provider=FunctionModel(lead_answer, name="lead"),
                                             recorder=recorder))
        plan = await plans.create("generated", "find out", [PlanStep(**vars(s)) for s in self.steps])
        return PlanTeam(lead, [lead, *members.values()], plan.id)


@dataclass
class PlanTeam:
    """A generated plan team, built: its lead, every agent (the lead first) and the plan to run."""

    lead: AgentOrchestrator
    members: list[AgentOrchestrator]
    plan_id: str

    async def run(self) -> ExecutionContext:
        """The lead executes the plan and answers."""
        return await self.lead.execute(f"run plan {self.plan_id}")


def random_plan_team(rng: random.Random, *, max_agents: int = 4, max_steps: int = 6) -> PlanTeamSpec:
    """A random plan team whose culprit's fact reaches the answer through at least one step."""
    while True:
        # only the culprit answers with its fact: the others call their tools and leave the result out
        agents = [PlanAgent(f"agent{i}", rng.random() < 0.7, False) for i in range(1, rng.randint(2, max_agents) + 1)]
        culprit = rng.choice(agents)
        culprit.uses_fact = True
        decider = rng.choice(agents).name
        steps: list[PlanStep] = []
        step_agent: dict[int, str] = {}
        for number in range(1, rng.randint(2, max_steps) + 1):
            earlier = [s.id for s in steps if s.id in step_agent]
            deps = sorted(rng.sample(earlier, rng.randint(0, min(2, len(earlier))))) if earlier else []
            kind = rng.random()
            if kind < 0.15 and earlier:  # a condition that holds: every answer is non-empty
                steps.append(PlanStep(number, f"check {number}", type="condition",
                                      config={"step": earlier[-1], "not_empty": True}, depends_on=[earlier[-1]]))
                continue
            if kind < 0.35:
                step_agent[number] = decider
                steps.append(PlanStep(number, f"decide {number}", type="llm_decision", depends_on=deps))
                continue
            doer = rng.choice(agents).name
            step_agent[number] = doer
            task = " ".join([f"task {number}", *(f"{{{{step.{d}}}}}" for d in deps)])
            steps.append(PlanStep(number, f"step {number}", tool_name=f"ask_{doer}", tool_args={"task": task},
                                  depends_on=deps))
        done = [s.id for s in steps if s.id in step_agent]
        spec = PlanTeamSpec(agents, culprit.name, steps, step_agent, decider,
                            sorted(rng.sample(done, rng.randint(1, len(done)))))
        if spec.carrying_steps():
            return spec


__all__ = [
    "PLANTED",
    "PlanAgent",
    "PlanTeam",
    "PlanTeamSpec",
    "TeamSpec",
    "agents_of",
    "build_team",
    "expected_decisive",
    "influential",
    "random_plan_team",
    "random_team",
]

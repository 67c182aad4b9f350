"""Generated teams for tests and benchmarks: random trees of agents and tools, with a known answer to blame.

    spec = random_team(random.Random(7))
    lead, members = build_team(spec, recorder)
    context = await lead.execute("start")
    expected = influential(spec)      # (agent, tool stage name) of every stage the answer depends on

Each agent calls its children one per turn — a tool, or a sub-agent through :func:`agent_tool` —
then answers with the results of a random subset of them (``uses``). A stage's output therefore
decides the final answer exactly when every agent on its way up uses it: the ground truth
:func:`agent.orchestration.blame_team` is checked against. Every model is a FunctionModel: no
network, fully deterministic.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from tracer import Recorder

from ..providers import FunctionModel, ModelRequest, ModelResponse, calls
from ..tools import Tool
from ._config import AgentConfig
from ._orchestrator import AgentOrchestrator
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


__all__ = ["TeamSpec", "agents_of", "build_team", "expected_decisive", "influential", "random_team"]

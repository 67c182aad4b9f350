"""Generated teams: random trees of agents and tools, each model using a random part of what it is
given. Blame must name the earliest stage that has a path of use to the final answer — and its agent."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent import Tool
from agent.orchestration import AgentConfig, AgentOrchestrator, agent_tool, blame_team
from agent.providers import FunctionModel, ModelRequest, ModelResponse, calls
from tracer import Recorder, Store


@dataclass
class Node:
    name: str
    children: list[Any] = field(default_factory=list)  # Node (a sub-agent) or str (a tool's name)
    uses: set[int] = field(default_factory=set)  # which children's results the model's answer uses


@st.composite
def teams(draw: Any, depth: int = 0, counter: Any = None) -> Node:
    counter = counter if counter is not None else itertools.count()
    node = Node(f"agent{next(counter)}")
    for _ in range(draw(st.integers(1, 3 if depth < 2 else 2))):
        if depth < 2 and draw(st.booleans()):
            node.children.append(draw(teams(depth + 1, counter)))
        else:
            node.children.append(f"tool{next(counter)}")
    node.uses = set(draw(st.sets(st.integers(0, len(node.children) - 1))))
    return node


def model_of(node: Node) -> Any:
    def answer(request: ModelRequest) -> ModelResponse | str:
        last = max(i for i, ci in enumerate(request.context) if ci.item.kind == "user")
        results = [ci.item.body["content"] for ci in request.context[last:] if ci.item.kind == "tool_result"]
        if len(results) < len(node.children):
            child = node.children[len(results)]
            return calls(("ask_" + child.name, {"task": "go"}) if isinstance(child, Node) else (child, {}))
        return f"{node.name}[" + "|".join(results[i] for i in sorted(node.uses)) + "]"

    return answer


def build(node: Node, recorder: Recorder, members: list[AgentOrchestrator]) -> AgentOrchestrator:
    tools = []
    for child in node.children:
        if isinstance(child, Node):
            tools.append(agent_tool(build(child, recorder, members)))
        else:
            tools.append(Tool(child, "a fact", {"type": "object", "properties": {}},
                              lambda a, name=child: f"fact from {name}", durable=True))
    orchestrator = AgentOrchestrator(AgentConfig(name=node.name, system_prompt="p", model="m", tools=tools,
                                                 provider=FunctionModel(model_of(node)), recorder=recorder))
    members.append(orchestrator)
    return orchestrator


def influential(node: Node) -> set[tuple[str, str]]:
    """(agent, tool stage name) of every tool stage whose result has a path of use to the root's answer."""
    out: set[tuple[str, str]] = set()
    for i, child in enumerate(node.children):
        if i not in node.uses:
            continue
        out.add((node.name, "ask_" + child.name if isinstance(child, Node) else child))
        if isinstance(child, Node):
            out |= influential(child)
    return out


@settings(max_examples=12, deadline=None)
@given(teams())
def test_blame_names_the_earliest_stage_with_a_path_to_the_answer(root: Node) -> None:
    async def go() -> None:
        with Store.open(":memory:") as store:
            recorder = Recorder(store)
            members: list[AgentOrchestrator] = []
            lead = build(root, recorder, members)
            context = await lead.execute("start")
            assert context.status == "completed"
            report = await blame_team(store, context.run_id or "", agents=members, repeats=1)
            store.flush()
            expected = influential(root)
            tool_stages = [(s.ended_at, data.run.agent, s.name, s.id)
                           for data in (store.load_run(r) for r in report.agents)
                           if not data.run.forked_from_run for s in data.stages if s.kind == "tool"]
            wanted = min((t for t in tool_stages if (t[1], t[2]) in expected), default=None)
            if wanted is None:
                assert report.decisive is None, report.summary()
                return
            assert report.decisive is not None, report.summary()
            assert (report.responsible_agent, report.decisive.stage_id) == (wanted[1], wanted[3]), report.summary()
            assert all(t.verdict == "holds" for t in report.tested[:-1]), report.summary()

    asyncio.run(go())

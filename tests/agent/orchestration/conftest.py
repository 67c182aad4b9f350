"""Shared pieces of the orchestration tests: a store, and the three-agent team of the blame scenario.

The team: a lead agent that hands the question to a researcher (who has a search tool) and the
notes to a writer, then answers with the writer's report. Every model is a FunctionModel that reads
its context, so a changed tool result changes every answer downstream of it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agent import Tool
from agent.orchestration import (
    AgentConfig,
    AgentOrchestrator,
    ExecutionContext,
    PlanRunner,
    PlanStep,
    PlanStore,
    agent_tool,
    plan_tools,
)
from agent.providers import FunctionModel, ModelRequest, ModelResponse, calls
from tracer import Recorder

QUESTION = "How tall is the Eiffel Tower?"
WRONG_FACT = "The Eiffel Tower is 450 m tall."



def _turn(request: ModelRequest) -> tuple[str, list[dict[str, Any]]]:
    """The last user message and the tool results after it."""
    last = max(i for i, ci in enumerate(request.context) if ci.item.kind == "user")
    results = [dict(ci.item.body) for ci in request.context[last:] if ci.item.kind == "tool_result"]
    return request.context[last].item.text, results


def researcher_model(request: ModelRequest) -> ModelResponse | str:
    task, results = _turn(request)
    if not results:
        return calls(("search", {"query": task}))
    return f"Notes: {results[-1]['content']}"


def writer_model(request: ModelRequest) -> str:
    task, _ = _turn(request)
    return f"Report. {task.removeprefix('Write up: ')}"


def lead_model(request: ModelRequest) -> ModelResponse | str:
    question, results = _turn(request)
    if not results:
        return calls(("ask_researcher", {"task": question}))
    if len(results) == 1:
        return calls(("ask_writer", {"task": f"Write up: {results[0]['content']}"}))
    return results[-1]["content"]


@dataclass
class TeamOfThree:
    lead: AgentOrchestrator
    researcher: AgentOrchestrator
    writer: AgentOrchestrator
    search_calls: list[str]

    @property
    def all(self) -> list[AgentOrchestrator]:
        return [self.lead, self.researcher, self.writer]


def team_of_three(recorder: Recorder | None, *, fact: str = WRONG_FACT, session_id: str = "team-1") -> TeamOfThree:
    searched: list[str] = []

    def search(arguments: dict[str, Any]) -> str:
        searched.append(arguments["query"])
        return fact

    search_tool = Tool("search", "Search the web", {"type": "object", "properties": {"query": {"type": "string"}},
                                                    "required": ["query"]}, search, durable=True)

    def config(name: str, fn: Any, tools: list[Tool]) -> AgentConfig:
        return AgentConfig(name=name, system_prompt=f"You are the {name}.", provider=FunctionModel(fn, name=name),
                           model="test-model", tools=tools, recorder=recorder, session_id=session_id)

    researcher = AgentOrchestrator(config("researcher", researcher_model, [search_tool]))
    writer = AgentOrchestrator(config("writer", writer_model, []))
    lead = AgentOrchestrator(config("lead", lead_model, [agent_tool(researcher), agent_tool(writer)]))
    return TeamOfThree(lead, researcher, writer, searched)


def plan_lead_model(request: ModelRequest) -> ModelResponse | str:
    """Runs the plan its question names, then answers with the result of the plan's last step."""
    question, results = _turn(request)
    if not results:
        return calls(("execute_plan", {"plan_id": question.split()[-1]}))
    if not results[-1]["content"]:
        return "Answer: the plan gave nothing."
    details = json.loads(results[-1]["content"])
    return f"Answer: {details['steps'][-1]['result']}"


def editor_model(request: ModelRequest) -> str:
    task, _ = _turn(request)
    return "Checked. " + task.rsplit("- step 2: ", 1)[-1]


@dataclass
class PlanTeam:
    lead: AgentOrchestrator
    researcher: AgentOrchestrator
    writer: AgentOrchestrator
    editor: AgentOrchestrator
    plans: PlanStore

    @property
    def all(self) -> list[AgentOrchestrator]:
        return [self.lead, self.researcher, self.writer, self.editor]

    async def run(self, question: str = QUESTION) -> ExecutionContext:
        """Make the three-step plan and have the lead execute it: researcher, then writer, then editor."""
        plan = await self.plans.create("answer", question, [
            PlanStep(1, "research", tool_name="ask_researcher", tool_args={"task": question}),
            PlanStep(2, "write", tool_name="ask_writer", tool_args={"task": "Write up: {{step.1}}"}, depends_on=[1]),
            PlanStep(3, "check", type="llm_decision", depends_on=[2]),
        ])
        return await self.lead.execute(f"Run plan {plan.id}")


def plan_team(recorder: Recorder | None, *, fact: str = WRONG_FACT) -> PlanTeam:
    """The team of three working through a plan the lead executes: each step is done by another agent."""
    three = team_of_three(recorder, fact=fact)
    editor = AgentOrchestrator(AgentConfig(name="editor", system_prompt="You are the editor.", model="test-model",
                                           provider=FunctionModel(editor_model, name="editor"), recorder=recorder,
                                           session_id="team-1"))
    plans = PlanStore()
    runner = PlanRunner(plans, tools=[agent_tool(three.researcher), agent_tool(three.writer)], decider=editor)
    lead = AgentOrchestrator(AgentConfig(name="lead", system_prompt="You are the lead.", model="test-model",
                                         provider=FunctionModel(plan_lead_model, name="lead"), recorder=recorder,
                                         tools=plan_tools(runner), session_id="team-1"))
    return PlanTeam(lead, three.researcher, three.writer, editor, plans)

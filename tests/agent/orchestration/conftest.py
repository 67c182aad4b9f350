"""Shared pieces of the orchestration tests: a store, and the three-agent team of the blame scenario.

The team: a lead agent that hands the question to a researcher (who has a search tool) and the
notes to a writer, then answers with the writer's report. Every model is a FunctionModel that reads
its context, so a changed tool result changes every answer downstream of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent import Tool
from agent.orchestration import AgentConfig, AgentOrchestrator, agent_tool
from agent.providers import FunctionModel, ModelRequest, ModelResponse, calls
from tracer import Recorder, Store

QUESTION = "How tall is the Eiffel Tower?"
WRONG_FACT = "The Eiffel Tower is 450 m tall."


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path / "team.duckdb") as opened:
        yield opened


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

"""Agents as tools of other agents: the common shape of a team in practice.

    writer_tool = agent_tool(writer)                 # a Tool named ask_writer
    lead = AgentOrchestrator(AgentConfig(..., tools=[agent_tool(researcher), writer_tool]))

A call runs the sub-agent on the ``task`` the model wrote and returns the sub-agent's response as
the tool's result (a failed or cancelled sub-agent is an error result the model sees). When the
calling run is recorded, the call's tool stage holds a ``subagent`` stage and the sub-agent's run
is its child (see :mod:`agent.orchestration._lineage`).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from tracer import ContextItem, ItemKind

from .._batch import running_tool
from ..errors import ToolError
from ..tools import Tool
from ._config import ExecutionContext
from ._lineage import ChildLink, close_subagent_stage, open_subagent_stage
from ._orchestrator import AgentOrchestrator


class SubAgentError(ToolError):
    """The sub-agent failed or was cancelled; the calling model sees why."""


def agent_tool(
    orchestrator: AgentOrchestrator, *, name: str | None = None, description: str | None = None,
) -> Tool:
    """A tool that hands a task to ``orchestrator`` and returns its response.

    Durable (safe to run again on a re-run with new arguments) when every tool of the sub-agent is.
    """
    tool_name = name or "ask_" + re.sub(r"[^A-Za-z0-9_\-]", "_", orchestrator.name)[:60]
    about = description or orchestrator.config.description or f"Hand a task to the {orchestrator.name} agent"

    async def execute(arguments: dict[str, Any]) -> str:
        execution = await run_subagent(orchestrator, str(arguments["task"]))
        if execution.status != "completed":
            raise SubAgentError(f"agent {orchestrator.name} {execution.status}: {execution.error or 'no response'}")
        return execution.response

    return Tool(
        tool_name, about,
        {"type": "object", "properties": {"task": {"type": "string", "description": "What the agent should do"}},
         "required": ["task"]},
        execute, durable=all(t.durable for t in orchestrator.config.tools), timeout=None,
    )


async def run_subagent(
    orchestrator: AgentOrchestrator, task: str, *, handed: list[ContextItem] | None = None,
) -> ExecutionContext:
    """Run ``orchestrator`` on ``task`` as the child of the tool call running now (if any is recorded).

    ``handed`` are context items given to the sub-agent before the task (shared context), each with
    its origin.
    """
    running = running_tool()
    history = list(handed or ())
    if running is None or not running[0].run.recorder.enabled:
        return await orchestrator.execute(task, history)
    tool_stage, call_item = running
    run = tool_stage.run
    stage = open_subagent_stage(run, orchestrator.name, after=[tool_stage], parent=tool_stage,
                                handed=[call_item, *history], attributes={})
    try:
        execution = await orchestrator.execute(task, history, link=ChildLink(run.id, stage.id, run.agent))
    except BaseException as exc:  # a KeyboardInterrupt too: the stage the child run names must exist
        cancelled = isinstance(exc, asyncio.CancelledError)
        stage.close("cancelled" if cancelled else "error", f"{type(exc).__name__}: {exc}")
        raise
    answered = close_subagent_stage(stage, child_run=execution.run_id, answer=final_answer(execution),
                                    status=execution.status, error=execution.error)
    if answered is not None:
        tool_stage.inputs([answered])
    return execution


def final_answer(execution: ExecutionContext) -> ContextItem | None:
    """The execution's answer as the context item its run recorded (its origin: the child's inference)."""
    if execution.status != "completed":
        return None
    for ci in reversed(execution.messages):
        if ci.item.kind == ItemKind.ASSISTANT:
            return ci
    return None

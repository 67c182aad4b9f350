"""Orchestration: orchestrated agents, their builder, teams, sub-agents and plans.

:class:`AgentOrchestrator` runs an :class:`agent.Agent` through an execution context with events,
streamed steps and cancellation; :func:`create_agent` builds one fluently; a
:class:`MultiAgentOrchestrator` routes messages within teams; :func:`agent_tool` makes an agent a
tool of another. Every hand-over between agents is recorded: the child run hangs off the
``subagent`` stage that started it, so `why`, ``footprint show`` and :func:`blame_team` cross the
agent boundaries.

Each name is imported from its module when first used (tracer._lazy), so ``footprint blame-team --help``
loads neither the agent loop nor the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracer._lazy import lazy_exports

if TYPE_CHECKING:
    from ._blame import StageTest, TeamBlameReport, blame_team
    from ._builder import AgentBuilder, create_agent
    from ._config import AgentConfig, AgentStep, ExecutionContext, MemoryOptions, ToolCallRecord
    from ._lineage import ChildLink, LinkedRecorder
    from ._orchestrator import AgentOrchestrator, OrchestratorEvent
    from ._plan import Plan, PlanStep, check_acyclic, parse_plan, planning_prompt
    from ._plan_runner import PlanRunner, check_runnable
    from ._plan_store import PlanStore
    from ._plan_tools import plan_tools
    from ._subagent import SubAgentError, agent_tool, run_subagent
    from ._team import MultiAgentOrchestrator, Router, Team
    from .errors import (
        AgentConfigError,
        OrchestrationError,
        PlanDeadlockError,
        PlanError,
        PlanNotFoundError,
        PlanParseError,
        TeamError,
    )

#: each public name and the module that defines it, imported when the name is first used
_EXPORTS: dict[str, str] = {
    "AgentBuilder": "._builder",
    "AgentConfig": "._config",
    "AgentConfigError": ".errors",
    "AgentOrchestrator": "._orchestrator",
    "AgentStep": "._config",
    "ChildLink": "._lineage",
    "ExecutionContext": "._config",
    "LinkedRecorder": "._lineage",
    "MemoryOptions": "._config",
    "MultiAgentOrchestrator": "._team",
    "OrchestrationError": ".errors",
    "OrchestratorEvent": "._orchestrator",
    "Plan": "._plan",
    "PlanDeadlockError": ".errors",
    "PlanError": ".errors",
    "PlanNotFoundError": ".errors",
    "PlanParseError": ".errors",
    "PlanRunner": "._plan_runner",
    "PlanStep": "._plan",
    "PlanStore": "._plan_store",
    "Router": "._team",
    "StageTest": "._blame",
    "SubAgentError": "._subagent",
    "Team": "._team",
    "TeamBlameReport": "._blame",
    "TeamError": ".errors",
    "ToolCallRecord": "._config",
    "agent_tool": "._subagent",
    "blame_team": "._blame",
    "check_acyclic": "._plan",
    "check_runnable": "._plan_runner",
    "create_agent": "._builder",
    "parse_plan": "._plan",
    "plan_tools": "._plan_tools",
    "planning_prompt": "._plan",
    "run_subagent": "._subagent",
}

__all__ = [
    "AgentBuilder",
    "AgentConfig",
    "AgentConfigError",
    "AgentOrchestrator",
    "AgentStep",
    "ChildLink",
    "ExecutionContext",
    "LinkedRecorder",
    "MemoryOptions",
    "MultiAgentOrchestrator",
    "OrchestrationError",
    "OrchestratorEvent",
    "Plan",
    "PlanDeadlockError",
    "PlanError",
    "PlanNotFoundError",
    "PlanParseError",
    "PlanRunner",
    "PlanStep",
    "PlanStore",
    "Router",
    "StageTest",
    "SubAgentError",
    "Team",
    "TeamBlameReport",
    "TeamError",
    "ToolCallRecord",
    "agent_tool",
    "blame_team",
    "check_acyclic",
    "check_runnable",
    "create_agent",
    "parse_plan",
    "plan_tools",
    "planning_prompt",
    "run_subagent",
]

if not TYPE_CHECKING:  # (mypy reads the imports above; a module __getattr__ would let any name through)
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

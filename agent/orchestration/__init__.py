"""Orchestration: orchestrated agents, their builder, teams, sub-agents and plans.

:class:`AgentOrchestrator` runs an :class:`agent.Agent` through an execution context with events,
streamed steps and cancellation; :func:`create_agent` builds one fluently; a
:class:`MultiAgentOrchestrator` routes messages within teams; :func:`agent_tool` makes an agent a
tool of another. Every hand-over between agents is recorded: the child run hangs off the
``subagent`` stage that started it, so `why`, ``footprint show`` and :func:`blame_team` cross the
agent boundaries.
"""

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

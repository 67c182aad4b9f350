"""Orchestration: orchestrated agents, their builder, teams, sub-agents and plans.

:class:`AgentOrchestrator` runs an :class:`agent.Agent` through an execution context with events,
streamed steps and cancellation; :func:`create_agent` builds one fluently; a
:class:`MultiAgentOrchestrator` routes messages within teams; :func:`agent_tool` makes an agent a
tool of another. Every hand-over between agents is recorded: the child run hangs off the
``subagent`` stage that started it, so `why`, ``footprint show`` and :func:`blame_team` cross the
agent boundaries.
"""

from ._builder import AgentBuilder, create_agent
from ._config import AgentConfig, AgentStep, ExecutionContext, MemoryOptions, ToolCallRecord
from ._lineage import ChildLink, LinkedRecorder
from ._orchestrator import AgentOrchestrator, OrchestratorEvent
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
    "PlanDeadlockError",
    "PlanError",
    "PlanNotFoundError",
    "PlanParseError",
    "Router",
    "SubAgentError",
    "Team",
    "TeamError",
    "ToolCallRecord",
    "agent_tool",
    "create_agent",
    "run_subagent",
]

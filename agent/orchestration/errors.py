"""Errors of orchestration: agent configs, teams and plans.

    FootprintError (tracer.errors)
    └── AgentError (agent.errors)
        └── OrchestrationError
            ├── AgentConfigError       a config or builder is missing a part, or names an unknown setting
            ├── TeamError              an unknown team, or a router that named no agent of its team
            └── PlanError              a plan cannot be made, found or run
                ├── PlanParseError     a model's plan is malformed (the message says what and where)
                ├── PlanNotFoundError  no plan with that id in the session
                └── PlanDeadlockError  steps wait on each other (a cycle) or on a step that does not exist

``AgentConfigError`` is also a :class:`agent.errors.UserError`: it is misuse, fixed in code.
"""

from __future__ import annotations

from ..errors import AgentError, UserError


class OrchestrationError(AgentError):
    """An error of an orchestrator, a team or a plan."""


class AgentConfigError(OrchestrationError, UserError):
    """An agent config (or its builder) lacks a part it needs or names a setting that does not exist."""


class TeamError(OrchestrationError):
    """A team was not found, or its router named an agent the team does not have."""


class PlanError(OrchestrationError):
    """A plan could not be made, found or run."""


class PlanParseError(PlanError):
    """The text given as a plan is not a well-formed plan; the message names what is wrong and where."""


class PlanNotFoundError(PlanError):
    """No plan with this id is stored in the session."""


class PlanDeadlockError(PlanError):
    """The plan's pending steps can never run: they wait on each other or on a step the plan lacks."""

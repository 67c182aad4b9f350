"""MultiAgentOrchestrator: teams of agents, each request routed to the agent its team's router names.

    team = Team("support", agents=[billing, tech], router=lambda message, context: "billing"
                if "invoice" in message else "tech", shared_context={"product": "footprint"})
    teams = MultiAgentOrchestrator(recorder=recorder)
    teams.register_team(team)
    context = await teams.execute("Where is my invoice?")     # the default team: the first registered

A recorded team execution is a run of its own (agent: the team's name): an input stage that holds
the message and the shared context (one ``memory`` item per key, with its origin), a ``subagent``
stage for the routed agent whose run is its child, and the answer. The routed agent receives the
shared context as context items whose origins point at that input stage.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracer import (
    ContextItem,
    Item,
    ItemKind,
    NullRecorder,
    Origin,
    OriginKind,
    Recorder,
    RunStatus,
    StageKind,
    canonical_json,
)

from ._config import ExecutionContext
from ._lineage import ChildLink, close_subagent_stage, open_subagent_stage
from ._orchestrator import AgentOrchestrator
from ._subagent import final_answer
from .errors import TeamError

#: router(message, merged context) -> the name of the agent that handles the message (may be async)
Router = Callable[[str, dict[str, Any]], str | Awaitable[str]]


@dataclass
class Team:
    """Agents under one router, and the context every one of them is given."""

    name: str
    agents: Mapping[str, AgentOrchestrator] | Sequence[AgentOrchestrator]
    router: Router
    shared_context: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name:
            raise TeamError("a team needs a name")
        if not isinstance(self.agents, Mapping):
            by_name: dict[str, AgentOrchestrator] = {}
            for agent in self.agents:
                if agent.name in by_name:
                    raise TeamError(f"team {self.name}: two agents named {agent.name}")
                by_name[agent.name] = agent
            self.agents = by_name
        if not self.agents:
            raise TeamError(f"team {self.name} has no agents")

    @property
    def members(self) -> dict[str, AgentOrchestrator]:
        """The agents by name."""
        assert isinstance(self.agents, dict)
        return self.agents


def shared_items(context: Mapping[str, Any], stage_output: Callable[[Item, str], ContextItem] | None,
                 source: str) -> list[ContextItem]:
    """One ``memory`` item per context key (``key: value``), each with the origin ``stage_output`` gives it."""
    out = []
    for key, value in context.items():
        text = value if isinstance(value, str) else canonical_json(value)
        item = Item(ItemKind.MEMORY, {"text": f"{key}: {text}", "key": f"{source}.{key}"})
        if stage_output is not None:
            out.append(stage_output(item, f"{source}.{key}"))
        else:
            out.append(ContextItem(item, Origin(OriginKind.USER, source=f"{source}.{key}")))
    return out


class MultiAgentOrchestrator:
    """Teams of orchestrated agents; :meth:`execute` routes a message to one agent of a team."""

    def __init__(self, *, recorder: Recorder | None = None, session_id: str | None = None) -> None:
        self._teams: dict[str, Team] = {}
        self._default: str | None = None
        self.recorder: Recorder = recorder if recorder is not None else NullRecorder()
        self.session_id = session_id

    def register_team(self, team: Team) -> None:
        """Add (or replace) a team; the first one registered is the default."""
        self._teams[team.name] = team
        if self._default is None:
            self._default = team.name

    def set_default_team(self, name: str) -> None:
        """The team :meth:`execute` uses when none is named."""
        self.team(name)
        self._default = name

    def teams(self) -> list[str]:
        """The team names, in registration order."""
        return list(self._teams)

    def agents(self, team: str) -> list[str]:
        """The agent names of ``team``."""
        return list(self.team(team).members)

    def team(self, name: str | None = None) -> Team:
        """The team ``name`` (the default without one); a :class:`TeamError` lists the teams there are."""
        chosen = name or self._default
        if chosen is None:
            raise TeamError("no team is registered; register_team() first")
        found = self._teams.get(chosen)
        if found is None:
            raise TeamError(f"no team named {chosen!r}; the teams: {', '.join(self._teams) or 'none'}")
        return found

    async def route(self, team: Team, message: str, context: dict[str, Any]) -> AgentOrchestrator:
        """The agent the team's router names for ``message``; an unknown name is a :class:`TeamError`."""
        try:
            chosen = team.router(message, context)
            if inspect.isawaitable(chosen):
                chosen = await chosen
        except Exception as exc:
            raise TeamError(f"the router of team {team.name} failed: {type(exc).__name__}: {exc}") from exc
        agent = team.members.get(chosen) if isinstance(chosen, str) else None
        if agent is None:
            raise TeamError(f"the router of team {team.name} named agent {chosen!r}, which the team does not have; "
                            f"its agents: {', '.join(team.members)}")
        return agent

    async def execute(
        self, message: str, team: str | None = None, context: dict[str, Any] | None = None,
    ) -> ExecutionContext:
        """Route ``message`` within ``team`` (the default without one) and run the agent the router names.

        The router sees the team's shared context merged with ``context``; the agent is given both.
        Returns the agent's execution context (``metadata`` names the team, and ``team_run`` when
        recorded). A router failure or an unknown agent is a :class:`TeamError` (recorded as a failed
        team run when recording).
        """
        chosen_team = self.team(team)
        merged = {**chosen_team.shared_context, **(context or {})}
        if not self.recorder.enabled:
            agent = await self.route(chosen_team, message, merged)
            execution = await agent.execute(message, shared_items(merged, None, "shared"))
            execution.metadata.update(team=chosen_team.name)
            return execution
        return await self._recorded(chosen_team, message, merged)

    async def _recorded(self, team: Team, message: str, merged: dict[str, Any]) -> ExecutionContext:
        run = self.recorder.start_run(agent=team.name, input=message, session_id=self.session_id,
                                      labels=("team",), attributes={"team": team.name})
        with run.stage(StageKind.INPUT, "user message") as input_stage:
            question = input_stage.output(Item.of_text(ItemKind.USER, message), origin_kind=OriginKind.USER,
                                          source="input")
            shared = shared_items(
                merged, lambda item, source: input_stage.output(item, origin_kind=OriginKind.CONFIG, source=source),
                "shared")
        try:
            agent = await self.route(team, message, merged)
        except BaseException as exc:  # a cancel or an interrupt while the router runs ends the team run too
            if isinstance(exc, TeamError):
                status, reason, error = RunStatus.FAILED, "router", str(exc)
            elif isinstance(exc, asyncio.CancelledError):
                status, reason = RunStatus.CANCELLED, "cancelled"
                error = f"team {team.name} was cancelled while its router ran"
            else:
                status, reason = RunStatus.FAILED, "interrupted"
                error = f"the router of team {team.name} was interrupted: {type(exc).__name__}: {exc}"
            with run.stage(StageKind.ERROR, "router", after=[input_stage], attributes={"reason": reason}) as err:
                err.output(Item.of_text(ItemKind.TEXT, error))
            run.end(status, error=error, attributes={"stop_reason": reason})
            raise
        stage = open_subagent_stage(run, agent.name, after=[input_stage], parent=None, handed=[question, *shared],
                                    attributes={"routed_by": getattr(team.router, "__name__", "router")})
        try:
            execution = await agent.execute(message, shared, link=ChildLink(run.id, stage.id, team.name))
        except BaseException as exc:
            cancelled = isinstance(exc, asyncio.CancelledError)
            stage.close("cancelled" if cancelled else "error", f"{type(exc).__name__}: {exc}")
            run.end(RunStatus.CANCELLED if cancelled else RunStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
            raise
        answered = close_subagent_stage(stage, child_run=execution.run_id, answer=final_answer(execution),
                                        status=execution.status, error=execution.error)
        if answered is not None:
            with run.stage(StageKind.ANSWER, "answer", after=[stage]) as answer:
                answer.inputs([answered])
                answer.output(answered.item)
        status = {"completed": RunStatus.ANSWERED, "cancelled": RunStatus.CANCELLED}.get(execution.status,
                                                                                          RunStatus.FAILED)
        run.end(status, output=execution.response or None, error=execution.error,
                tokens_in=execution.usage.input_tokens, tokens_out=execution.usage.output_tokens,
                attributes={"agent": agent.name, "stop_reason": execution.metadata.get("stop_reason")})
        execution.metadata.update(team=team.name, team_run=run.id)
        return execution

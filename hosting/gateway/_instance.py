"""How a stored agent becomes a running one: its ``default`` provider and model resolved, its tools
selected from the registry, and a factory of :class:`agent.Agent` instances for its standing host.

Each stored agent's sessions are kept as ``<agent id>:<user id or ->:<session id>`` in the host's
session store; before each run the instance takes the session's user (whose personal memory is
injected) from that key, and the session takes the agent's current system prompt — so a PATCHed
prompt applies from a session's next turn on. With a clock, the prompt's time section is in the
user's time zone when their memory names one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

from agent import Agent, Hooks, MemoryInjector, ModelSettings, PersonalMemory, RunContext, Tool, ToolRegistry
from agent.errors import UserError
from agent.providers import Provider
from tracer import Recorder

from .._standing import StandingAgent
from ._definition import DEFAULT, AgentRecord
from .errors import AgentDefinitionError

NO_USER = "-"


@dataclass(frozen=True)
class GatewaySettings:
    """The host's providers by name, and what ``default`` resolves to.

    ``default_model`` empty: the provider's own model.
    """

    providers: Mapping[str, Provider]
    default_provider: str
    default_model: str = ""

    def __post_init__(self) -> None:
        if self.default_provider not in self.providers:
            raise ValueError(f"GatewaySettings: the default provider {self.default_provider!r} is not one of "
                             f"the providers ({', '.join(self.providers) or 'none'})")


@dataclass(frozen=True)
class Resolved:
    """What a stored agent's definition resolves to on this host."""

    provider_name: str
    provider: Provider
    model: str  # "" : the provider's own
    tools: list[Tool]

    @property
    def model_name(self) -> str:
        """The model the agent's requests name (the provider's own when the definition leaves it)."""
        return self.model or str(getattr(self.provider, "model", "") or "")


@dataclass(eq=False)
class LiveAgent:
    """A stored agent built for use: its definition as built, what it resolved to, and its host."""

    record: AgentRecord
    host: StandingAgent
    provider: str
    model: str
    tools: list[str]
    built_at: float = field(default_factory=time.monotonic)
    checked_at: float = field(default_factory=time.monotonic)


def session_key(agent_id: str, user_id: str | None, session_id: str) -> str:
    """The session store key of a stored agent's session."""
    return f"{agent_id}:{user_id or NO_USER}:{session_id}"


def user_of(key: str | None) -> str | None:
    """The user id in a :func:`session_key` (None for no user or another kind of session)."""
    parts = (key or "").split(":", 2)
    return parts[1] if len(parts) == 3 and parts[1] != NO_USER else None


def resolve(record: AgentRecord, settings: GatewaySettings, registry: ToolRegistry) -> Resolved:
    """The provider, model and tools ``record`` names, on this host; errors name what is missing."""
    provider_name = settings.default_provider if record.provider == DEFAULT else record.provider
    provider = settings.providers.get(provider_name)
    if provider is None:
        raise AgentDefinitionError(
            "provider", f"agent {record.id} names provider {provider_name!r}, which this host does not have "
                        f"({', '.join(settings.providers)}); PATCH it to one of them")
    try:
        tools = registry.select(record.config.tools, record.config.tool_groups)
    except UserError as exc:
        raise AgentDefinitionError("tools", f"agent {record.id}: {exc}; PATCH its tools") from None
    model = settings.default_model if record.model == DEFAULT else record.model
    return Resolved(provider_name, provider, model, tools)


def agent_factory(
    record: AgentRecord, resolved: Resolved, *, memory: PersonalMemory | None, recorder: Recorder | None,
    clock: Callable[[], datetime] | None,
) -> Callable[[], Agent]:
    """Makes the agent instances of ``record`` (one per active session of its standing host).

    ``memory``: the users' personal memory, injected for the session's user (None: no injection).
    ``clock`` gives the prompt a time section, in the user's time zone when their memory has one.
    """
    config = record.config
    persona = record.system_prompt or "You are a helpful assistant."
    settings = ModelSettings(resolved.model, temperature=config.temperature, max_tokens=config.max_tokens)
    facts = MemoryInjector(memory) if memory is not None else None

    def factory() -> Agent:
        agent = Agent(
            record.name, provider=resolved.provider, persona=persona, model=settings, tools=resolved.tools,
            facts=facts, clock=clock, recorder=recorder, max_turns=config.max_turns,
            max_tool_calls=config.max_tool_calls, labels=("gateway", f"agent:{record.id}"),
        )

        async def enter_turn(ctx: RunContext) -> None:
            await _enter_turn(agent, ctx, memory, clock)

        agent.hooks = Hooks.merge([agent.hooks, Hooks(before_loop=enter_turn)])
        return agent

    return factory


async def _enter_turn(
    agent: Agent, ctx: RunContext, memory: PersonalMemory | None, clock: Callable[[], datetime] | None,
) -> None:
    """Before each run: the session's user gets their memory (and their time zone), and the session
    the agent's current prompt."""
    agent.user_id = user_of(ctx.session_id)
    if agent.memory.has(agent.conversation_id):
        agent.memory.update_system_prompt(agent.conversation_id, agent.persona)
    if clock is None:
        return
    agent.clock = clock
    if agent.user_id is not None and memory is not None:
        zone = next((r.text for r in await memory.records(agent.user_id) if r.kind == "timezone"), None)
        if zone is not None:
            local = ZoneInfo(zone)  # checked when the record was written
            agent.clock = lambda: clock().astimezone(local)

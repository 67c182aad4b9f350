"""The gateway: stored agent definitions, built into running agents on first use.

    gateway = Gateway(DuckDBAgents(store), settings=GatewaySettings({"demo": model}, "demo"),
                      sessions=host.sessions, recorder=Recorder(store), seed_file="default-agents.json")
    await gateway.start()
    reply = await gateway.chat("research", "hello", session_id="s1", user_id="alice")

Lifecycle of a stored agent:

1. **Creation** stores the definition only (its tools, tool groups and provider are checked).
2. **First use** (a chat) loads it, resolves ``default`` provider and model from the host's
   :class:`GatewaySettings`, resolves its tools (tool groups expanded) from the registry, wires
   personal memory injection (:class:`agent.MemoryInjector`), and caches a standing host for it
   (:class:`hosting.StandingAgent`: sessions, durability, recording — the same turn path as a
   code-defined agent).
3. **Invalidation**: PATCH and DELETE drop the agent's cached instance; a tool or tool group change
   drops every one. The dropped instance *retires*: it takes no new turn, finishes the turns it
   is running — never cut — and then closes. A session whose turn is still running there is
   refused (or, with ``on_concurrent_invoke="enqueue"``, waits) on the new instance.
4. With a ``shared`` repository (PostgreSQL, several hosts), a cached agent's ``updated_at`` is
   re-checked at most every ``revalidate_after`` seconds, so an edit made on another host is
   picked up.

A stored agent's runs carry the labels ``gateway`` and ``agent:<id>``; how its sessions are keyed
and how a PATCHed prompt reaches them is in :mod:`hosting.gateway._instance`.
"""

from __future__ import annotations

import asyncio
import builtins  # (`list` in a class that defines a method `list`)
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from agent import PersonalMemory, Tool, ToolRegistry
from agent.errors import UserError
from tracer import Durability, Recorder, Run, RunFilter

from .._reply import TurnReply
from .._standing import ON_CONCURRENT, StandingAgent
from .._turn import Emit
from ..errors import HostingError, SessionBusyError
from ..sessions import InMemorySessions, SessionStore
from ._definition import DEFAULT, AgentDefinition, AgentRecord, patched, record_from, validated
from ._instance import GatewaySettings, LiveAgent, agent_factory, resolve, session_key
from ._repository import AgentsRepository
from ._seeds import SyncReport, choose_agent, load_seed_file
from .errors import AgentDefinitionError, AgentNotFoundError

log = logging.getLogger("footprint.gateway")


class Gateway:
    """Stored agents: definitions in ``repository``, running instances built lazily and cached.

    ``registry`` is what an agent's ``tools`` and ``toolGroups`` resolve against (a group is one the
    registry defines, or a tool category); ``tool_groups`` (group name -> tool names) are defined in
    it. Change tools through :meth:`register_tool`, :meth:`unregister_tool`,
    :meth:`replace_executor` and :meth:`define_tool_group` (or call :meth:`tools_changed` after
    changing the registry yourself): each drops every cached agent. ``sessions`` and ``recorder``
    are the host's; ``durability``, ``on_concurrent_invoke`` and ``max_active_sessions`` are passed
    to each agent's standing host.
    ``seed_file`` holds the default agents (:mod:`hosting.gateway._seeds`). ``clock`` gives the
    agents a time section; ``memory_injection=False`` turns personal memory off.
    """

    def __init__(
        self,
        repository: AgentsRepository,
        *,
        settings: GatewaySettings,
        registry: ToolRegistry | None = None,
        tool_groups: Mapping[str, Sequence[str]] | None = None,
        sessions: SessionStore | None = None,
        recorder: Recorder | None = None,
        durability: str | Durability = "exit",
        on_concurrent_invoke: str = "refuse",
        max_active_sessions: int = 100,
        seed_file: str | Path | None = None,
        clock: Callable[[], datetime] | None = None,
        memory_injection: bool = True,
        revalidate_after: float | None = None,
        host_id: str | None = None,
    ) -> None:
        if on_concurrent_invoke not in ON_CONCURRENT:
            raise ValueError(f"on_concurrent_invoke must be one of {', '.join(ON_CONCURRENT)}, "
                             f"not {on_concurrent_invoke!r}")
        self.repository = repository
        self.settings = settings
        self.registry = registry if registry is not None else ToolRegistry()
        for group, members in (tool_groups or {}).items():
            self.registry.define_group(group, members)
        self.sessions = sessions if sessions is not None else InMemorySessions()
        self.recorder = recorder
        self.durability = Durability(durability).value
        self.on_concurrent_invoke = on_concurrent_invoke
        self.max_active_sessions = max_active_sessions
        self.seed_file = Path(seed_file) if seed_file is not None else None
        self.clock = clock
        self.memory_injection = memory_injection
        self.revalidate_after = revalidate_after if revalidate_after is not None else (
            2.0 if repository.shared else None)
        self.host_id = host_id
        self._live: dict[str, LiveAgent] = {}
        self._building: dict[str, asyncio.Lock] = {}
        self._generation: dict[str, int] = {}  # bumped by each invalidation of an agent
        self._retiring: dict[str, list[LiveAgent]] = {}
        self._closers: set[asyncio.Task[None]] = set()
        self.builds = 0

    @property
    def memory(self) -> PersonalMemory:
        """The users' personal memory (kept by the repository)."""
        return self.repository.memory

    # ------------------------------------------------------------------ definitions

    async def start(self) -> SyncReport:
        """Create the seed file's agents that are not stored (stored ones are left as they are)."""
        return await self._sync(update=False)

    async def resync(self) -> SyncReport:
        """Reload the seed file: update its stored agents, create the missing ones, delete nothing."""
        return await self._sync(update=True)

    async def _sync(self, *, update: bool) -> SyncReport:
        report = SyncReport()
        if self.seed_file is None:
            return report
        definitions = await asyncio.to_thread(load_seed_file, self.seed_file)
        listed = set()
        for definition in definitions:
            assert definition.id is not None
            listed.add(definition.id)
            stored = await self.repository.get(definition.id)
            if stored is None:
                await self.repository.create(record_from(self._checked(definition)))
                report.created.append(definition.id)
            elif not update:
                report.unchanged.append(definition.id)
            else:
                fresh = patched(stored, definition.model_dump(by_alias=True))
                if fresh.same_definition(stored):
                    report.unchanged.append(definition.id)
                else:
                    self._checked(definition)
                    await self.repository.update(fresh)
                    self.invalidate(definition.id)
                    report.updated.append(definition.id)
        report.kept = [r.id for r in await self.repository.list(limit=100_000) if r.id not in listed]
        return report

    async def create(self, data: Mapping[str, Any]) -> AgentRecord:
        """Store a new agent (not built until first use); errors name the field."""
        definition = self._checked(validated(dict(data)))
        return await self.repository.create(record_from(definition))

    async def get(self, agent_id: str) -> AgentRecord:
        """The stored agent; :class:`AgentNotFoundError` when there is none."""
        record = await self.repository.get(agent_id)
        if record is None:
            raise AgentNotFoundError(agent_id)
        return record

    async def list(self, *, limit: int = 1000, offset: int = 0) -> list[AgentRecord]:
        """Stored agents, by name."""
        return await self.repository.list(limit=limit, offset=offset)

    async def update(self, agent_id: str, changes: Mapping[str, Any]) -> AgentRecord:
        """Apply a partial update (checked as a whole) and drop the agent's cached instance."""
        fresh = patched(await self.get(agent_id), dict(changes))
        self._checked(validated(fresh.definition()))
        stored = await self.repository.update(fresh)
        if stored is None:
            raise AgentNotFoundError(agent_id)
        self.invalidate(agent_id)
        return stored

    async def delete(self, agent_id: str) -> None:
        """Delete a stored agent and drop its cached instance (its running turns still finish)."""
        if not await self.repository.delete(agent_id):
            raise AgentNotFoundError(agent_id)
        self.invalidate(agent_id)

    async def choose(self, message: str) -> tuple[AgentRecord, builtins.list[str]] | None:
        """The stored agent whose trigger keywords match ``message`` best (see :func:`choose_agent`)."""
        return choose_agent(await self.repository.list(limit=100_000), message)

    def _checked(self, definition: AgentDefinition) -> AgentDefinition:
        """``definition`` when its provider, tools and tool groups exist on this host."""
        if definition.provider != DEFAULT and definition.provider not in self.settings.providers:
            raise AgentDefinitionError(
                "provider", f"{definition.provider!r} is not a provider of this host "
                            f"({', '.join([DEFAULT, *self.settings.providers])})")
        for index, name in enumerate(definition.tools):
            if name not in self.registry:
                raise AgentDefinitionError(
                    f"tools[{index}]", f"no tool {name!r} is registered ({', '.join(self.registry.names()) or 'none'})")
        for index, group in enumerate(definition.tool_groups):
            try:
                self.registry.group(group)
            except UserError as exc:
                raise AgentDefinitionError(f"toolGroups[{index}]", str(exc)) from None
        return definition

    # ------------------------------------------------------------------ tools

    def register_tool(self, tool: Tool, *, replace: bool = False) -> None:
        """Add (or replace) a tool of the registry; every cached agent is rebuilt on next use."""
        self.registry.register(tool, replace=replace)
        self.tools_changed("a tool was registered")

    def unregister_tool(self, name: str) -> None:
        """Remove a tool from the registry (agents naming it fail on next use, saying so)."""
        self.registry.unregister(name)
        self.tools_changed("a tool was removed")

    def replace_executor(self, name: str, execute: Callable[..., Any]) -> None:
        """A plugin's real implementation for a core tool (its definition kept); agents are rebuilt."""
        self.registry.replace_executor(name, execute)
        self.tools_changed("a tool's executor was replaced")

    def define_tool_group(self, group: str, names: Sequence[str]) -> None:
        """Define or change a tool group of the registry; every cached agent is rebuilt on next use."""
        self.registry.define_group(group, names)
        self.tools_changed("a tool group changed")

    def tools_changed(self, reason: str = "the tools changed") -> int:
        """Drop every cached agent: the next turn of each rebuilds it with the registry as it is now."""
        return self.invalidate_all(reason)

    # ------------------------------------------------------------------ lifecycle

    def cached(self) -> builtins.list[str]:
        """The ids of the agents built and cached now."""
        return list(self._live)

    def invalidate(self, agent_id: str) -> bool:
        """Drop the agent's cached instance (it retires: running turns finish); True when one was cached."""
        self._generation[agent_id] = self._generation.get(agent_id, 0) + 1
        live = self._live.pop(agent_id, None)
        if live is None:
            return False
        self._retire(agent_id, live)
        return True

    def invalidate_all(self, reason: str = "") -> int:
        """Drop every cached instance; returns how many were dropped."""
        ids = list(self._live)
        for agent_id in ids:
            self.invalidate(agent_id)
        if ids:
            log.info("gateway: %d cached agents dropped (%s)", len(ids), reason or "invalidated")
        return len(ids)

    def _retire(self, agent_id: str, live: LiveAgent) -> None:
        self._retiring.setdefault(agent_id, []).append(live)
        task = asyncio.get_running_loop().create_task(self._close_when_idle(agent_id, live))
        self._closers.add(task)
        task.add_done_callback(self._closers.discard)

    async def _close_when_idle(self, agent_id: str, live: LiveAgent) -> None:
        try:
            while live.host.health()["running_turns"]:
                await asyncio.sleep(0.02)  # it takes no new turns: this ends with its last one
            await live.host.close(0.0)
        except Exception:
            log.exception("closing the retired instance of agent %s failed", agent_id)
        finally:
            retiring = self._retiring.get(agent_id, [])
            if live in retiring:
                retiring.remove(live)
            if not retiring:
                self._retiring.pop(agent_id, None)

    async def instance(self, agent_id: str) -> LiveAgent:
        """The agent's cached instance, built on first use (and after an invalidation)."""
        live = self._live.get(agent_id)
        if live is not None and not self._stale_check_due(live):
            return live
        lock = self._building.setdefault(agent_id, asyncio.Lock())
        async with lock:
            live = self._live.get(agent_id)
            if live is not None:
                if not self._stale_check_due(live):
                    return live
                revision = await self.repository.revision(agent_id)
                if revision == live.record.updated_at:
                    live.checked_at = time.monotonic()
                    return live
                self.invalidate(agent_id)
            while True:
                generation = self._generation.get(agent_id, 0)
                record = await self.get(agent_id)
                if generation == self._generation.get(agent_id, 0):
                    break  # no invalidation while it was read: the definition is current
            live = self._build(record)
            self._live[agent_id] = live
            return live

    def _stale_check_due(self, live: LiveAgent) -> bool:
        return self.revalidate_after is not None and time.monotonic() - live.checked_at >= self.revalidate_after

    def _build(self, record: AgentRecord) -> LiveAgent:
        resolved = resolve(record, self.settings, self.registry)
        factory = agent_factory(record, resolved, memory=self.memory if self.memory_injection else None,
                                recorder=self.recorder, clock=self.clock)
        host = StandingAgent(
            agent_factory=factory, sessions=self.sessions, durability=self.durability,
            on_concurrent_invoke=self.on_concurrent_invoke, max_active_sessions=self.max_active_sessions,
            recordings=self.recorder.store if self.recorder is not None and self.recorder.enabled else None,
            close_sessions=False, host_id=self.host_id,
        )
        self.builds += 1
        return LiveAgent(record, host, resolved.provider_name, resolved.model_name, [t.name for t in resolved.tools])

    # ------------------------------------------------------------------ turns

    async def chat(
        self, agent_id: str, message: str = "", *, session_id: str | None = None, user_id: str | None = None,
        decision: str | None = None, turn_id: str | None = None, emit: Emit | None = None,
    ) -> TurnReply:
        """One turn of a stored agent through its standing host; a new session when none is given.

        The reply's ``session_id`` is the caller's session id (not the store key).
        """
        session_id = session_id or uuid.uuid4().hex[:16]
        key = session_key(agent_id, user_id, session_id)
        await self.instance(agent_id)  # a missing agent is refused before anything waits
        await self._after_retired_turns(agent_id, key)
        live = await self.instance(agent_id)
        try:
            reply = await live.host.handle(message, session_id=key, decision=decision, turn_id=turn_id, emit=emit)
        except HostingError as exc:
            # the host names the store key; the caller knows the session by its own id
            if getattr(exc, "session_id", None) == key:
                exc.args = (str(exc).replace(repr(key), repr(session_id)),)
                exc.session_id = session_id  # type: ignore[attr-defined]
            raise
        reply.session_id = session_id
        return reply

    async def _after_retired_turns(self, agent_id: str, key: str) -> None:
        """A session whose turn still runs on a retired instance: refuse, or wait for it to end."""
        while any(key in live.host.running_sessions() for live in self._retiring.get(agent_id, [])):
            if self.on_concurrent_invoke == "refuse":
                raise SessionBusyError(
                    f"session {key.split(':', 2)[2]!r} is still running a turn of agent {agent_id}'s previous "
                    f"definition; wait for its reply", session_id=key)
            await asyncio.sleep(0.02)

    async def recent_runs(self, agent_id: str, *, limit: int = 50) -> builtins.list[Run]:
        """The agent's most recent recorded runs (newest first)."""
        if self.recorder is None or not self.recorder.enabled:
            return []
        store = self.recorder.store
        await asyncio.to_thread(store.flush)
        return await asyncio.to_thread(store.list_runs, RunFilter(label=f"agent:{agent_id}"), limit=limit)

    async def close(self) -> None:
        """Let every running turn finish, close every instance and the repository."""
        for agent_id in list(self._live):
            self.invalidate(agent_id)
        if self._closers:
            await asyncio.gather(*list(self._closers), return_exceptions=True)
        with contextlib.suppress(Exception):
            await self.repository.close()

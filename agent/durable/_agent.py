"""``DurableAgent``: one durable agent session over the ordinary agent loop.

Messages arrive through two FIFO queues, *steering* and *send*, each draining ``one-at-a-time``
or ``all``. Steering messages join as soon as the current response and its tool batch finish;
sent messages wait until the agent would otherwise stop. Every queued message is durable the
moment :meth:`DurableAgent.steer` / :meth:`DurableAgent.send` return, and the conversation is
kept as append-only records (:mod:`agent.durable._journal`), so a session cut off by a crash goes
on with :meth:`DurableAgent.start` in the next process. Each turn is one recorded run of the
inner :class:`agent.Agent` — the same loop, tools, providers and recorder as every other agent.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent import Agent, AgentEvent, ConversationMemory, Hooks, ModelSettings, RunResult, Tool
from agent._loop import RunLoop
from agent.errors import ProviderError
from agent.providers import ModelRequest, ModelResponse, Provider
from agent.tools import ToolLike, as_tools
from tracer import ContextItem, Item, ItemKind, Origin, OriginKind, Recorder

from ._compaction import Compaction
from ._events import MessageQueued, MessagesConsumed, SessionEvent, Settled, TurnDone
from ._hooks import (
    Compact,
    DurableHooks,
    FeatureAction,
    ModelChange,
    Send,
    SessionContext,
    Steer,
    call_hook,
    merge_features,
)
from ._journal import QUEUES, Journal, Loaded, QueuedMessage, record_of
from ._persistence import SessionPersistence
from ._providers import AgentProviders
from ._settings import InferenceSettings
from ._turn import Turn
from .errors import SessionClosedError, SettingsError

log = logging.getLogger("footprint.agent.durable")
QUEUE_MODES = ("one-at-a-time", "all")
FAILED_TURN = "The last turn failed: {message}"


@dataclass
class AgentState:
    """The session's own mutable state, read at every inference (unless a hook answers instead)."""

    instructions: str = "You are a helpful assistant."
    tools: list[Tool] = field(default_factory=list)


class _Unregistered(Provider):
    """Stands in for a provider id that is not in the registry: the turn fails saying so."""

    def __init__(self, provider_id: str, known: list[str]) -> None:
        self.name = provider_id
        self._known = known

    async def complete(self, request: ModelRequest) -> ModelResponse:
        raise ProviderError(
            f"provider {self.name!r} is not registered in this session's AgentProviders "
            f"(registered: {', '.join(self._known) or 'none'})", provider=self.name)


class DurableAgent:
    """A durable agent session: steer/send queues, append-only persistence, crash resume, compaction.

    ``providers`` is the registry the live provider is resolved from, ``provider`` its id there;
    ``model``, ``effort`` and ``service_tier`` are the defaults a message's own settings override.
    ``hooks`` or ``features`` (merged in order) observe and steer the loop. ``recorder`` records
    every turn as a run of session ``id``.
    """

    def __init__(
        self,
        id: str,
        *,
        providers: AgentProviders,
        provider: str,
        persistence: SessionPersistence,
        instructions: str = "You are a helpful assistant.",
        tools: Sequence[ToolLike] = (),
        hooks: DurableHooks | None = None,
        features: Sequence[DurableHooks] = (),
        model: str | None = None,
        effort: str | None = None,
        service_tier: str | None = None,
        steering_mode: str = "one-at-a-time",
        send_mode: str = "one-at-a-time",
        recorder: Recorder | None = None,
        name: str = "durable-agent",
        max_turns: int = 50,
        max_tool_calls: int = 200,
    ) -> None:
        if not id:
            raise ValueError("a durable session needs an id")
        for label, mode in (("steering_mode", steering_mode), ("send_mode", send_mode)):
            if mode not in QUEUE_MODES:
                raise ValueError(f"{label} must be one of {', '.join(QUEUE_MODES)}, got {mode!r}")
        self.id = id
        self.providers = providers
        self.state = AgentState(instructions, as_tools(tools, f"durable agent {id}"))
        self.hooks = hooks if hooks is not None else merge_features(features)
        self.defaults = InferenceSettings(provider, model, effort, service_tier)
        self.modes = {"steering": steering_mode, "send": send_mode}
        self.journal = Journal(persistence, id)
        self.agent = Agent(
            name, provider=self._provider_for(provider), persona=instructions, model=model or None,
            memory=ConversationMemory(max_tokens=10**12), conversation_id=id, session_id=id, recorder=recorder,
            max_turns=max_turns, max_tool_calls=max_tool_calls,
            hooks=Hooks(before_inference=self._before_inference, after_inference=self._after_inference),
        )
        self.listeners: list[Callable[[SessionEvent], None]] = []
        self.queues: dict[str, list[QueuedMessage]] = {q: [] for q in QUEUES}
        self.pending_calls: list[tuple[str, dict[str, Any]]] = []
        self.effective = self.defaults
        self._saved_effective = self.defaults
        self._loaded = False
        self._task: asyncio.Task[None] | None = None
        self._in_run = False
        self._abort = False
        self._resume = False
        self._repair = False  # the storage fell behind memory: reload and settle what it owes
        self._closed = False
        self._failure: tuple[str, str, str | None] | None = None  # (message, run id, error stage id)
        self._compaction = Compaction(self)
        self._hook_errors: list[str] = []
        self._event_tasks: set[asyncio.Future[Any]] = set()
        self._apply_settings(self.defaults)

    # ------------------------------------------------------------------ public API

    @property
    def context(self) -> SessionContext:
        """What hooks are told: the session and its effective settings."""
        e = self.effective
        return SessionContext(self.id, e.provider or "", e.model, e.effort, e.service_tier)

    @property
    def history(self) -> list[ContextItem]:
        """The conversation as the model sees it (loaded on the first turn)."""
        return self.agent.memory.require(self.id).messages

    @property
    def busy(self) -> bool:
        """True while the loop is working (a turn, a compaction, a load)."""
        return self._task is not None and not self._task.done()

    async def steer(self, text: str, settings: InferenceSettings | None = None, **given: str | None) -> str:
        """Queue ``text`` to join as soon as the current response and its tool batch finish.

        Returns the queue key once the write is durable; a failed write raises and keeps the
        message out of the conversation. It waits neither for the history load nor for the turn.
        ``settings`` (or ``provider=``, ``model=``, ``effort=``, ``service_tier=``) take effect when
        the message is consumed and stay in effect for later messages.
        """
        return await self._enqueue("steering", text, settings, given)

    async def send(self, text: str, settings: InferenceSettings | None = None, **given: str | None) -> str:
        """Queue ``text`` to join once the agent would otherwise stop (see :meth:`steer`)."""
        return await self._enqueue("send", text, settings, given)

    def start(self) -> None:
        """Load the session and continue a turn a crash cut off; on an idle history, only load."""
        self._check_open()
        self._resume = True
        self._kick()

    async def wait_for_idle(self) -> None:
        """Return once the loop has settled (every queued message answered or the loop aborted)."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)

    async def compact(self) -> None:
        """Compact the conversation through the provider (waits for the active turn; one shared run).

        Raises :class:`~agent.durable.errors.CompactionError` when the provider fails; the history
        is then left as it was.
        """
        self._check_open()
        await self._compaction.request()

    async def abort(self) -> None:
        """Cancel the active turn and return once the loop stopped (a no-op when idle).

        Finished blocks stay; every running tool call gets an error result saying it was
        cancelled. Queued messages stay durable and join the next requested turn.
        """
        task = self._task
        if task is None or task.done():
            return
        self._abort = True
        if self._in_run:
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    async def close(self, grace: float = 0.0) -> None:
        """Stop the session: wait up to ``grace`` seconds for idle, then abort; close the tools."""
        self._closed = True
        if self.busy and grace > 0:
            try:
                await asyncio.wait_for(self.wait_for_idle(), grace)
            except TimeoutError:
                pass
        await self.abort()
        await self.agent.close()

    def queued(self) -> dict[str, list[dict[str, Any]]]:
        """The messages waiting in each queue (what a host panel shows)."""
        return {q: [{"key": m.key, "text": m.text, "queued_at": m.queued_at, "settings": m.settings.to_dict()}
                    for m in msgs] for q, msgs in self.queues.items()}

    # ------------------------------------------------------------------ queues

    async def _enqueue(self, queue: str, text: str, settings: InferenceSettings | None,
                       given: dict[str, str | None]) -> str:
        self._check_open()
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"session {self.id}: a {queue} message needs non-empty text")
        unknown = set(given) - {"provider", "model", "effort", "service_tier"}
        if unknown:
            raise SettingsError(f"unknown setting(s) {', '.join(sorted(unknown))}")
        chosen = InferenceSettings(**given).over(settings or InferenceSettings())
        if chosen.provider is not None and self.providers.get(chosen.provider) is None:
            # refused before it is stored: queued, it stayed in effect and every later turn (and a
            # compaction) failed on a provider that is not there
            raise SettingsError(f"provider {chosen.provider!r} is not registered in this session's "
                                f"providers (registered: {', '.join(self.providers.ids()) or 'none'})")
        message = QueuedMessage(self.journal.new_key(queue), queue, text, chosen, time.time())
        await self.journal.enqueue(message)
        if all(m.key != message.key for m in self.queues[queue]):  # a load may have read it already
            self.queues[queue].append(message)
        self._emit(MessageQueued(queue, message.key, text))
        self._kick()
        return message.key

    def take(self, queue: str) -> list[QueuedMessage]:
        """The messages the next drain of ``queue`` consumes (they leave the queue once durable)."""
        waiting = self.queues[queue]
        return list(waiting) if self.modes[queue] == "all" else waiting[:1]

    def consumed(self, messages: list[QueuedMessage], settings: InferenceSettings, run_id: str) -> None:
        """Messages are in the conversation now (their transaction committed)."""
        keys = {m.key for m in messages}
        for queue in QUEUES:
            self.queues[queue] = [m for m in self.queues[queue] if m.key not in keys]
        self.effective = self._saved_effective = settings
        for queue in QUEUES:
            mine = tuple(m.key for m in messages if m.queue == queue)
            if mine:
                self._emit(MessagesConsumed(queue, mine, run_id))

    # ------------------------------------------------------------------ settings and providers

    def pending_settings(self, messages: list[QueuedMessage]) -> InferenceSettings:
        """The settings in effect once ``messages`` are consumed."""
        settings = self.effective
        for m in messages:
            settings = m.settings.over(settings)
        return settings

    def settings_change(self, messages: list[QueuedMessage]) -> ModelChange | None:
        """Apply the settings ``messages`` carry; the change of provider or model, if there is one."""
        new = self.pending_settings(messages)
        old = self.effective
        self._saved_effective = old
        change = None
        if (new.provider, new.model) != (old.provider, old.model):
            previous = self.agent.provider
            self._apply_settings(new)
            compatible = self.providers.is_compatible(old.provider or "", new.provider or "")
            change = ModelChange(old.provider or "", new.provider or "", old.model, new.model, self.providers,
                                 None if isinstance(previous, _Unregistered) else previous,
                                 self.providers.get(new.provider or ""), not compatible)
        elif new != old:
            self._apply_settings(new)
        self.effective = new
        return change

    def restore_settings(self) -> None:
        """The consumption failed: the settings in effect before it stay in effect."""
        self.effective = self._saved_effective
        self._apply_settings(self.effective)

    async def model_changed(self, change: ModelChange) -> str | None:
        """Ask the ``model_changed`` hook; a reset's hand-off message, or None."""
        text = await call_hook(self.hooks, "model_changed", self.context, change, errors=self._hook_errors)
        return text if isinstance(text, str) and text.strip() else None

    def _provider_for(self, provider_id: str) -> Provider:
        return self.providers.get(provider_id) or _Unregistered(provider_id, self.providers.ids())

    def _apply_settings(self, settings: InferenceSettings) -> None:
        agent = getattr(self, "agent", None)
        if agent is None:
            return
        agent.provider = self._provider_for(settings.provider or "")
        extra = {k: v for k, v in (("reasoning_effort", settings.effort), ("service_tier", settings.service_tier))
                 if v is not None}
        agent.settings = ModelSettings(settings.model or "", extra=extra)
        agent._cached_static = None

    def refresh_state(self) -> None:
        """Read instructions and tools (hooks first, then ``state``) into the inner agent."""
        ctx = self.context
        instructions, tools = self.state.instructions, list(self.state.tools)
        if self.hooks.instructions is not None:
            try:
                instructions = self.hooks.instructions(ctx)
            except Exception as exc:  # a throwing hook falls back to the state
                self._hook_errors.append(f"instructions: {type(exc).__name__}: {exc}")
        if self.hooks.tools is not None:
            try:
                tools = as_tools(self.hooks.tools(ctx), f"durable agent {self.id}'s tools hook")
            except Exception as exc:
                self._hook_errors.append(f"tools: {type(exc).__name__}: {exc}")
        agent = self.agent
        if agent.persona != instructions:
            agent.persona = instructions
            agent.memory.update_system_prompt(self.id, instructions)
        by_name = {t.name: t for t in tools}
        if list(by_name.items()) != list(agent.tools.items()):
            agent.tools = by_name
            agent._cached_static = None

    # ------------------------------------------------------------------ the loop

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError(f"session {self.id} is closed")

    def _kick(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._agent_loop())

    def has_work(self) -> bool:
        """True when a turn or a compaction is waiting."""
        return bool(self.queues["steering"] or self.queues["send"] or self._compaction.pending
                    or self._repair or (self._resume and (self.pending_calls or self._needs_inference())))

    async def _agent_loop(self) -> None:
        began = False
        try:
            while not self._abort:
                if not self._loaded and not await self._load():
                    return
                if self._compaction.pending:
                    await self._compaction.run()
                    continue
                turn = self._next_turn()
                if turn is None:
                    if not began:
                        return
                    await self._settle_failure()
                    await self._apply(await call_hook(self.hooks, "after_agent_loop", self.context,
                                                      errors=self._hook_errors))
                    if self.has_work() and not self._abort:
                        continue
                    return
                if not began:
                    began = True
                    await call_hook(self.hooks, "before_agent_loop", self.context, errors=self._hook_errors)
                await call_hook(self.hooks, "before_turn", self.context, errors=self._hook_errors)
                consumed = await self._run_turn(turn)
                if not consumed:  # the storage refused the queued messages: they wait for the next turn
                    await self._settle_failure()
                    return
                if self._abort:
                    if self._compaction.pending:  # a compaction waits for the turn, aborted or not
                        await self._compaction.run()
                    return
                await self._apply(await call_hook(self.hooks, "after_turn", self.context, errors=self._hook_errors))
        finally:
            self._abort = False
            self._resume = False
            self._emit(Settled(len(self.queues["steering"]) + len(self.queues["send"])))

    async def _load(self) -> bool:
        try:
            loaded = await self.journal.load()
        except Exception as exc:  # not sticky: the next requested turn loads again
            log.warning("session %s: load failed: %s", self.id, exc)
            self._emit(TurnDone("internal_error", None, f"{type(exc).__name__}: {exc}"))
            return False
        self._install(loaded)
        return True

    def _install(self, loaded: Loaded) -> None:
        memory = self.agent.memory
        memory.clear_messages(self.id)
        memory.add(self.id, *loaded.history)
        self.queues = loaded.queues
        self.pending_calls = loaded.pending_calls
        self.effective = self._saved_effective = loaded.settings.over(self.defaults)
        self._apply_settings(self.effective)
        self._loaded = True

    def _needs_inference(self) -> bool:
        history = self.history
        if not history:
            return False
        last = history[-1].item.kind
        return last in (ItemKind.USER, ItemKind.TOOL_RESULT) or bool(self.agent.memory.unanswered_calls(self.id))

    def _next_turn(self) -> Turn | None:
        resume, self._resume, self._repair = self._resume or self._repair, False, False
        if resume and (self.pending_calls or self.agent.memory.unanswered_calls(self.id)):
            return Turn(self, [], resume=True)  # queued messages join after the batch settles
        for queue in QUEUES:  # steering always before send
            messages = self.take(queue)
            if messages:
                return Turn(self, messages, resume=False)
        if resume and self._needs_inference():
            return Turn(self, [], resume=False)
        return None

    async def _run_turn(self, turn: Turn) -> bool:
        """Run one turn; False when its queued messages could not be consumed (they stay queued)."""
        text = "\n\n".join(m.text for m in turn.messages) or "(continuing the session)"
        loop = RunLoop(self.agent, self._emit, driver=turn)
        self._in_run = True
        try:
            result = await loop.execute(text, None)
        finally:
            self._in_run = False
        try:
            await turn.finish()
        except Exception as exc:
            # what is in memory is not what is stored: the stored side is the truth, so it is loaded
            # again and whatever it still owes (results, leftover batch keys) is settled as after a crash
            log.warning("session %s: storing the end of run %s failed: %s", self.id, result.run_id, exc)
            result = RunResult("", "failed", result.run_id, error=str(exc), stop_reason="internal_error")
            self._loaded = False
            self._repair = True
        self._after_run(result, loop)
        waiting = {m.key for q in QUEUES for m in self.queues[q]}
        return not any(m.key in waiting for m in turn.messages)

    def _after_run(self, result: RunResult, loop: RunLoop) -> None:
        if result.status == "answered":
            self._failure = None
        elif result.status == "failed":
            self._failure = (result.error or "unknown error", result.run_id, loop.error_stage)
        state = "internal_error" if result.stop_reason == "internal_error" else result.status
        self._emit(TurnDone(state, result.run_id, result.error, result.answer))

    async def _settle_failure(self) -> None:
        """An unrecovered failed turn leaves a durable system message pointing at the run that failed."""
        if self._failure is None:
            return
        message, run_id, stage_id = self._failure
        self._failure = None
        item = ContextItem(Item.of_text(ItemKind.SYSTEM, FAILED_TURN.format(message=message)),
                           Origin(OriginKind.STAGE, run_id, stage_id, "failed_turn"))
        try:
            await self.journal.append("recording the failed turn", [record_of(item)])
        except Exception as exc:
            log.warning("session %s: could not record the failed turn: %s", self.id, exc)
            return
        self.agent.memory.add(self.id, item)

    async def _apply(self, actions: Sequence[FeatureAction] | None) -> None:
        for action in actions or ():
            try:
                if isinstance(action, Steer):
                    await self.steer(action.text, action.settings)
                elif isinstance(action, Send):
                    await self.send(action.text, action.settings)
                elif isinstance(action, Compact):
                    self._compaction.mark()
                else:
                    raise TypeError(f"not a feature action: {action!r}")
            except Exception as exc:  # an action never fails the run
                log.warning("session %s: action %r failed: %s", self.id, action, exc)
                self._hook_errors.append(f"action {type(action).__name__}: {type(exc).__name__}: {exc}")

    # ------------------------------------------------------------------ events and inner hooks

    def _emit(self, event: SessionEvent | AgentEvent) -> None:
        for listener in self.listeners:
            try:
                listener(event)
            except Exception:  # a listener observes; it never fails the run
                log.warning("session %s: an event listener failed", self.id, exc_info=True)
        if self.hooks.on_event is not None:
            try:
                value = self.hooks.on_event(self.context, event)
                if inspect.isawaitable(value):
                    task = asyncio.ensure_future(value)
                    self._event_tasks.add(task)
                    task.add_done_callback(self._event_tasks.discard)
            except Exception as exc:
                self._hook_errors.append(f"on_event: {type(exc).__name__}: {exc}")

    async def _before_inference(self, ctx: Any, request: ModelRequest) -> None:
        await call_hook(self.hooks, "before_inference", self.context, errors=self._hook_errors)

    async def _after_inference(self, ctx: Any, response: ModelResponse) -> None:
        await call_hook(self.hooks, "after_inference", self.context, errors=self._hook_errors)

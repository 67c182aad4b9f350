"""The Agent: persona, memory, tools and a provider; `run()`, `stream()`, `resume()`, `cancel()`.

Every run goes through the recorder: the input, the memory load, the prompt composition, each
inference with its full snapshot, each tool call inside a fork/join batch, and the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tracer import ContextItem, Item, ItemKind, NullRecorder, Origin, OriginKind, Recorder

from ._events import AgentEvent, PauseState, RunFinished, RunResult
from ._facts import FactStore
from ._hooks import Feature, Hooks
from ._loop import RunLoop
from ._memory import ConversationMemory
from ._pause import check_resumable
from ._prompt import PromptComposer
from ._pump import pump
from .errors import AgentBusyError, UserError
from .providers import Provider, ToolCall
from .providers._pricing import Price
from .tools import DEFAULT_MAX_RESULT_CHARS, META_TOOL_NAMES, PermissionChecker, Tool, ToolRegistry
from .tools import meta_tools as agent_meta_tools
from .tools._tool import ToolLike, as_tools, check_result_bound

#: approve(call, tool) -> bool (or awaitable bool); may raise PauseRun to ask a person.
Approval = Callable[[ToolCall, Tool], bool | Awaitable[bool]]


@dataclass
class ModelSettings:
    """Settings sent with every inference (recorded in each snapshot)."""

    model: str = ""
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    seed: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_body(self, provider: Provider) -> dict[str, Any]:
        """The settings item's body.

        ``model`` is the model the request asks for: this agent's, else the provider's own. Under a
        :class:`~agent.providers.FallbackProvider` or :class:`~agent.providers.ProviderRouter` each
        provider with a model of its own is asked for it and the agent's goes to the others (a
        router routes on it): ``model`` is left out unless every provider would be asked for the
        same one, and the agent's choice, when it is not simply that, is kept as ``agent_model``
        (:meth:`~agent.providers.Provider.settings_for`).
        """
        body: dict[str, Any] = dict(provider.settings_for(self.model))
        for key in ("temperature", "max_tokens", "top_p", "seed"):
            value = getattr(self, key)
            if value is not None:
                body[key] = value
        body.update(self.extra)
        return body


class Agent:
    """A configurable agent: persona, conversation memory, tools, and a swappable provider.

    ``tools`` are Tool objects or typed functions (each made a Tool by :func:`agent.tool`); ``tool_names`` are resolved against ``registry`` (the registry
    decides what a name does). ``facts`` (with ``user_id``) are injected into the prompt as memory.
    ``recorder`` records every run (``None``: nothing is recorded). ``sequential_tools`` runs the
    calls of one response one after another instead of in parallel (results land in call order either way).

    Governance: ``permissions`` checks every call for ``user_id`` (levels, categories, paths, hosts,
    rate limits, confirmation; each decision is recorded on the tool stage). With
    ``meta_tools=True`` the model is offered only ``search_tools``, ``get_tool_help`` and
    ``use_tool`` and discovers the other tools through them.

    ``max_tool_result_chars`` bounds how much of one tool result the model is shown (a tool's own
    ``max_result_chars`` comes first; None: no bound); the recording keeps what was cut off.
    """

    def __init__(
        self,
        name: str,
        *,
        provider: Provider,
        persona: str = "You are a helpful assistant.",
        discloses_ai: bool = True,
        model: str | ModelSettings | None = None,
        tools: Sequence[ToolLike] = (),
        tool_names: Sequence[str] = (),
        registry: ToolRegistry | None = None,
        memory: ConversationMemory | None = None,
        conversation_id: str | None = None,
        session_id: str | None = None,
        facts: FactStore | None = None,
        user_id: str | None = None,
        composer: PromptComposer | None = None,
        custom_instructions: Sequence[str] = (),
        capabilities: Sequence[str] = (),
        workspace: str | None = None,
        autonomy: str | None = None,
        clock: Callable[[], datetime] | None = None,
        recorder: Recorder | None = None,
        max_turns: int = 50,
        max_tool_calls: int = 200,
        approve: Approval | None = None,
        permissions: PermissionChecker | None = None,
        meta_tools: bool = False,
        hooks: Hooks | None = None,
        features: Sequence[Feature] = (),
        stream_inference: bool = False,
        sequential_tools: bool = False,
        prices: dict[str, Price] | None = None,
        labels: Sequence[str] = (),
        max_tool_result_chars: int | None = DEFAULT_MAX_RESULT_CHARS,
    ) -> None:
        if not name:
            raise UserError("an agent needs a name")
        if not callable(getattr(provider, "complete", None)):
            raise UserError(f"agent {name}: provider must be a Provider (an OpenAIProvider, a ScriptedModel, ...), "
                            f"not {type(provider).__name__}")
        if max_turns < 1 or max_tool_calls < 0:
            raise UserError(f"agent {name}: max_turns must be >= 1 and max_tool_calls >= 0")
        check_result_bound(f"agent {name}: max_tool_result_chars", max_tool_result_chars)
        #: the most characters of one tool result the model is shown, for a tool that sets no bound
        #: of its own (None: no bound)
        self.max_tool_result_chars = max_tool_result_chars
        self.name = name
        self.provider = provider
        self.persona = persona
        self.discloses_ai = discloses_ai
        self.settings = model if isinstance(model, ModelSettings) else ModelSettings(model or "")
        resolved = as_tools(tools, f"agent {name}")
        if tool_names:
            if registry is None:
                raise UserError(f"agent {name}: tool_names {list(tool_names)} need a registry to resolve them")
            resolved += registry.resolve(tool_names)
        for feature in features:
            resolved += feature.tools
        names = [t.name for t in resolved]
        duplicates = {n for n in names if names.count(n) > 1}
        if duplicates:
            raise UserError(f"agent {name}: more than one tool named {', '.join(sorted(duplicates))}")
        self.workspace = workspace if workspace is not None else (registry.workspace if registry else None)
        if meta_tools and set(META_TOOL_NAMES) & set(names):
            raise UserError(f"agent {name}: no tool may be called {', '.join(sorted(set(META_TOOL_NAMES) & set(names)))} "
                            f"when meta_tools=True (the meta-tools have those names)")
        #: the tools this agent can call (with meta-tools: the catalogue they reach)
        self.tools: dict[str, Tool] = {t.name: t for t in resolved}
        #: search_tools, get_tool_help and use_tool when meta_tools=True (else empty)
        self.meta: dict[str, Tool] = {t.name: t for t in agent_meta_tools()} if meta_tools else {}
        self._catalog: ToolRegistry | None = None
        self._catalog_of: dict[str, Tool] | None = None
        self.memory = memory or ConversationMemory()
        self.conversation_id = conversation_id or uuid.uuid4().hex
        if not self.memory.has(self.conversation_id):
            self.memory.create(persona, id=self.conversation_id)
        self.session_id = session_id
        self.facts = facts
        self.user_id = user_id
        self.composer = composer or PromptComposer()
        self.custom_instructions = list(custom_instructions)
        self.capabilities = list(capabilities)
        self.autonomy = autonomy
        self.clock = clock
        self.recorder: Recorder = recorder if recorder is not None else NullRecorder()
        self.max_turns = max_turns
        self.max_tool_calls = max_tool_calls
        self.approve = approve
        self.permissions = permissions
        self.features = list(features)
        self.hooks = Hooks.merge([h for h in [hooks, *(f.hooks for f in features)] if h is not None])
        self.stream_inference = stream_inference
        self.sequential_tools = sequential_tools
        self.prices = prices
        self.labels = tuple(labels) + tuple(getattr(provider, "labels", ()))
        self._task: asyncio.Task[RunResult] | None = None
        self._cached_static: list[ContextItem] | None = None

    # ------------------------------------------------------------------ tools

    @property
    def meta_tools(self) -> bool:
        """True when the model is offered the meta-tools instead of every tool."""
        return bool(self.meta)

    @property
    def offered(self) -> list[Tool]:
        """The tools whose schemas the model is sent: every tool, or only the meta-tools."""
        return list(self.meta.values()) if self.meta else list(self.tools.values())

    @property
    def catalog(self) -> ToolRegistry:
        """The agent's tools as a registry (what meta-tools search and reach), kept in step with ``tools``."""
        if self._catalog is None or self._catalog_of is not self.tools or len(self._catalog) != len(self.tools):
            self._catalog, self._catalog_of = ToolRegistry(self.tools.values(), workspace=self.workspace), self.tools
        return self._catalog

    # ------------------------------------------------------------------ static context

    def static_context(self) -> list[ContextItem]:
        """The tool definitions and settings every inference offers (origin: the agent's config)."""
        if self._cached_static is None:
            items = [
                ContextItem(t.definition(), Origin(OriginKind.CONFIG, source=f"tool:{t.name}"))
                for t in self.offered
            ]
            settings = Item(ItemKind.SETTINGS, self.settings.as_body(self.provider))
            items.append(ContextItem(settings, Origin(OriginKind.CONFIG, source="settings")))
            self._cached_static = items
        return self._cached_static

    def feature_sections(self) -> list[tuple[str, str]]:
        """Instructions contributed by features, as (name, text) prompt sections."""
        return [(f"feature:{f.name}", f.instructions) for f in self.features if f.instructions]

    # ------------------------------------------------------------------ running

    @property
    def busy(self) -> bool:
        """True while a run is in flight on this instance."""
        return self._task is not None and not self._task.done()

    async def run(self, message: str) -> RunResult:
        """Run one turn and return its answer, status, run id and usage.

        The run ends ``answered``, ``awaiting`` (a tool asked a person: see :meth:`resume`),
        ``failed`` (a provider error or a limit; ``stop_reason`` says which) or ``cancelled``; none
        of these is raised. :class:`AgentBusyError` is raised when a run is already in flight.
        """
        return await self._start(message, None, None)

    async def resume(self, pause: PauseState | dict[str, Any], decision: str) -> RunResult:
        """Continue a paused run with a person's ``decision``; earlier tool calls are not run again.

        For a question the decision is the tool's result; for an approval, ``yes``/``ok``/...
        runs the call and anything else refuses it.
        """
        state = pause if isinstance(pause, PauseState) else PauseState.from_dict(pause)
        self._check_idle()
        check_resumable(self, state)
        return await self._start(decision, state, None)

    async def stream(self, message: str, *, pause: PauseState | None = None) -> AsyncIterator[AgentEvent]:
        """Run one turn (or resume ``pause`` with ``message`` as the decision), yielding its events.

        Events: :class:`TextDeltaEvent` as the model writes, :class:`ToolStarted` (with the tool's
        progress line) and :class:`ToolFinished` per call, :class:`InferenceFinished` per model
        call, and last :class:`RunFinished` with the result. Closing the stream early (``async with
        contextlib.aclosing(agent.stream(...))``, then ``break``) cancels the run.
        """
        self._check_idle()
        if pause is not None:
            check_resumable(self, pause)
        queue: asyncio.Queue[AgentEvent] = asyncio.Queue()
        runner = asyncio.ensure_future(self._start(message, pause, queue.put_nowait))
        try:
            async with contextlib.aclosing(pump(queue, runner, lambda e: isinstance(e, RunFinished))) as events:
                async for event in events:
                    yield event
                    if isinstance(event, RunFinished):
                        return
            yield RunFinished(runner.result())  # the run is over: its result (or its exception)
        finally:
            if not runner.done():
                runner.cancel()
                await asyncio.gather(runner, return_exceptions=True)

    def cancel(self) -> bool:
        """Abort the run in flight: its model request and running tools. True when one was running.

        The run ends ``cancelled`` (recorded, with an error stage); every tool call it started
        gets a result saying it was cancelled, so the conversation can go on.
        """
        if self.busy:
            assert self._task is not None
            self._task.cancel()
            return True
        return False

    async def settle(self) -> None:
        """Wait until the run in flight, if any, has ended and recorded itself (after a cancel, say)."""
        task = self._task
        if task is not None and not task.done():
            await asyncio.wait([task])

    def _check_idle(self) -> None:
        if self.busy:
            raise AgentBusyError(
                f"agent {self.name} is already running a turn; wait for it, cancel it, or use one instance "
                f"per session"
            )

    async def _start(
        self, message: str, pause: PauseState | None, emit: Callable[[AgentEvent], None] | None
    ) -> RunResult:
        if not isinstance(message, str):
            raise UserError(f"agent {self.name}: a message is text (str), not {type(message).__name__}")
        self._check_idle()
        task = self._task = asyncio.ensure_future(RunLoop(self, emit).execute(message, pause))
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            # our caller was cancelled: stop the run too, and let it record itself as cancelled
            task.cancel()
            raise
        if emit is not None:
            emit(RunFinished(result))
        return result

    async def close(self, reason: str = "closed") -> None:
        """Close every tool that holds resources (``reason``: closed, evicted, ...)."""
        for t in self.tools.values():
            if t.close is not None:
                value = t.close(reason)
                if inspect.isawaitable(value):
                    await value

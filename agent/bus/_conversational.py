"""ConversationalAgent: an :class:`agent.Agent` per conversation, its history kept in a store.

Each turn restores the conversation from a :class:`ConversationStore` (as
``agent.Conversation.to_dict()``), runs the Agent — a recorded run whose session is the
conversation id — and writes the conversation back, so a restart or a second host continues
where the last turn ended. A stored conversation that cannot be read fails the turn naming the
conversation: it is never answered as if it were new. A run that pauses to ask a person sends the
question as its answer and continues from the pause on the conversation's next message.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from tracer import Recorder

from .._agent import Agent, ModelSettings
from .._events import PauseState, RunResult
from .._memory import Conversation, ConversationMemory
from ..providers import Provider
from ..tools import Tool, ToolLike, as_tools
from ._binding import AgentBinding, SourceBinding
from ._bus import BusFailure
from ._channel import DEFAULT_STALE_AFTER, ChannelAgent
from ._events import MessageEvent, TaskEvent
from .errors import ConversationUnreadableError, RunFailedError

_PAUSE_KEY = "bus.pause"


class ConversationStore(Protocol):
    """Where conversations live between turns, as ``Conversation.to_dict()`` forms."""

    async def load(self, conversation_id: str) -> dict[str, Any] | None:
        """The stored conversation, or None when there is none yet."""
        ...

    async def save(self, conversation_id: str, data: dict[str, Any]) -> None:
        """Store (replace) the conversation."""
        ...


class InMemoryConversationStore:
    """A :class:`ConversationStore` in a dict; it keeps JSON text, so what it returns is always a fresh copy."""

    def __init__(self) -> None:
        self._data: dict[str, str] = {}

    async def load(self, conversation_id: str) -> dict[str, Any] | None:
        """The stored conversation, or None."""
        text = self._data.get(conversation_id)
        return None if text is None else json.loads(text)

    async def save(self, conversation_id: str, data: dict[str, Any]) -> None:
        """Store the conversation."""
        self._data[conversation_id] = json.dumps(data, ensure_ascii=False)

    def put_raw(self, conversation_id: str, text: str) -> None:
        """Store text as it is (a test puts an unreadable conversation here)."""
        self._data[conversation_id] = text

    def ids(self) -> list[str]:
        """Every stored conversation id."""
        return list(self._data)


class ConversationalAgent(ChannelAgent):
    """A bus agent that converses: one :class:`agent.Agent` per conversation, history in ``store``.

    ``persona``, ``tools``, ``model`` and ``recorder`` configure every conversation's Agent;
    ``agent_options`` are passed to :class:`agent.Agent` as they are (limits, approval, hooks,
    facts, ...). Up to ``max_live_agents`` Agent instances are kept; the store, not the instance,
    holds the history. ``failure_reply`` is sent when a run fails (default: nothing is sent; the
    failure is reported to the bus).
    """

    def __init__(
        self,
        name: str,
        binding: AgentBinding,
        *,
        provider: Provider,
        persona: str = "You are a helpful assistant.",
        tools: Sequence[ToolLike] = (),
        model: str | ModelSettings | None = None,
        store: ConversationStore | None = None,
        recorder: Recorder | None = None,
        max_history_tokens: int = 100_000,
        agent_options: Mapping[str, Any] | None = None,
        max_live_agents: int = 256,
        failure_reply: str | None = None,
        stale_after: float | None = DEFAULT_STALE_AFTER,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(name, binding, stale_after=stale_after, clock=clock)
        self.provider = provider
        self.persona = persona
        self.tools: list[Tool] = as_tools(tools, f"bus agent {name}")
        self.model = model
        self.store: ConversationStore = store if store is not None else InMemoryConversationStore()
        self.recorder = recorder
        self.max_history_tokens = max_history_tokens
        self.agent_options = dict(agent_options or {})
        self.max_live_agents = max_live_agents
        self.failure_reply = failure_reply
        self._agents: OrderedDict[str, Agent] = OrderedDict()

    # ------------------------------------------------------------------ handlers

    async def on_message(self, message: MessageEvent, route: SourceBinding) -> None:
        """Run a turn with the message's text and answer on the route's reply channel."""
        result = await self.converse(self.conversation_key(message), self.format_input(message))
        await self._answer(message, route, result)

    async def on_task(self, task: TaskEvent, route: SourceBinding) -> None:
        """Run the task's instruction as a turn of its own conversation and answer ``reply_to``."""
        result = await self.converse(self.conversation_key(task), task.text)
        await self._answer(task, route, result)

    def format_input(self, message: MessageEvent) -> str:
        """The text a message becomes for the model (default: the text as written)."""
        return message.text

    # ------------------------------------------------------------------ a turn

    async def converse(self, conversation_id: str, text: str) -> RunResult:
        """One recorded turn of ``conversation_id``: restore, run (or resume a pause), store."""
        agent = self.agent_for(conversation_id)
        conversation = await self._restore(agent, conversation_id)
        pause_data = conversation.metadata.pop(_PAUSE_KEY, None)
        if pause_data is not None:
            try:
                pause = PauseState.from_dict(pause_data)
            except (ValueError, TypeError) as exc:
                raise ConversationUnreadableError(
                    f"agent {self.name}: the paused run stored with conversation {conversation_id!r} "
                    f"cannot be read ({exc}); not answering it fresh", conversation_id=conversation_id,
                ) from exc
            result = await agent.resume(pause, text)
        else:
            result = await agent.run(text)
        conversation = agent.memory.require(conversation_id)
        if result.pause is not None:
            conversation.metadata[_PAUSE_KEY] = result.pause.to_dict()
        await self.store.save(conversation_id, conversation.to_dict())
        return result

    def agent_for(self, conversation_id: str) -> Agent:
        """The conversation's Agent (built by :meth:`build_agent` when not live)."""
        agent = self._agents.get(conversation_id)
        if agent is None:
            agent = self.build_agent(conversation_id)
            self._agents[conversation_id] = agent
            while len(self._agents) > self.max_live_agents:
                self._agents.popitem(last=False)
        self._agents.move_to_end(conversation_id)
        return agent

    def build_agent(self, conversation_id: str) -> Agent:
        """A new Agent for ``conversation_id`` (a subclass may configure it further)."""
        return Agent(
            self.name, provider=self.provider, persona=self.persona, tools=self.tools, model=self.model,
            memory=ConversationMemory(max_tokens=self.max_history_tokens), conversation_id=conversation_id,
            session_id=conversation_id, recorder=self.recorder, **self.agent_options,
        )

    async def _restore(self, agent: Agent, conversation_id: str) -> Conversation:
        data = await self.store.load(conversation_id)
        agent.memory.clear()
        if data is None:
            conversation = agent.memory.create(self.persona, id=conversation_id)
        else:
            try:
                conversation = Conversation.from_dict(data)
            except ValueError as exc:
                raise ConversationUnreadableError(
                    f"agent {self.name}: stored conversation {conversation_id!r} cannot be read ({exc}); "
                    f"not answering it fresh — repair or delete it in the conversation store",
                    conversation_id=conversation_id,
                ) from exc
            if conversation.id != conversation_id:
                raise ConversationUnreadableError(
                    f"agent {self.name}: the store returned conversation {conversation.id!r} "
                    f"for {conversation_id!r}", conversation_id=conversation_id,
                )
            conversation.system_prompt = self.persona  # the persona is configuration: the current one applies
            agent.memory.put(conversation)
        return conversation

    async def _answer(self, event: MessageEvent | TaskEvent, route: SourceBinding, result: RunResult) -> None:
        if result.status == "answered":
            await self.reply(event, route, result.answer)
        elif result.status == "awaiting":
            await self.reply(event, route, result.question or "")
        else:
            self.report(BusFailure(self.name, "run", RunFailedError(
                f"agent {self.name}: run {result.run_id} ended {result.status}: {result.error}",
                run_id=result.run_id, status=result.status,
            ), event))
            if self.failure_reply:
                await self.reply(event, route, self.failure_reply)

"""WebChatAgent: a member of a multi-party chat whose memory is the chat itself.

It keeps no history of its own. Every turn it reads the chat back through a
:class:`ChatTranscriptSource`, hands the model the transcript up to the line being answered —
so what people said while the agent was muted is in its context the moment it speaks again, and
a restart loses nothing — and answers. Trace lines in the transcript never reach the model.
While a tool runs, the tool's progress line goes out as a :class:`~agent.bus.SendTrace`, and with
a ``trace_of`` hook so does a line per finished tool call. The tool calls behind its replies come
back for a few turns as remembered tool exchanges (see :mod:`agent.bus._remembered`).

Inbound messages: ``endpoint`` is the chat id, ``sender_id`` the author and ``message_id`` the
chat's sequence number. Turns on one chat run in order.

Provenance: a person's line enters the context as a user item whose origin is
``user transcript:<chat>#<seq>``; the agent's own line keeps the origin of the run that wrote it
when this process remembers it (``file transcript:<chat>#<seq>`` otherwise, read back from the
chat); remembered tool exchanges keep the origins of the run that made the calls.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tracer import ContextItem, Item, ItemKind, Origin, OriginKind, Recorder

from .._agent import Agent, ModelSettings
from .._hooks import Hooks, RunContext
from .._memory import ConversationMemory
from ..providers import Provider, ToolCall
from ..tools import Tool, ToolLike, as_tool, as_tools
from ._binding import AgentBinding, SourceBinding
from ._bus import BusFailure
from ._channel import DEFAULT_STALE_AFTER, ChannelAgent
from ._events import InboundEvent, MessageEvent
from ._remembered import RememberedToolExchanges, ToolExchange, place_exchanges
from .errors import BadEventError, BindingError, RunFailedError

_ANSWERS_KEPT = 20  # per chat: own replies whose producing run we can still name
_MADE_KEPT = 256  # Tools made of the functions tools_for gave, kept by identity


@dataclass(frozen=True)
class TranscriptLine:
    """One line of a chat: its sequence number, author and text; ``trace`` for audit-trail lines."""

    seq: int
    sender_id: str
    text: str
    trace: bool = False
    sender_name: str | None = None
    timestamp: float | None = None

    @property
    def author(self) -> str:
        """The author's display name, or id."""
        return self.sender_name or self.sender_id


class ChatTranscriptSource(Protocol):
    """The port a WebChatAgent reads its chats through."""

    async def read(self, chat_id: str, limit: int) -> Sequence[TranscriptLine]:
        """The chat's lines, oldest first: at least its newest ``limit`` non-trace lines (more is fine)."""
        ...


@dataclass(frozen=True)
class FinishedToolCall:
    """A tool call that finished during a web chat turn (what ``trace_of`` is asked about)."""

    chat_id: str
    name: str
    arguments: str
    result: str
    is_error: bool
    duration_ms: float


@dataclass(frozen=True)
class WebChatTurn:
    """What one turn hands the model: the history (transcript window plus remembered exchanges) and the input.

    ``answers`` are the sequence numbers of the lines this turn answers (the newest is ``seq``);
    ``exchanges`` the remembered exchanges that were put back.
    """

    chat_id: str
    seq: int
    history: tuple[ContextItem, ...]
    input: str
    answers: tuple[int, ...]
    exchanges: tuple[ToolExchange, ...] = ()


@dataclass
class _ChatState:
    answered_through: int | None = None
    answers: OrderedDict[str, ContextItem] = field(default_factory=OrderedDict)  # item hash -> item


TraceOf = Callable[[FinishedToolCall], str | None]


class WebChatAgent(ChannelAgent):
    """A chat member that reads the chat back every turn and answers the lines it has not answered.

    ``persona_for(chat_id)`` is asked every turn; its answer (or ``persona`` when it gives None)
    is that turn's system prompt. ``tools_for(chat_id)`` likewise picks the turn's tools (None:
    ``tools``). ``sender_id`` is the agent's author id in the chat (default: its name).
    ``history_limit`` is how many transcript lines the model sees (the line answered included);
    remembered tool exchanges come on top. ``trace_of(call)`` gives the trace line for a finished
    tool call (None: no line).
    """

    def __init__(
        self,
        name: str,
        binding: AgentBinding,
        *,
        provider: Provider,
        transcript: ChatTranscriptSource,
        persona: str = "You are a helpful member of this chat.",
        persona_for: Callable[[str], str | None] | None = None,
        tools: Sequence[ToolLike] = (),
        tools_for: Callable[[str], Sequence[ToolLike] | None] | None = None,
        sender_id: str | None = None,
        history_limit: int = 40,
        trace_of: TraceOf | None = None,
        model: str | ModelSettings | None = None,
        recorder: Recorder | None = None,
        remembered: RememberedToolExchanges | None = None,
        max_history_tokens: int = 100_000,
        agent_options: Mapping[str, Any] | None = None,
        stale_after: float | None = DEFAULT_STALE_AFTER,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(name, binding, stale_after=stale_after, clock=clock)
        if history_limit < 1:
            raise BindingError(f"web chat agent {name}: history_limit must be at least 1")
        self.provider = provider
        self.transcript = transcript
        self.persona = persona
        self.persona_for = persona_for
        self.tools: list[Tool] = as_tools(tools, f"web chat agent {name}")
        self.tools_for = tools_for
        self.sender_id = sender_id or name
        self.history_limit = history_limit
        self.trace_of = trace_of
        self.model = model
        self.recorder = recorder
        self.remembered = remembered if remembered is not None else RememberedToolExchanges()
        self.max_history_tokens = max_history_tokens
        self.agent_options = dict(agent_options or {})
        self._chats: OrderedDict[str, _ChatState] = OrderedDict()
        # the Tool made of each function tools_for gave (by identity, the function kept alive with it)
        self._made: OrderedDict[int, tuple[ToolLike, Tool]] = OrderedDict()

    # ------------------------------------------------------------------ filtering

    def accepts(self, event: InboundEvent) -> bool:
        """Everything but the agent's own lines and trace lines echoed back by the chat."""
        if isinstance(event, MessageEvent):
            return event.sender_id != self.sender_id and not event.metadata.get("trace")
        return True

    def answered_through(self, chat_id: str) -> int | None:
        """The newest line this process answered in the chat (None: none since it started)."""
        state = self._chats.get(chat_id)
        return None if state is None else state.answered_through

    # ------------------------------------------------------------------ a turn

    async def on_message(self, message: MessageEvent, route: SourceBinding) -> None:
        """Read the chat back, answer the lines up to this one, and remember the turn's tool calls."""
        seq = _seq_of(message, self.name)
        chat = message.endpoint
        done = self.answered_through(chat)
        if done is not None and seq <= done:
            return  # a redelivery, or a line an earlier turn already answered
        lines = await self.transcript.read(chat, self.history_limit)
        turn = self.build_turn(chat, seq, message, lines)
        agent = self._agent_for_turn(message, route)
        agent.memory.add(chat, *turn.history)
        result = await agent.run(turn.input)
        # what this run added: its items name it as their origin (the history names earlier runs)
        outputs = [ci for ci in agent.memory.require(chat).messages if ci.origin.run_id == result.run_id]
        self.remembered.remember(chat, seq, outputs)
        if result.status in ("answered", "awaiting"):
            state = self._state(chat)
            state.answered_through = seq
            finals = [ci for ci in outputs if ci.item.kind == ItemKind.ASSISTANT and ci.item.body.get("text")]
            if finals and result.status == "answered":
                state.answers[finals[-1].item.hash] = finals[-1]
                while len(state.answers) > _ANSWERS_KEPT:
                    state.answers.popitem(last=False)
            await self.reply(message, route, result.answer if result.status == "answered" else result.question or "")
        else:
            self.report(BusFailure(self.name, "run", RunFailedError(
                f"web chat agent {self.name}: run {result.run_id} for chat {chat} line {seq} ended "
                f"{result.status}: {result.error}", run_id=result.run_id, status=result.status,
            ), message))

    def build_turn(
        self, chat_id: str, seq: int, message: MessageEvent, lines: Sequence[TranscriptLine]
    ) -> WebChatTurn:
        """What the model sees when answering line ``seq``: pure, given the transcript and the memory."""
        own = self.sender_id
        by_seq: dict[int, TranscriptLine] = {}
        for line in lines:
            # lines written after this one are answered by their own turns; the agent's own later
            # replies (to earlier lines) were already said, so the model sees them
            if not line.trace and (line.seq <= seq or line.sender_id == own):
                by_seq[line.seq] = line
        current = by_seq.pop(seq, None) or TranscriptLine(
            seq, message.sender_id, message.text, sender_name=message.sender_name, timestamp=message.timestamp)
        ordered = [by_seq[s] for s in sorted(by_seq)]
        window = ordered[len(ordered) - (self.history_limit - 1):] if self.history_limit > 1 else []
        done = self.answered_through(chat_id)
        if done is None:  # nothing answered since this process started: the chat says where it stopped
            done = max((ln.seq for ln in ordered if ln.sender_id == own and ln.seq < seq), default=-1)
        answers = tuple(ln.seq for ln in [*window, current] if ln.sender_id != own and done < ln.seq <= seq)
        history = [(ln.seq, self._item(chat_id, ln)) for ln in window]
        exchanges = self.remembered.exchanges(chat_id)
        placed = place_exchanges(history, exchanges, window_start=window[0].seq if window else seq,
                                 pending_from=min(answers, default=seq))
        kept = {ci.item.hash for ci in placed}
        used = tuple(e for e in exchanges if e.items and e.items[0].item.hash in kept)
        return WebChatTurn(chat_id, seq, tuple(placed), self.format_line(current), answers, used)

    def format_line(self, line: TranscriptLine) -> str:
        """How a person's line reads to the model (default: ``author: text``, since several people talk)."""
        return f"{line.author}: {line.text}"

    def _item(self, chat_id: str, line: TranscriptLine) -> ContextItem:
        source = f"transcript:{chat_id}#{line.seq}"
        if line.sender_id != self.sender_id:
            return ContextItem(Item.of_text(ItemKind.USER, self.format_line(line)), Origin(OriginKind.USER, source=source))
        item = Item.of_text(ItemKind.ASSISTANT, line.text)
        state = self._chats.get(chat_id)
        known = state.answers.get(item.hash) if state is not None else None
        return known or ContextItem(item, Origin(OriginKind.FILE, source=source))

    def _state(self, chat_id: str) -> _ChatState:
        state = self._chats.get(chat_id)
        if state is None:
            state = self._chats[chat_id] = _ChatState()
        self._chats.move_to_end(chat_id)
        while len(self._chats) > self.remembered.max_chats:
            self._chats.popitem(last=False)
        return state

    def _chosen_tools(self, chosen: Sequence[ToolLike]) -> list[Tool]:
        """The tools ``tools_for`` chose, each function made a Tool once (not at every turn)."""
        tools = []
        for index, given in enumerate(chosen):
            if isinstance(given, Tool):
                tools.append(given)
                continue
            made = self._made.get(id(given))
            if made is None or made[0] is not given:
                made = (given, as_tool(given, f"web chat agent {self.name}: tools_for", index))
                self._made[id(given)] = made
                while len(self._made) > _MADE_KEPT:
                    self._made.popitem(last=False)
            tools.append(made[1])
        return tools

    def _agent_for_turn(self, message: MessageEvent, route: SourceBinding) -> Agent:
        chat = message.endpoint
        persona = (self.persona_for(chat) if self.persona_for is not None else None) or self.persona
        chosen = self.tools_for(chat) if self.tools_for is not None else None
        tools = self._chosen_tools(chosen) if chosen is not None else self.tools
        by_name = {t.name: t for t in tools}

        async def progress(ctx: RunContext, call: ToolCall) -> None:
            tool = by_name.get(call.name)
            if tool is None:
                return
            try:
                line = tool.progress_line(json.loads(call.arguments or "{}"))
            except Exception:  # a broken progress line must not cost the call it describes
                line = None
            if line:
                await self.trace(message, route, line, kind="progress", tool=call.name)

        async def finished(ctx: RunContext, call: ToolCall, content: str, is_error: bool, duration: float) -> None:
            if self.trace_of is None:
                return
            line = self.trace_of(FinishedToolCall(chat, call.name, call.arguments, content, is_error, duration))
            if line:
                await self.trace(message, route, line, kind="tool", tool=call.name)

        options = dict(self.agent_options)
        hooks = Hooks(on_tool_start=progress, on_tool_end=finished)
        if options.get("hooks") is not None:
            hooks = Hooks.merge([options.pop("hooks"), hooks])
        options.pop("hooks", None)
        memory = ConversationMemory(max_tokens=self.max_history_tokens)
        memory.create(persona, id=chat)
        return Agent(
            self.name, provider=self.provider, persona=persona, tools=tools, model=self.model, memory=memory,
            conversation_id=chat, session_id=chat, recorder=self.recorder, hooks=hooks, **options,
        )


def _seq_of(message: MessageEvent, agent: str) -> int:
    try:
        return int(message.message_id)
    except (TypeError, ValueError):
        raise BadEventError(
            f"web chat agent {agent}: message {message.message_id!r} in chat {message.endpoint} has no "
            f"sequence number (a web chat's message_id must be the chat's integer seq)"
        ) from None

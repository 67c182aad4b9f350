"""SummaristAgent: watches conversations and writes a summary now and then — no Agent involved.

It shares every message it hears (the agents that answer still get them), buffers them per
conversation, and on a heartbeat tick — or once a conversation has ``every`` new messages — asks
the provider once for a summary. An agent without a tool loop is an ordinary
:class:`ChannelAgent` subclass, and its one model call is still a recorded run: one inference
stage whose snapshot is the instructions and the summarised messages, each with the origin of the
message it came from, then the answer.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

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
    StageStatus,
)

from .._agent import ModelSettings
from ..providers import ModelRequest, Provider
from ..providers._pricing import cost_of
from ._binding import AgentBinding, SourceBinding
from ._channel import DEFAULT_STALE_AFTER, ChannelAgent
from ._events import HeartbeatEvent, MessageEvent, SendText
from .errors import BindingError

DEFAULT_INSTRUCTIONS = (
    "Summarise the conversation messages below for someone who did not read them: who asked for what, "
    "what was decided, and what is still open. Be brief; use the participants' names."
)


@dataclass(frozen=True)
class Summary:
    """A summary of ``count`` messages of one conversation, and the run that wrote it."""

    conversation: str
    text: str
    count: int
    first_message_id: str
    last_message_id: str
    run_id: str
    at: float


class SummaristAgent(ChannelAgent):
    """Shares the messages it hears and summarises each conversation's new ones.

    A summary is written on a heartbeat (for conversations with at least ``min_messages`` new
    messages; the binding must hear the heartbeat) or as soon as a conversation reaches ``every``
    new messages. It is kept in :attr:`summaries` and sent to ``report_to`` (channel, to) when
    given, otherwise back on the conversation's reply channel when its source binding has one.
    At most ``max_buffer`` messages per conversation and ``max_conversations`` conversations are
    held (oldest first out).
    """

    def __init__(
        self,
        name: str,
        binding: AgentBinding,
        *,
        provider: Provider,
        instructions: str = DEFAULT_INSTRUCTIONS,
        model: str | ModelSettings | None = None,
        every: int | None = None,
        min_messages: int = 1,
        report_to: tuple[str, str] | None = None,
        recorder: Recorder | None = None,
        max_buffer: int = 200,
        max_conversations: int = 1000,
        stale_after: float | None = DEFAULT_STALE_AFTER,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(name, binding, stale_after=stale_after, clock=clock)
        if every is None and not binding.heartbeat:
            raise BindingError(f"summarist {name}: give every=N or a binding that hears the heartbeat, "
                               f"or it never summarises")
        if (every is not None and every < 1) or min_messages < 1:
            raise BindingError(f"summarist {name}: every and min_messages must be at least 1")
        self.provider = provider
        self.instructions = instructions
        self.settings = model if isinstance(model, ModelSettings) else ModelSettings(model or "")
        self.every = every
        self.min_messages = min_messages
        self.report_to = report_to
        self.recorder: Recorder = recorder if recorder is not None else NullRecorder()
        self.max_buffer = max_buffer
        self.max_conversations = max_conversations
        self.summaries: OrderedDict[str, Summary] = OrderedDict()
        self._buffers: OrderedDict[str, list[MessageEvent]] = OrderedDict()
        self._routes: dict[str, tuple[SourceBinding, str]] = {}  # conversation -> (route, endpoint)

    def pending(self, conversation: str) -> int:
        """How many messages of ``conversation`` wait for the next summary."""
        return len(self._buffers.get(conversation, ()))

    async def on_message(self, message: MessageEvent, route: SourceBinding) -> None:
        """Buffer the message; summarise when the conversation reached ``every`` messages."""
        key = self.conversation_key(message)
        buffer = self._buffers.setdefault(key, [])
        self._buffers.move_to_end(key)
        buffer.append(message)
        del buffer[: max(0, len(buffer) - self.max_buffer)]
        self._routes[key] = (route, message.endpoint)
        while len(self._buffers) > self.max_conversations:
            dropped, _ = self._buffers.popitem(last=False)
            self._routes.pop(dropped, None)
        if self.every is not None and len(buffer) >= self.every:
            await self.summarize(key)

    async def on_heartbeat(self, tick: HeartbeatEvent) -> None:
        """Summarise every conversation with at least ``min_messages`` new messages."""
        for key in [k for k, buffer in self._buffers.items() if len(buffer) >= self.min_messages]:
            await self.summarize(key)

    async def summarize(self, conversation: str) -> Summary | None:
        """Summarise the conversation's buffered messages now (None when there are none).

        The messages leave the buffer first, so ones arriving meanwhile wait for the next summary;
        when the model call fails they go back, and the error is raised (and reported to the bus).
        """
        messages = self._buffers.pop(conversation, [])
        if not messages:
            return None
        try:
            summary = await self._write(conversation, messages)
        except BaseException:
            self._buffers[conversation] = messages + self._buffers.get(conversation, [])
            raise
        self.summaries[conversation] = summary
        self.summaries.move_to_end(conversation)
        while len(self.summaries) > self.max_conversations:
            self.summaries.popitem(last=False)
        await self._deliver(conversation, summary)
        return summary

    def render(self, message: MessageEvent) -> str:
        """How one message appears to the model (default: ``author: text``)."""
        return f"{message.author}: {message.text}"

    async def _write(self, conversation: str, messages: list[MessageEvent]) -> Summary:
        settings = Item(ItemKind.SETTINGS, self.settings.as_body(self.provider))
        context = [
            ContextItem(Item.of_text(ItemKind.SYSTEM, self.instructions), Origin(OriginKind.CONFIG, source="instructions")),
            *(
                ContextItem(Item.of_text(ItemKind.USER, self.render(m)),
                            Origin(OriginKind.USER, source=f"{m.source}:{m.endpoint}#{m.message_id}"))
                for m in messages
            ),
            ContextItem(settings, Origin(OriginKind.CONFIG, source="settings")),
        ]
        request = ModelRequest.of(context)
        run = self.recorder.start_run(
            agent=self.name, input=f"summarise {len(messages)} message(s) of {conversation}",
            session_id=conversation, model=self.settings.model or None,
        )
        inference = run.stage(StageKind.INFERENCE, "summary")
        inference.inputs(context)
        try:
            response = await self.provider.complete(request)
        except BaseException as exc:
            inference.close(StageStatus.ERROR, f"{type(exc).__name__}: {exc}")
            status = RunStatus.FAILED if isinstance(exc, Exception) else RunStatus.CANCELLED
            run.end(status, error=f"{type(exc).__name__}: {exc}")
            raise
        answer = inference.output(Item.of_text(ItemKind.ASSISTANT, response.text))
        inference.set(model=response.model, provider=response.provider, input_tokens=response.usage.input_tokens,
                      output_tokens=response.usage.output_tokens)
        inference.close()
        with run.stage(StageKind.ANSWER, "answer", after=[inference]) as stage:
            stage.inputs([answer])
            stage.output(answer.item)
        run.end(RunStatus.ANSWERED, output=response.text, model=response.model or None,
                tokens_in=response.usage.input_tokens, tokens_out=response.usage.output_tokens,
                cost=cost_of(response.model or self.settings.model, response.usage))
        return Summary(conversation, response.text, len(messages), messages[0].message_id,
                       messages[-1].message_id, run.id, self.clock())

    async def _deliver(self, conversation: str, summary: Summary) -> None:
        if self.report_to is not None:
            channel, to = self.report_to
        else:
            route, endpoint = self._routes.get(conversation, (None, ""))
            if route is None or route.reply_channel is None:
                return
            channel, to = route.reply_channel, endpoint
        await self.send(SendText(channel, to, summary.text, self.name, in_reply_to=summary.last_message_id))

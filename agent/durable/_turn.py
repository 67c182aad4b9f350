"""One turn of a durable session: the :class:`~agent._driver.LoopDriver` the ordinary loop runs with.

The turn makes the loop's work durable at the moments the seed fixes:

- consumed queued messages are appended as user records and their queue keys deleted in one
  transaction (with the effective settings, and a reset's erasure when a change needs one)
  before the inference that sees them;
- each finished assistant block (text, tool call) is appended as the inference returns it;
- a batch is written under ``tool.`` keys before any call runs; each result is appended with its
  key's deletion in one transaction, strictly in call order;
- whatever the run added that is not durable yet (results of an aborted batch, the results a
  failing run gives unanswered calls) is appended at the end with the batch's leftover keys.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from agent._loop import Decided, RunLoop
from agent.providers import ToolCall
from tracer import ContextItem, Item, ItemKind, OriginKind, StageKind, StageRecording

from ._journal import TOOL_PREFIX, QueuedMessage, record_of
from ._persistence import PersistenceContext

if TYPE_CHECKING:
    from ._agent import DurableAgent

NOT_DURABLE = ("Error: {name} was interrupted (the session stopped while it ran) and was not run again: it is "
               "not marked durable, so it may or may not have had its effect. Check before calling it again.")


class Turn:
    """Drives one run of the inner agent for a :class:`~agent.durable.DurableAgent`."""

    def __init__(self, session: DurableAgent, messages: list[QueuedMessage], resume: bool) -> None:
        self.session = session
        self.messages = messages
        self.resume = resume
        self.persisted: set[int] = set()  # id() of the context items made durable during this run
        self.mark = len(session.history)  # messages before this mark were durable before the run
        self.batch_keys: list[str] = []  # the tool. keys of the running batch, by position
        self._ready: dict[int, ContextItem] = {}
        self._next = 0
        self._commit_lock = asyncio.Lock()

    # ------------------------------------------------------------------ LoopDriver

    async def begin(self, loop: RunLoop, stage: StageRecording) -> list[ContextItem]:
        """Consume the turn's messages (see :meth:`consume`); the loop adds them to memory."""
        self.session.refresh_state()
        stage.set(interrupted_calls=len(self.session.pending_calls))
        return await self.consume(loop, stage, self.messages)  # the loop adds them to memory

    def interrupted_batch(self, loop: RunLoop) -> tuple[list[ToolCall], list[ContextItem], Decided] | None:
        """Calls of the current turn without a result: a crash cut their batch off."""
        if not self.resume:
            return None
        unanswered = self.session.agent.memory.unanswered_calls(self.session.id)
        if not unanswered:
            return None
        dispatched = {call.get("id"): key for key, call in self.session.pending_calls}
        durable = {t.name for t in self.session.agent.tools.values() if t.durable}
        calls: list[ToolCall] = []
        decided: Decided = {}
        for ci in unanswered:
            body = ci.item.body
            call = ToolCall(str(body.get("id", "")), str(body.get("name", "")), str(body.get("arguments", "")))
            calls.append(call)
            if call.id in dispatched and call.name not in durable:
                decided[call.id] = (NOT_DURABLE.format(name=call.name), True)
        self.batch_keys = [key for key, _ in self.session.pending_calls]
        return calls, list(unanswered), decided

    async def responded(self, loop: RunLoop, outputs: list[ContextItem]) -> None:
        """Append each finished block as its own record, in order."""
        await self.session.journal.append("appending the model's response", [record_of(ci) for ci in outputs])
        self.persisted.update(id(ci) for ci in outputs)

    async def batch_started(self, loop: RunLoop, calls: list[ToolCall]) -> None:
        """Write the whole batch under ``tool.`` keys (replacing an interrupted batch's) before any call runs."""
        keys = [f"{TOOL_PREFIX}{i:04d}" for i in range(len(calls))]
        stale = [k for k in self.batch_keys if k not in keys]
        run_id = loop.run.id if loop.run else None

        async def work(tx: PersistenceContext) -> None:
            p = self.session.journal.persistence
            for key in stale:
                await p.delete_value(tx, key)
            for key, call in zip(keys, calls, strict=True):
                await p.write_value(tx, key, {"id": call.id, "name": call.name, "arguments": call.arguments,
                                              "run_id": run_id})

        await self.session.journal.in_transaction("writing the tool batch", work)
        self.batch_keys = keys
        self.session.pending_calls = [(k, {"id": c.id, "name": c.name}) for k, c in zip(keys, calls, strict=True)]
        self._ready, self._next = {}, 0

    async def tool_settled(self, loop: RunLoop, index: int, result: ContextItem) -> None:
        """Commit results in call order: each with its ``tool.`` key's deletion, in one transaction."""
        self._ready[index] = result
        async with self._commit_lock:
            while self._next in self._ready:
                item, key = self._ready.pop(self._next), self.batch_keys[self._next]
                await self._commit_result(item, key)
                self._next += 1

    async def between_inferences(
        self, loop: RunLoop, after: list[StageRecording | str]
    ) -> list[StageRecording | str]:
        """Steering messages join here, after the batch and before the next inference."""
        self.session.refresh_state()
        messages = self.session.take("steering")
        if not messages:
            return after
        assert loop.run is not None
        with loop.run.stage(StageKind.INPUT, "steering", after=after) as stage:
            items = await self.consume(loop, stage, messages)
        loop.agent.memory.add(loop.agent.conversation_id, *items)
        return [stage]

    # ------------------------------------------------------------------ the durable steps

    async def consume(self, loop: RunLoop, stage: StageRecording, messages: list[QueuedMessage]) -> list[ContextItem]:
        """Move ``messages`` from their queues into the conversation in one transaction.

        Their settings take effect first; an incompatible change erases the history in the same
        transaction and starts it with the hand-off message ``model_changed`` returned.
        """
        session = self.session
        change = session.settings_change(messages)
        reset = change is not None and change.was_reset
        handoff: ContextItem | None = None
        if change is not None:
            with loop.run.stage(StageKind.INPUT, "history reset" if reset else "model switch",  # type: ignore[union-attr]
                                after=[stage]) as switch:
                switch.set(previous_provider=change.previous_provider, provider=change.provider,
                           previous_model=change.previous_model, model=change.model, reset=reset)
                text = await session.model_changed(change)
                if reset:
                    switch.inputs(list(session.history))
                    if text:
                        handoff = switch.output(Item.of_text(ItemKind.SYSTEM, text), origin_kind=OriginKind.HOOK,
                                                source="model_changed")
        items = [stage.output(Item.of_text(ItemKind.USER, m.text), origin_kind=OriginKind.USER, source=m.source)
                 for m in messages]
        if messages:
            stage.set(queued=[{"queue": m.queue, "key": m.key, "queued_at": m.queued_at} for m in messages])
        settings = session.pending_settings(messages)

        async def work(tx: PersistenceContext) -> None:
            p = session.journal.persistence
            if reset:
                await p.clear_records(tx)
            if handoff is not None:
                await p.append(tx, record_of(handoff))
            for message, item in zip(messages, items, strict=True):
                await p.append(tx, record_of(item, queue=message.queue, key=message.key))
                await p.delete_value(tx, message.key)
            if change is not None or any(not m.settings.empty for m in messages):
                await p.write_value(tx, "settings", settings.to_dict())

        try:
            await session.journal.in_transaction("consuming queued messages", work)
        except BaseException:
            session.restore_settings()
            raise
        session.consumed(messages, settings, loop.run.id if loop.run else "")
        if reset:
            session.agent.memory.clear_messages(session.id)
            self.mark = 0
        if handoff is not None:
            session.agent.memory.add(session.id, handoff)
            self.persisted.add(id(handoff))
        self.persisted.update(id(ci) for ci in items)
        return items

    async def _commit_result(self, item: ContextItem, key: str) -> None:
        async def work(tx: PersistenceContext) -> None:
            p = self.session.journal.persistence
            await p.append(tx, record_of(item))
            await p.delete_value(tx, key)

        await self.session.journal.in_transaction("committing a tool result", work)
        self.persisted.add(id(item))
        self.session.pending_calls = [(k, c) for k, c in self.session.pending_calls if k != key]

    async def finish(self) -> None:
        """Make durable what the run added and is not durable yet, and drop the batch's leftover keys."""
        session = self.session
        owed = [ci for ci in session.history[self.mark:] if id(ci) not in self.persisted]
        leftover = [k for k, _ in session.pending_calls]
        if not owed and not leftover:
            return

        async def work(tx: PersistenceContext) -> None:
            p = session.journal.persistence
            for ci in owed:
                await p.append(tx, record_of(ci))
            for key in leftover:
                await p.delete_value(tx, key)

        await session.journal.in_transaction("storing the end of the turn", work)
        session.pending_calls = []
        self.persisted.update(id(ci) for ci in owed)


"""Compaction: the provider summarises the conversation, and the summary replaces it atomically.

Recorded as a run of the session with one ``compaction`` stage: its inputs are the messages it
replaced (each with its own origin), its output the summary item. The summary's origin is that
stage, so ``why`` on a later answer walks from the summary through the compaction to the messages
it summarised. In storage, one transaction deletes the records and appends the replacement as a
``compaction`` record naming every record it replaced.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from agent.providers import ModelRequest
from tracer import (
    ContextItem,
    Item,
    ItemKind,
    Origin,
    OriginKind,
    RunStatus,
    StageKind,
    StageStatus,
)

from ._events import Compacted
from ._journal import item_dict
from ._persistence import PersistenceContext, SessionRecord
from .errors import CompactionError

if TYPE_CHECKING:
    from ._agent import DurableAgent

log = logging.getLogger("footprint.agent.durable")

INSTRUCTIONS = (
    "Summarise the conversation so far for your own later use: the user's goals and constraints, the "
    "decisions made, facts learned from tools, and what is still open. Keep names, numbers and ids exactly. "
    "Answer with the summary only."
)


class Compaction:
    """The session's one shared compaction: callers while it is pending or running await the same one."""

    def __init__(self, session: DurableAgent) -> None:
        self.session = session
        self._future: asyncio.Future[None] | None = None
        self._marked = False  # asked for by an action: nobody awaits it

    @property
    def pending(self) -> bool:
        """True when a compaction was asked for and has not run yet."""
        return self._future is not None or self._marked

    def mark(self) -> None:
        """Ask for a compaction nobody awaits (a feature action)."""
        self._marked = True

    async def request(self) -> None:
        """Ask for the compaction and wait for it (it runs when the active turn ends)."""
        if self._future is None:
            self._future = asyncio.get_running_loop().create_future()
        future = self._future
        self.session._kick()
        await asyncio.shield(future)

    async def run(self) -> None:
        """Run the pending compaction (the session's loop calls this between turns)."""
        future, self._future, self._marked = self._future, None, False
        try:
            await self._compact()
        except Exception as exc:
            if future is None:
                log.warning("session %s: compaction failed: %s", self.session.id, exc)
            elif not future.done():
                future.set_exception(exc if isinstance(exc, CompactionError) else CompactionError(str(exc)))
                future.exception()  # retrieved here too: a caller that went away leaves no warning
            return
        if future is not None and not future.done():
            future.set_result(None)

    async def _compact(self) -> None:
        session = self.session
        agent = session.agent
        snapshot = list(session.history)
        if not snapshot:
            return
        run = agent.recorder.start_run(agent=agent.name, input="compact the conversation", session_id=session.id,
                                       model=agent.settings.model or None, labels=agent.labels)
        stage = run.stage(StageKind.COMPACTION, "compaction")
        instruction = ContextItem(Item.of_text(ItemKind.SYSTEM, INSTRUCTIONS), Origin(OriginKind.CONFIG,
                                                                                       source="compaction"))
        stage.inputs([instruction, *snapshot])
        request = ModelRequest.of([instruction, *snapshot, *agent.static_context()[-1:]])
        try:
            response = await agent.provider.complete(request)
            if not response.text.strip():
                raise CompactionError(f"session {session.id}: the provider returned an empty summary")
        except BaseException as exc:
            message = f"session {session.id}: compaction failed: {type(exc).__name__}: {exc}"
            stage.close(StageStatus.CANCELLED if isinstance(exc, asyncio.CancelledError) else StageStatus.ERROR,
                        message)
            run.end(RunStatus.FAILED, error=message)
            if isinstance(exc, Exception):
                raise CompactionError(message) from exc
            raise
        summary = stage.output(Item(ItemKind.SUMMARY, {"text": response.text, "replaces": len(snapshot)}))
        stage.set(replaced=len(snapshot), model=response.model, input_tokens=response.usage.input_tokens,
                  output_tokens=response.usage.output_tokens)
        stage.close()
        kept = session.history[len(snapshot):]  # messages that joined after the snapshot stay
        replacement = [summary, *kept]
        body: dict[str, Any] = {
            "items": [item_dict(ci) for ci in replacement],
            "replaced": [{"kind": ci.item.kind, "hash": ci.item.hash, "run_id": ci.origin.run_id,
                          "stage_id": ci.origin.stage_id} for ci in snapshot],
            "run_id": run.id, "stage_id": stage.id,
        }

        async def work(tx: PersistenceContext) -> None:
            p = session.journal.persistence
            await p.clear_records(tx)
            await p.append(tx, SessionRecord("compaction", body))

        try:
            await session.journal.in_transaction("replacing the compacted history", work)
        except Exception as exc:
            run.end(RunStatus.FAILED, error=str(exc))
            raise CompactionError(f"session {session.id}: compaction could not be stored; the history is "
                                  f"unchanged: {exc}") from exc
        agent.memory.clear_messages(session.id)
        agent.memory.add(session.id, *replacement)
        run.end(RunStatus.ANSWERED, output=response.text, model=response.model or None,
                tokens_in=response.usage.input_tokens, tokens_out=response.usage.output_tokens)
        session._emit(Compacted(len(snapshot), len(kept), run.id))


"""The seam through which an outside layer drives a run of the ordinary loop (``agent.durable``).

A plain :class:`~agent.Agent` run has no driver: one user message in, the loop to its answer. A
durable session drives the same loop (:class:`agent._loop.RunLoop`) with a :class:`LoopDriver`,
which supplies the turn's input (queued messages, a batch cut off by a crash) and is told each
time the loop adds something to the conversation, so it can make it durable at that moment. The
loop asks for nothing else; a run without a driver pays one ``is None`` check per step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from tracer import ContextItem, StageRecording

from .providers import ToolCall

if TYPE_CHECKING:
    from ._loop import Decided, RunLoop


class LoopDriver(Protocol):
    """What a driven run calls, in the order the run meets it."""

    async def begin(self, loop: RunLoop, stage: StageRecording) -> list[ContextItem]:
        """Fill the run's input ``stage``: the messages this turn starts with (already durable)."""
        ...

    def interrupted_batch(self, loop: RunLoop) -> tuple[list[ToolCall], list[ContextItem], Decided] | None:
        """A tool batch a crash cut off, to settle before the first inference (None: there is none)."""
        ...

    async def responded(self, loop: RunLoop, outputs: list[ContextItem]) -> None:
        """An inference finished: its blocks (assistant text, tool calls) joined the conversation."""
        ...

    async def batch_started(self, loop: RunLoop, calls: list[ToolCall]) -> None:
        """A tool batch is about to run (nothing of it has run yet)."""
        ...

    async def tool_settled(self, loop: RunLoop, index: int, result: ContextItem) -> None:
        """Call ``index`` of the running batch has its result (results may finish out of order)."""
        ...

    async def between_inferences(
        self, loop: RunLoop, after: list[StageRecording | str]
    ) -> list[StageRecording | str]:
        """A tool batch finished and the next inference is due; return the stages it follows."""
        ...

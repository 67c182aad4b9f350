"""Running one response's tool calls: in parallel, recorded as a fork/join batch, results in call order.

    inference -> tool batch -(fork)-> tool a | tool b -(join)-> next inference

Every failure of a call — an unknown tool, arguments that are not JSON or break the schema, a
refusal by the approval callback, an exception, a timeout, a return value with no text — becomes an
error result the model sees and can correct from; none of them ends the run.

A result longer than its bound (the tool's ``max_result_chars``, else the agent's
``max_tool_result_chars``) reaches the model cut (:func:`agent.tools.cut_result`); its tool stage
records ``result_cut`` and, before the result, a text item holding what was cut (up to
:data:`agent.tools.RECORDED_RESULT_CHARS` characters).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import inspect
import json
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from tracer import (
    ContextItem,
    EdgeKind,
    Item,
    ItemKind,
    RedactionPolicy,
    StageKind,
    StageRecording,
    StageStatus,
)

from ._events import ToolFinished, ToolStarted
from ._hooks import RunContext
from ._pause import Paused, pause_state
from .errors import (
    ToolArgumentsError,
    ToolNotFoundError,
    ToolRejectedError,
    ToolReportedError,
    ToolTimeoutError,
)
from .providers import ToolCall
from .tools import (
    RECORDED_RESULT_CHARS,
    Cut,
    PauseRun,
    PermissionDeniedError,
    SandboxError,
    Tool,
    ToolContext,
    ToolUseError,
    UnreadableResultError,
    cut_result,
    govern,
    message_of,
    result_text,
    storable,
)
from .tools._meta import USE_TOOL

if TYPE_CHECKING:
    from ._loop import Decided, RunLoop

#: The key of the text item a tool stage records, before its result, when the result was cut: the call id.
UNCUT_RESULT_OF = "uncut_result_of"

#: The tool stage whose tool is running, and the call it runs (None outside a tool). A tool that
#: starts work of its own — a sub-agent, a plan — records it under this stage.
_RUNNING_TOOL: contextvars.ContextVar[tuple[StageRecording, ContextItem] | None] = contextvars.ContextVar(
    "footprint_running_tool", default=None)


def running_tool() -> tuple[StageRecording, ContextItem] | None:
    """The stage of the tool call running in this task and the call item, or None outside a tool."""
    return _RUNNING_TOOL.get()


@contextlib.contextmanager
def running_under(stage: StageRecording, item: ContextItem) -> Iterator[None]:
    """Within the block, work started by a tool is recorded under ``stage`` (a plan step, say)."""
    token = _RUNNING_TOOL.set((stage, item))
    try:
        yield
    finally:
        _RUNNING_TOOL.reset(token)


async def run_batch(
    loop: RunLoop,
    ctx: RunContext,
    inference: StageRecording | str,
    calls: list[ToolCall],
    call_items: list[ContextItem],
    decided: Decided,
) -> list[StageRecording | str]:
    """Run one response's tool calls in parallel; their results join memory in call order.

    A cancelled batch still leaves a result for every call (finished ones keep theirs, the rest
    say they were cancelled), so the conversation stays valid for the next run.
    """
    assert loop.run is not None
    agent = loop.agent
    batch = loop.run.stage(StageKind.TOOL_BATCH, f"{len(calls)} tool call(s)", after=[inference])
    stages = [loop.run.stage(StageKind.TOOL, call.name, after=[batch], edge=EdgeKind.FORK, parent=batch)
              for call in calls]
    loop.tail = list(stages)
    results: list[ContextItem | None] = [None] * len(calls)
    if loop.driver is not None:
        await loop.driver.batch_started(loop, calls)
    if len(calls) == 1 or agent.sequential_tools:  # one call (the common case), or one after another
        if len(calls) > 1:
            batch.set(sequential=True)
        outcomes: list[Any] = []
        try:
            for i, (call, ci, stage) in enumerate(zip(calls, call_items, stages, strict=True)):
                try:
                    outcomes.append(await _one_tool(loop, ctx, call, ci, stage, decided, results, i))
                except Exception as exc:  # as gather(return_exceptions=True) would hand it back
                    outcomes.append(exc)
        except BaseException as exc:  # cancelled, or a tool's exception that is not ours to catch
            outcomes = [asyncio.CancelledError() if isinstance(exc, asyncio.CancelledError) else exc]
            for stage in stages:  # calls a sequential batch never reached (the run's end answers them)
                if not stage.closed:
                    stage.close(StageStatus.CANCELLED)
    else:
        try:
            outcomes = await asyncio.gather(
                *(_one_tool(loop, ctx, call, ci, stage, decided, results, i)
                  for i, (call, ci, stage) in enumerate(zip(calls, call_items, stages, strict=True))),
                return_exceptions=True,
            )
        except asyncio.CancelledError:
            outcomes = [asyncio.CancelledError()]
    if any(isinstance(o, asyncio.CancelledError) for o in outcomes):
        batch.close(StageStatus.CANCELLED)
        agent.memory.add(agent.conversation_id, *(r for r in results if r is not None))
        raise asyncio.CancelledError()
    failures = [o for o in outcomes if isinstance(o, BaseException) and not isinstance(o, PauseRun)]
    if failures:
        batch.close(StageStatus.ERROR, str(failures[0]))
        raise failures[0]
    loop.tool_calls += len(calls)
    pauses = [(call, o) for call, o in zip(calls, outcomes, strict=True) if isinstance(o, PauseRun)]
    if pauses:
        batch.set(paused=len(pauses))
        batch.close()
        raise Paused(pause_state(loop, calls, outcomes, pauses, stages))
    batch.close()
    agent.memory.add(agent.conversation_id, *outcomes)
    return list(stages)


async def _one_tool(
    loop: RunLoop,
    ctx: RunContext,
    call: ToolCall,
    call_item: ContextItem,
    stage: StageRecording,
    decided: Decided,
    results: list[ContextItem | None],
    index: int,
) -> ContextItem | PauseRun:
    stage.inputs([call_item])
    stage.set(call_id=call.id, arguments=call.arguments)
    started = time.perf_counter()
    is_error = False
    content: str | Cut
    known = decided.get(call.id)
    try:
        if known is not None:
            content, is_error = known
            stage.set(served_from="pause")
        else:
            with running_under(stage, call_item):
                content = await _execute(loop, ctx, call, stage, skip_approval=call.id in decided)
    except PauseRun as pause:
        stage.set(paused=True, question=pause.question, pause_kind=pause.kind)
        stage.close()
        return pause
    except asyncio.CancelledError as exc:
        if not _cancelled_from_outside():  # the tool's own: say, it awaited a future cancelled elsewhere
            is_error = True
            content = _error_text(call, exc)
            stage.set(error_type=type(exc).__name__)
        else:
            results[index] = stage.output(result_item(call.id, call.name, "Error: cancelled before it finished.",
                                                      True))
            stage.close(StageStatus.CANCELLED)
            raise
    except Exception as exc:
        is_error = True
        content = _error_text(call, exc)
        if loop.cut_off and isinstance(exc, ToolArgumentsError) and not _is_json(call.arguments):
            content += (" (your response was cut off at the output token limit while writing these arguments: "
                        "send shorter arguments, or fewer calls at once)")
        stage.set(error_type=type(exc).__name__)
    except BaseException as exc:  # not ours to catch (gevent's Timeout, pytest's outcomes): the run
        stage.set(error_type=type(exc).__name__)  # records it, then raises it
        stage.close(StageStatus.ERROR, f"{type(exc).__name__}: {message_of(exc)}")
        raise
    duration = (time.perf_counter() - started) * 1000
    content = _bounded(loop, call, stage, content, is_error)
    result = results[index] = stage.output(result_item(call.id, call.name, content, is_error))
    stage.set(is_error=is_error, duration_ms=round(duration, 3))
    stage.close(StageStatus.ERROR if is_error else StageStatus.OK)
    if loop.driver is not None:
        loop.settle()  # the session keeps the result only once its stage is durable
        await loop.driver.tool_settled(loop, index, result)
    await loop.hook("on_tool_end", ctx, call, content, is_error, duration)
    if loop.emit is not None:
        loop.emit_event(ToolFinished(call.id, call.name, content, is_error, duration))
    return result


async def _execute(
    loop: RunLoop, ctx: RunContext, call: ToolCall, stage: StageRecording, *, skip_approval: bool
) -> str | Cut:
    """Find, validate, approve and run one call; every failure is raised for the caller to turn into a result."""
    agent = loop.agent
    tool = agent.tools.get(call.name) or agent.meta.get(call.name)
    if tool is None:
        raise ToolNotFoundError(
            f"there is no tool named {call.name!r}; the tools you can call are: "
            f"{', '.join([*agent.meta, *agent.tools]) or 'none'}"
        )
    arguments = tool.parse_arguments(call.arguments)
    context = None
    if agent.permissions is not None or tool.takes_context:
        context = tool_context(loop, call, stage, confirmed=skip_approval)
    govern(agent.permissions, tool, arguments, context, confirmed=skip_approval)
    if agent.approve is not None and not skip_approval:
        verdict = agent.approve(call, tool)
        while inspect.isawaitable(verdict):  # a coroutine, a Future, any awaitable
            verdict = await verdict
        if verdict is not True:  # only True approves: a refusal that came back as "no" or None is one
            if verdict is not False:
                stage.set(approval_answer=type(verdict).__name__)
            raise ToolRejectedError(f"the call to {call.name} was not approved; do not retry it unchanged")
    progress = tool.progress_line(arguments) if tool.progress is not None else None
    await loop.hook("on_tool_start", ctx, call)
    if progress:
        await loop.hook("on_progress", ctx, progress)
    if loop.emit is not None:
        loop.emit_event(ToolStarted(call.id, call.name, call.arguments, progress))
    value = await tool.run(arguments, context)
    if isinstance(value, Cut):
        return value
    try:
        return result_text(value)
    except UnreadableResultError as exc:
        raise UnreadableResultError(f"{call.name}: {exc}") from None


def _bounded(loop: RunLoop, call: ToolCall, stage: StageRecording, content: str | Cut, is_error: bool) -> str:
    """``content`` as the model sees it: storable, and cut to its bound (what was cut is recorded)."""
    agent = loop.agent
    recorder = agent.recorder
    if isinstance(content, Cut):  # cut already (a replay serves a recorded cut)
        cut: Cut | None = content
    else:
        content = storable(content)
        tool: Tool | None = agent.tools.get(call.name) or agent.meta.get(call.name)
        if tool is not None and tool.name == USE_TOOL and tool.name in agent.meta:  # the bound of the tool it reached
            tool = agent.tools.get(str(stage.attributes.get("reached_tool", ""))) or tool
        bound = tool.max_result_chars if tool is not None and tool.max_result_chars is not None \
            else agent.max_tool_result_chars
        if bound is None or len(content) <= bound:
            return content
        policy: RedactionPolicy | None = recorder.redaction if recorder.enabled else None
        cut = cut_result(content, bound, policy)
        if cut is None:
            return content
        if not is_error:  # (an error's text is the framework's own: its size is recorded)
            kept = cut_result(content, RECORDED_RESULT_CHARS, policy)
            cut = dataclasses.replace(cut, uncut=content if kept is None else kept.text)
    assert cut is not None
    if cut.uncut is not None and recorder.enabled:
        stage.output(Item(ItemKind.TEXT, {"text": storable(cut.uncut), UNCUT_RESULT_OF: call.id}))
    stage.set(result_cut=cut.record())
    return storable(cut.text)


def tool_context(loop: RunLoop, call: ToolCall, stage: StageRecording, *, confirmed: bool) -> ToolContext:
    """The execution context of one call; what the tool records lands on its stage."""
    agent = loop.agent
    assert loop.run is not None
    return ToolContext(
        agent=agent.name, run_id=loop.run.id, session_id=loop.session, user_id=agent.user_id,
        workspace=agent.workspace, call_id=call.id, confirmed=confirmed, tools=agent.catalog,
        permissions=agent.permissions, _record=lambda attributes: stage.set(**attributes),
    )


def result_item(call_id: str, name: str, content: str, is_error: bool) -> Item:
    """A tool result item (its texts made storable: a lone surrogate would fail the store's write)."""
    return Item(ItemKind.TOOL_RESULT, {"call_id": storable(call_id), "name": storable(name),
                                       "content": storable(content), "is_error": is_error})


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _cancelled_from_outside() -> bool:
    """Whether the task running this has been asked to stop (the run's cancel, a caller's timeout)."""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


def _error_text(call: ToolCall, exc: BaseException) -> str:
    if isinstance(exc, ToolReportedError):
        return exc.content
    if isinstance(exc, ToolNotFoundError | ToolArgumentsError | ToolRejectedError | ToolTimeoutError
                  | PermissionDeniedError | ToolUseError | SandboxError | UnreadableResultError):
        return f"Error: {exc}"
    return f"Error: {call.name} failed: {type(exc).__name__}: {message_of(exc)}"

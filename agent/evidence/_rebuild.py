"""Rebuilding an agent from a recording, so the real loop (agent._loop.RunLoop) can run it again.

The rebuilt agent composes exactly the recorded system context (a composer and a fact store that
serve the recorded sections and facts), starts from the recorded conversation history (what the
window left out included), leaves out of each call what the recording's window left out (by
reference: :mod:`._window`), offers the recorded tool definitions and settings, and records the new
run as a fork of the old one. Its tools serve recorded results for calls the recording made (same
name and arguments), edited where a counterfactual says so; what happens to a new call is up to the
caller. Replay, counterfactual and blame all rebuild through here (:mod:`._rerun`).
"""

from __future__ import annotations

import asyncio
import copy
import re
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tracer import ContextItem, Item, ItemKind, Recorder, RunRecording, canonical_json

from .._agent import Agent, ModelSettings
from .._facts import Fact, FactStore
from .._memory import Conversation
from .._prompt import ComposedPrompt, PromptComposer, PromptContext, Section
from ..errors import ToolRejectedError
from ..providers import Provider
from ..tools import Cut, PauseRun, Tool
from ._recording import RecordedCall, RecordedRun, call_key
from ._window import RecordedWindowMemory
from .errors import EvidenceError

#: What a tool call that the recording did not make gets: a result text, or an exception to raise.
NewCall = Callable[[str, dict[str, Any]], Awaitable[str]]


class RecordedComposer(PromptComposer):
    """A composer that ignores the agent's configuration and serves the recorded system context."""

    def __init__(self, pieces: Sequence[ContextItem], dropped: Sequence[ContextItem] = ()) -> None:
        super().__init__()
        self.pieces = [_section(ci) for ci in pieces]
        self.dropped = [_section(ci) for ci in dropped]

    def compose(self, ctx: PromptContext) -> ComposedPrompt:
        """The recorded pieces, whatever ``ctx`` says."""
        return ComposedPrompt(list(self.pieces), list(self.dropped))


def _section(ci: ContextItem) -> Section:
    memory = ci.item.kind == ItemKind.MEMORY
    source = ci.origin.source or str(ci.item.body.get("key" if memory else "section", ""))
    return Section(ci.item, "memory" if memory else "prompt_section", source,
                   "user_profile" if memory else str(ci.item.body.get("section", source)))


class RecordedFacts(FactStore):
    """The memory facts a recorded run loaded, served back in the recorded order (read-only)."""

    def __init__(self, facts: Iterable[Item]) -> None:
        self._facts = [Fact(str(i.body.get("key", "")), str(i.body.get("text", ""))) for i in facts]

    async def facts(self, user_id: str) -> list[Fact]:
        """The recorded facts."""
        return list(self._facts)

    async def remember(self, user_id: str, fact: Fact) -> None:
        """Refused: a rebuilt run does not change memory."""
        raise EvidenceError("a replayed or counterfactual run does not write memory facts")

    async def forget(self, user_id: str, key: str) -> bool:
        """Refused: a rebuilt run does not change memory."""
        raise EvidenceError("a replayed or counterfactual run does not forget memory facts")


def _exception_type(name: str) -> type[Exception]:
    cached = _EXCEPTION_TYPES.get(name)
    if cached is None:
        cached = type(name, (Exception,), {"__module__": "agent.evidence.recorded"})
        _EXCEPTION_TYPES[name] = cached
    return cached


_EXCEPTION_TYPES: dict[str, type[Exception]] = {}
_FAILED = re.compile(r"^Error: (?P<tool>[\w\-]+) failed: (?P<type>[A-Za-z_]\w*): (?P<msg>.*)$", re.S)


def serve(call: RecordedCall) -> str | Cut:
    """Give back what the recorded call returned: its text, its error, or its pause.

    An error result is raised again as an exception the loop renders to the very same text. A
    result that reached the model cut is served as that cut, so the re-run records it as the run did.
    """
    if call.pause is not None:
        raise PauseRun(call.pause[0], kind=call.pause[1])
    content = call.content or ""
    if not call.is_error and call.cut is not None:
        try:
            return Cut(content, int(call.cut["chars"]), int(call.cut["left_out"]), int(call.cut["limit"]), call.uncut)
        except (KeyError, TypeError, ValueError):
            return content  # a result_cut this version did not write: the text as the model saw it
    if not call.is_error:
        return content
    failed = _FAILED.match(content)
    if failed and failed.group("tool") == call.name:
        raise _exception_type(failed.group("type"))(failed.group("msg"))
    # the loop shows these kinds of failure as "Error: <message>"
    raise ToolRejectedError(content.removeprefix("Error: "))


def serve_item(result: Item) -> str:
    """Give back an edited result: its content, or its error raised so the loop renders the same text."""
    content = result.body.get("content", "")
    text = content if isinstance(content, str) else canonical_json(content)
    if result.body.get("is_error"):
        raise ToolRejectedError(text.removeprefix("Error: "))
    return text


_PROTOTYPES: dict[tuple[str, bool], Tool] = {}


class ServedTools:
    """Tools with the recorded definitions; identical calls get the recorded results.

    A call the recording made (same name and arguments) is served its recorded result, in the
    order the recording made such calls (the last one repeats when they run out). Any other call is
    handed to ``new_call``; without one it is refused with an error result.
    """

    def __init__(self, recording: RecordedRun, new_call: NewCall | None = None,
                 durable: dict[str, bool] | None = None, *, results: dict[str, Item] | None = None,
                 refetch: dict[tuple[str, str], Item] | None = None) -> None:
        self.recording = recording
        self.queues = recording.results_by_call()
        self.new_call = new_call
        self.durable = durable or {}
        self.results = results or {}  # recorded result hash -> the edited result served instead
        self.refetch = refetch or {}  # call key -> the edited result of a call an earlier run made
        self.served: list[tuple[str, str]] = []  # (name, canonical arguments) served from the recording
        self.new: list[tuple[str, str]] = []  # calls handed to new_call

    def tools(self, definitions: Sequence[Item]) -> list[Tool]:
        """One tool per definition."""
        return [self._tool(d) for d in definitions]

    def _tool(self, definition: Item) -> Tool:
        name = str(definition.body["name"])

        async def execute(arguments: dict[str, Any]) -> str | Cut:
            return await self.call(name, arguments)

        durable = self.durable.get(name, False)
        key = (definition.hash, durable)
        prototype = _PROTOTYPES.get(key)
        if prototype is None:  # a Tool checks its schema when made: once per definition, not per re-run
            if len(_PROTOTYPES) > 4096:
                _PROTOTYPES.clear()
            prototype = _PROTOTYPES[key] = Tool(name, str(definition.body.get("description", "")),
                                                dict(definition.body.get("parameters") or {}), execute,
                                                durable=durable, timeout=None)
        served = copy.copy(prototype)
        served.execute = execute
        return served

    async def call(self, name: str, arguments: dict[str, Any]) -> str | Cut:
        """The result of one call: recorded when the recording made it, else whatever ``new_call`` decides."""
        key = call_key(name, arguments)
        queue = self.queues.get(key)
        if queue:
            recorded = queue.popleft() if len(queue) > 1 else queue[0]
            self.served.append(key)
            edited = self.results.get(recorded.result_hash)
            return serve(recorded) if edited is None else serve_item(edited)
        if key in self.refetch:  # an earlier run's call, whose result is edited: the same call gets the edit
            self.served.append(key)
            return serve_item(self.refetch[key])
        self.new.append(key)
        if self.new_call is None:
            raise ToolRejectedError(f"{name} with these arguments was not called in the recording, and new calls "
                                    f"are not executed here")
        return await self.new_call(name, arguments)


class ForkRecorder(Recorder):
    """Records the rebuilt run as a fork of the recorded one: its source run, stage, edit and labels."""

    def __init__(
        self, base: Recorder, *, source: RecordedRun, kind: str, stage: str | None = None,
        edit: dict[str, Any] | None = None, labels: Sequence[str] = (),
    ) -> None:
        super().__init__(base.store, durability=base.durability, redaction=base.redaction,
                         listeners=getattr(base, "listeners", ()), caches_of=base)
        self.source, self.kind, self.fork_stage, self.edit = source, kind, stage, edit
        self.labels = _unique([*source.data.run.labels, *labels, kind])

    def start_run(self, **kwargs: Any) -> RunRecording:
        """Open the fork's run row with where it came from."""
        kwargs.update(labels=self.labels, forked_from_run=self.source.run_id, forked_from_stage=self.fork_stage,
                      fork_edit=self.edit, attributes={**(kwargs.get("attributes") or {}), "fork": self.kind})
        return super().start_run(**kwargs)


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(v for v in values if v))


def settings_of(body: dict[str, Any]) -> ModelSettings:
    """The agent settings whose settings item is exactly ``body``."""
    rest = dict(body)
    settings = ModelSettings(model=str(rest.pop("model", "") or ""))
    for key in ("temperature", "max_tokens", "top_p", "seed"):
        if key in rest:
            setattr(settings, key, rest.pop(key))
    settings.extra = rest
    return settings


@dataclass
class AgentParts:
    """What a rebuilt agent is made of, each part already edited by a counterfactual when there is one."""

    system: list[ContextItem]
    system_dropped: list[ContextItem]
    facts: list[Item] | None
    history: list[ContextItem]
    tool_definitions: list[Item]
    settings: dict[str, Any]

    @classmethod
    def of(cls, recording: RecordedRun) -> AgentParts:
        """The parts exactly as recorded."""
        return cls(list(recording.system), list(recording.system_dropped),
                   None if recording.facts is None else list(recording.facts), list(recording.history),
                   list(recording.tool_definitions), dict(recording.settings))


def rebuild_agent(
    recording: RecordedRun,
    *,
    parts: AgentParts,
    provider: Provider,
    tools: ServedTools,
    recorder: Recorder,
    session_id: str,
    memory: RecordedWindowMemory,
    max_turns: int | None = None,
) -> Agent:
    """An agent that sends what the recording's agent sent, recording into ``recorder``."""
    conversation_id = f"{session_id}:{uuid.uuid4().hex[:8]}"
    memory.put(Conversation(conversation_id, None, messages=list(parts.history)))
    turns, tool_calls = len(recording.inferences), sum(1 for _ in recording.calls)
    limit_turns, limit_calls = max(50, turns), max(200, tool_calls)
    if recording.failure is not None:  # reproduce a limit the recorded run hit
        reason, message = recording.failure
        if reason == "max_turns":
            limit_turns = turns
        elif reason == "max_tool_calls":
            found = re.search(r"limit of (\d+) tool calls", message)
            limit_calls = int(found.group(1)) if found else tool_calls
    return Agent(
        recording.data.run.agent,
        provider=provider,
        model=settings_of(parts.settings),
        tools=tools.tools(parts.tool_definitions),
        memory=memory,
        conversation_id=conversation_id,
        session_id=session_id,
        facts=None if parts.facts is None else RecordedFacts(parts.facts),
        user_id=None if parts.facts is None else (recording.user_id or "recorded"),
        composer=RecordedComposer(parts.system, parts.system_dropped),
        recorder=recorder,
        max_turns=max_turns or limit_turns,
        max_tool_calls=limit_calls,
        max_tool_result_chars=None,  # recorded results come back as the model saw them: cut once, not again
    )


class Once:
    """Runs each distinct key's coroutine once, even when several callers ask at the same time."""

    def __init__(self) -> None:
        self.results: dict[Any, tuple[str | None, BaseException | None]] = {}
        self._locks: dict[Any, asyncio.Lock] = {}
        self.executed: deque[Any] = deque()

    async def get(self, key: Any, make: Callable[[], Awaitable[str]]) -> str:
        """The result for ``key`` (computed by ``make`` the first time; an exception is kept too)."""
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if key not in self.results:
                self.executed.append(key)
                try:
                    self.results[key] = (await make(), None)
                except Exception as exc:  # kept, so the call fails the same way every time
                    self.results[key] = (None, exc)
        value, error = self.results[key]
        if error is not None:
            raise error
        assert value is not None
        return value

"""What an orchestrated agent is made of, and what one execution of it leaves behind.

:class:`AgentConfig` holds the orchestrator's settings with the seed's defaults (10 iterations,
4096 tokens, temperature 0.7); :class:`ExecutionContext` is one execution: its messages, its tool
calls with timing and success, its status and answer; :class:`AgentStep` is what ``stream()`` yields.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from tracer import ContextItem, Recorder

from .._facts import FactStore
from ..providers import Provider, Usage
from ..tools import Tool, as_tools
from .errors import AgentConfigError

Status = Literal["running", "completed", "failed", "cancelled"]
#: what every config must set (the builder's build() checks the same)
REQUIRED = ("name", "system_prompt", "provider", "model")
StepType = Literal["thinking", "tool_call", "tool_result", "response", "error"]


@dataclass
class MemoryOptions:
    """What dynamic prompts draw on besides the base prompt: the user's facts and prompt sections."""

    facts: FactStore | None = None
    custom_instructions: Sequence[str] = ()
    workspace: str | None = None
    capabilities: Sequence[str] = ()
    autonomy: str | None = None
    clock: Callable[[], datetime] | None = None  # the time section; None: the wall clock


@dataclass
class AgentConfig:
    """An orchestrated agent's settings.

    ``tools`` carry their executors: :class:`agent.Tool` objects, or typed functions (each made a
    Tool, as ``Agent(tools=)`` makes them). With ``dynamic_prompts`` and a
    ``user_id``, every execution composes the system prompt with the user's facts, the custom
    instructions and the time (``memory_options``); without, the system prompt is used as written
    (with the tool summaries). ``recorder`` records every execution as a run.
    """

    name: str
    system_prompt: str
    provider: Provider
    model: str
    description: str = ""
    tools: list[Tool] = field(default_factory=list)
    max_iterations: int = 10
    max_tokens: int = 4096
    temperature: float = 0.7
    verbose: bool = False
    user_id: str | None = None
    memory_options: MemoryOptions = field(default_factory=MemoryOptions)
    dynamic_prompts: bool = False
    recorder: Recorder | None = None
    session_id: str | None = None

    def __post_init__(self) -> None:
        # what Agent(tools=) takes is taken here too (the builder and update_config(tools=...) too)
        self.tools = as_tools(self.tools, f"agent config {self.name or '(unnamed)'}")
        self.check()

    def check(self) -> None:
        """Raise :class:`AgentConfigError` naming every setting that is missing or out of range."""
        missing = [f for f in REQUIRED if (getattr(self, f) is None if f == "provider" else not getattr(self, f))]
        if missing:
            raise AgentConfigError(f"agent config {self.name or '(unnamed)'}: missing {', '.join(missing)}")
        problems = []
        if self.max_iterations < 1:
            problems.append(f"max_iterations must be at least 1, not {self.max_iterations}")
        if self.max_tokens < 1:
            problems.append(f"max_tokens must be at least 1, not {self.max_tokens}")
        if not 0 <= self.temperature <= 2:
            problems.append(f"temperature must be between 0 and 2, not {self.temperature}")
        names = [t.name for t in self.tools]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            problems.append(f"more than one tool named {', '.join(twice)}")
        if problems:
            raise AgentConfigError(f"agent config {self.name}: {'; '.join(problems)}")

    def updated(self, changes: dict[str, Any]) -> AgentConfig:
        """A copy with ``changes`` applied; an unknown setting is an :class:`AgentConfigError`."""
        known = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise AgentConfigError(f"agent config {self.name}: no setting named {', '.join(unknown)} "
                                   f"(the settings: {', '.join(sorted(known))})")
        return dataclasses.replace(self, **changes)


@dataclass
class ToolCallRecord:
    """One tool call of an execution: what was called, what came back, whether it worked, how long it took."""

    call_id: str
    name: str
    arguments: str
    result: str = ""
    success: bool = True
    started_at: float = 0.0
    duration_ms: float = 0.0
    iteration: int = 0


@dataclass
class ExecutionContext:
    """One execution of an orchestrated agent, updated as it runs (``current_execution`` while it does)."""

    id: str
    agent: str
    run_id: str | None = None
    iteration: int = 0
    messages: list[ContextItem] = field(default_factory=list)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    status: Status = "running"
    started_at: float = field(default_factory=time.time)
    ended_at: float | None = None
    response: str = ""
    error: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)

    @property
    def ok(self) -> bool:
        """True when the execution completed with a response."""
        return self.status == "completed"


@dataclass(frozen=True)
class AgentStep:
    """One step of a streamed execution.

    ``thinking``: the model's text on a turn that also calls tools; ``tool_call`` / ``tool_result``:
    a call starting and its result (``tool`` holds the record); ``response``: the answer; ``error``:
    the execution failed or was cancelled. The last step (``response`` or ``error``) holds the context.
    """

    type: StepType
    content: str = ""
    iteration: int = 0
    tool: ToolCallRecord | None = None
    context: ExecutionContext | None = None

"""What `Agent.stream()` yields while a run goes on, and what a run returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .providers import Usage


@dataclass(frozen=True)
class TextDeltaEvent:
    """A piece of the assistant's text as it streams."""

    text: str
    turn: int


@dataclass(frozen=True)
class ToolStarted:
    """A tool call is about to run (``progress`` is its progress line, if it has one)."""

    call_id: str
    name: str
    arguments: str
    progress: str | None


@dataclass(frozen=True)
class ToolFinished:
    """A tool call finished; ``is_error`` when its result is an error the model will see."""

    call_id: str
    name: str
    result: str
    is_error: bool
    duration_ms: float


@dataclass(frozen=True)
class InferenceFinished:
    """One model call finished."""

    turn: int
    text: str
    tool_calls: int
    usage: Usage


@dataclass
class PauseState:
    """Everything needed to continue a paused run where it stopped (JSON-serialisable via to_dict)."""

    run_id: str
    conversation_id: str
    question: str
    pending: list[dict[str, Any]]  # [{"call": {id,name,arguments}, "kind": "answer"|"approval", "question"}]
    results: dict[str, dict[str, Any]]  # call id -> {"content", "is_error"} of calls that finished
    calls: list[dict[str, Any]]  # the whole batch, in call order
    turns: int
    tool_calls: int
    usage: dict[str, int]
    next_seq: int
    last_stage: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form."""
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PauseState:
        """From :meth:`to_dict`'s form; a ValueError names what is missing."""
        try:
            return cls(**{k: data[k] for k in cls.__dataclass_fields__})
        except KeyError as exc:
            raise ValueError(f"paused run state lacks {exc.args[0]!r}") from exc


@dataclass
class RunResult:
    """How a run ended: the answer, the status, the recorded run's id, usage and cost."""

    answer: str
    status: str  # answered | awaiting | failed | cancelled
    run_id: str
    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0
    turns: int = 0
    tool_calls: int = 0
    error: str | None = None
    stop_reason: str | None = None
    question: str | None = None
    pause: PauseState | None = None
    labels: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        """True when the run answered."""
        return self.status == "answered"


@dataclass(frozen=True)
class RunFinished:
    """The last event of a stream."""

    result: RunResult


AgentEvent = TextDeltaEvent | ToolStarted | ToolFinished | InferenceFinished | RunFinished

"""Errors of tool governance; each becomes an error tool result the model sees, never a crash.

    FootprintError (tracer.errors)
    └── AgentError (agent.errors)
        └── ToolError
            ├── PermissionDeniedError      a permission rule refused the call; ``decision`` names it
            │   └── ToolRateLimitedError   a rate limit refused it; ``decision.retry_after`` says when
            ├── ToolUseError               use_tool was called wrongly; the message holds the tool's help
            ├── UnreadableResultError      the tool returned a value with no text (its __str__ and __repr__ raise)
            └── SandboxError               the code sandbox could not run the code (or is not installed)
                └── CodeValidationError    the code was refused before it ran (length, dangerous pattern)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ToolError

if TYPE_CHECKING:
    from ._permissions import PermissionDecision


class PermissionDeniedError(ToolError):
    """A permission rule refused the call."""

    def __init__(self, decision: PermissionDecision) -> None:
        super().__init__(f"permission denied for {decision.tool} (rule: {decision.rule}): {decision.reason}")
        self.decision = decision


class ToolRateLimitedError(PermissionDeniedError):
    """The user called the tool (or tools) too often in the last minute."""


class ToolUseError(ToolError):
    """A meta-tool call could not reach its tool; the message says why and how to call it."""


class UnreadableResultError(ToolError):
    """A tool returned a value that has no text: its ``__str__`` and ``__repr__`` both raised."""


class SandboxError(ToolError):
    """The sandbox could not run the code."""


class CodeValidationError(SandboxError):
    """The code was refused before it ran."""

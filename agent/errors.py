"""Errors raised by the agent framework.

    FootprintError (tracer.errors)
    └── AgentError
        ├── UserError                    footprint was misused (bad config, a busy agent, ...)
        │   ├── AgentBusyError           run() on an instance that is already running
        │   └── PersonalMemoryError      a personal memory record is invalid (``field`` names what)
        ├── ToolError                    a tool failed (becomes an error tool result, never a crash)
        │   ├── ToolNotFoundError
        │   ├── ToolArgumentsError       invalid JSON or a schema violation
        │   ├── ToolRejectedError        the approval callback said no
        │   ├── ToolTimeoutError
        │   └── ToolReportedError        a tool's own result says it failed (shown to the model as is)
        ├── ProviderError                a model provider failed; ``retryable`` says whether to retry
        │   ├── ProviderAuthError        bad or missing key (never retried)
        │   ├── ProviderBadRequestError  the request was invalid (never retried)
        │   ├── ProviderRateLimitError   429; ``retry_after`` seconds when the server said
        │   ├── ProviderServerError      5xx
        │   ├── ProviderTimeoutError
        │   ├── ProviderConnectionError  network errors
        │   ├── ProviderResponseError    the response could not be understood
        │   ├── ProviderCancelledError   the request was cancelled by ``cancel()`` (never falls back)
        │   ├── NoRouteError             no provider of a router meets the routing criteria
        │   └── RealModelBlockedError    a real model request while real requests are blocked (tests)
        └── ReplayMismatchError          a replayed request differs from the recording
"""

from __future__ import annotations

from tracer.errors import FootprintError


class AgentError(FootprintError):
    """An error of the agent framework."""


class UserError(AgentError):
    """The framework was used in a way it does not support; the message says how to fix it."""


class AgentBusyError(UserError):
    """A second run was started on an agent instance that is still running."""


class PersonalMemoryError(UserError):
    """A personal memory record is invalid; ``field`` names the field that is wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class ToolError(AgentError):
    """A tool call failed; the loop turns it into an error result the model can see."""


class ToolNotFoundError(ToolError):
    """The model called a tool that is not offered."""


class ToolArgumentsError(ToolError):
    """The tool call's arguments are not valid JSON or do not match the tool's schema."""


class ToolRejectedError(ToolError):
    """The approval callback rejected the call."""


class ToolTimeoutError(ToolError):
    """The tool did not finish in time."""


class ToolExitedError(ToolError):
    """A tool raised SystemExit (``sys.exit``: argparse on bad input, a command line wrapped as a
    tool): that call failed, not the process."""

    def __init__(self, exc: BaseException) -> None:
        code = exc.code if isinstance(exc, SystemExit) else None
        super().__init__(f"it called sys.exit({code!r})" if isinstance(exc, SystemExit)
                         else f"it raised {type(exc).__name__}")


class ToolReportedError(ToolError):
    """A tool finished, but its result is an error; ``content`` is exactly what the model sees."""

    def __init__(self, content: str) -> None:
        super().__init__(content)
        self.content = content


class ProviderError(AgentError):
    """A model provider failed."""

    retryable: bool = False

    def __init__(self, message: str, *, provider: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.provider = provider
        self.status = status


class ProviderAuthError(ProviderError):
    """Authentication failed (bad or missing key)."""


class ProviderBadRequestError(ProviderError):
    """The provider rejected the request as invalid."""


class ProviderRateLimitError(ProviderError):
    """Too many requests (429)."""

    retryable = True

    def __init__(
        self, message: str, *, provider: str = "", status: int | None = 429, retry_after: float | None = None
    ) -> None:
        super().__init__(message, provider=provider, status=status)
        self.retry_after = retry_after


class ProviderServerError(ProviderError):
    """The provider failed on its side (5xx)."""

    retryable = True


class ProviderTimeoutError(ProviderError):
    """The request timed out."""

    retryable = True


class ProviderConnectionError(ProviderError):
    """The provider could not be reached."""

    retryable = True


class ProviderResponseError(ProviderError):
    """The provider's response could not be understood."""


class ProviderCancelledError(ProviderError):
    """The request was cancelled through the provider's ``cancel()``; no other provider is tried."""


class NoRouteError(ProviderError):
    """No provider of a router meets the routing criteria (the message lists why each was refused)."""


class RealModelBlockedError(ProviderError):
    """A request to a real model was made while real model requests are blocked (under pytest)."""


class ReplayMismatchError(AgentError):
    """A replayed run made a request that is not in the recording."""

    def __init__(self, message: str, *, stage: str | None = None, difference: str = "") -> None:
        super().__init__(message)
        self.stage = stage
        self.difference = difference

"""A chain of providers tried in order: when one is down, the next one answers.

Falling back only helps when the failure is the provider's, not the request's. A timeout, a rate
limit, a 5xx, a dropped connection or an unreadable response may well not happen at the next
provider; a rejected key, an invalid request or a blocked real-model call would fail everywhere (or
must not be papered over), so those are raised at once.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable, Sequence

from ..errors import (
    ProviderAuthError,
    ProviderBadRequestError,
    ProviderError,
    RealModelBlockedError,
    UserError,
)
from ._base import ModelRequest, ModelResponse, Provider, StreamEvent

#: Failures that would repeat at every provider, or that a fallback must not hide.
_FINAL_ERRORS: tuple[type[ProviderError], ...] = (
    ProviderAuthError,
    ProviderBadRequestError,
    RealModelBlockedError,
)

FallbackHook = Callable[[Provider, ProviderError], None]


def falls_back(error: BaseException) -> bool:
    """True when ``error`` is worth trying the next provider for.

    Provider failures do, except authentication, invalid requests and blocked real-model calls.
    Anything that is not a :class:`ProviderError` is a bug, not an outage, and does not.
    """
    return isinstance(error, ProviderError) and not isinstance(error, _FINAL_ERRORS)


class FallbackProvider(Provider):
    """Tries each provider in order and returns the first answer.

    When every provider fails, the last provider's error is raised (same type, same ``status``)
    with a message listing each provider's failure; ``errors`` on it holds them all. A stream falls
    back only while nothing has been yielded. ``on_fallback(provider, error)`` is called each time a
    provider's failure hands the request to the next one.
    """

    def __init__(self, providers: Sequence[Provider], *, on_fallback: FallbackHook | None = None) -> None:
        if not providers:
            raise UserError("FallbackProvider needs at least one provider to try")
        self.providers: tuple[Provider, ...] = tuple(providers)
        self.on_fallback = on_fallback
        self.name = f"fallback({','.join(provider.name for provider in self.providers)})"
        self.real = any(provider.real for provider in self.providers)

    def __repr__(self) -> str:
        return f"FallbackProvider({list(self.providers)!r})"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The first provider's answer that did not fail over."""
        failures: list[tuple[Provider, ProviderError]] = []
        for provider in self.providers:
            try:
                return await provider.complete(request)
            except ProviderError as error:
                self._failed(provider, error, failures)
        raise self._all_failed(failures)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream from the first provider that works; once an event is out, a failure is final."""
        failures: list[tuple[Provider, ProviderError]] = []
        for provider in self.providers:
            emitted = False
            try:
                async for event in provider.stream(request):
                    emitted = True
                    yield event
                return
            except ProviderError as error:
                if emitted:
                    raise
                self._failed(provider, error, failures)
        raise self._all_failed(failures)

    def count_tokens(self, request: ModelRequest) -> int:
        """The first provider's estimate (the one that will be tried first)."""
        return self.providers[0].count_tokens(request)

    async def list_models(self) -> list[str]:
        """Every provider's models, in chain order, without duplicates; a provider that is down is skipped."""
        models: dict[str, None] = {}
        for provider in self.providers:
            try:
                found = await provider.list_models()
            except ProviderError as error:
                if not falls_back(error):
                    raise
                continue
            models.update(dict.fromkeys(found))
        return list(models)

    def _failed(
        self, provider: Provider, error: ProviderError, failures: list[tuple[Provider, ProviderError]]
    ) -> None:
        if not falls_back(error):
            raise error
        failures.append((provider, error))
        if self.on_fallback is not None and len(failures) < len(self.providers):
            self.on_fallback(provider, error)

    def _all_failed(self, failures: list[tuple[Provider, ProviderError]]) -> ProviderError:
        summary = "; ".join(
            f"{number}. {provider.name}: {error}" for number, (provider, error) in enumerate(failures, 1)
        )
        last = failures[-1][1]
        # A copy keeps the last error's type and attributes (status, retry_after) for callers that
        # branch on them, while the message tells the whole story.
        combined = copy.copy(last)
        combined.args = (f"{self.name}: all {len(failures)} providers failed — {summary}",)
        combined.errors = [error for _, error in failures]  # type: ignore[attr-defined]
        combined.__cause__ = last
        return combined

"""A chain of providers tried in order: when one is down, the next one answers.

Falling back only helps when the failure is the provider's, not the request's. A timeout, a rate
limit, a 5xx, a dropped connection, an unreadable response — and any error nobody classified —
may well not happen at the next provider, so those hand the request on. A rejected key, an
invalid request, a blocked real-model call or a request cancelled through :meth:`cancel` would
fail everywhere (or must not be papered over), so those are raised at once. A provider that is not
ready (:meth:`Provider.is_ready`) is skipped. Every provider tried is an :class:`Attempt` on the
response (and on the error when all fail), which the agent's loop records on the inference stage.

Each provider is asked for its own model (:attr:`Provider.configured_model`): a chain of
``OpenAIProvider("gpt-4o-mini")`` and ``OpenAIProvider("llama3.1")`` asks the first for gpt-4o-mini
and the second for llama3.1, whatever the agent names. The agent's model (``Agent(model=...)``)
goes to the providers with no model of their own; a router also routes on it. Each attempt records
the model it asked for.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any

from ..errors import (
    ProviderAuthError,
    ProviderBadRequestError,
    ProviderCancelledError,
    ProviderError,
    RealModelBlockedError,
    UserError,
)
from ._base import Attempt, ModelRequest, ModelResponse, Provider, ResponseDone, StreamEvent

#: Failures that would repeat at every provider, or that a fallback must not hide.
_FINAL_ERRORS: tuple[type[ProviderError], ...] = (
    ProviderAuthError,
    ProviderBadRequestError,
    ProviderCancelledError,
    RealModelBlockedError,
)

FallbackHook = Callable[[Provider, Exception], None]


def falls_back(error: BaseException) -> bool:
    """True when ``error`` is worth trying the next provider for.

    Every failure does — timeouts, rate limits, server and network errors, and errors nobody
    classified — except authentication, invalid requests, cancellation and blocked real-model calls.
    A task cancellation (``asyncio.CancelledError``) is not a failure and never falls back.
    """
    return isinstance(error, Exception) and not isinstance(error, _FINAL_ERRORS)


def request_for(provider: Provider, request: ModelRequest, wrapper: str) -> ModelRequest:
    """``request`` as a chain or router (named ``wrapper``) hands it to ``provider``: asking for the
    provider's own model if it has one, else for the model the agent asked for."""
    model = provider.configured_model or request.requested_model
    if not model or model == request.model:
        return request
    return request.with_model(model, f"{wrapper}:{provider.name}")


def models_asked(providers: Iterable[Provider], requested: str) -> str:
    """The one model ``providers`` would each be asked for when the agent names ``requested``, or ""
    when they would be asked for different ones."""
    models = {provider.configured_model or provider.model_for(requested) for provider in providers}
    return models.pop() if len(models) == 1 else ""


def attempt_of(provider: Provider, error: Exception | None, started: float, *, fell_back: bool = False,
               model: str = "") -> Attempt:
    """The :class:`Attempt` for one try of ``provider`` asking for ``model`` (``error`` None: it answered)."""
    seconds = time.perf_counter() - started
    if error is None:
        return Attempt(provider.name, "answered", provider.type, seconds=seconds, model=model)
    outcome = "cancelled" if isinstance(error, ProviderCancelledError) else "failed"
    return Attempt(provider.name, outcome, provider.type, str(error) or type(error).__name__,
                   type(error).__name__, fell_back, seconds, model)


def all_failed(name: str, failures: list[tuple[Provider, Exception]], attempts: list[Attempt]) -> ProviderError:
    """The error raised when every provider failed: the last one's type, every failure in the message.

    A copy keeps the last error's type and attributes (``status``, ``retry_after``) for callers
    that branch on them; an unclassified last error becomes a plain :class:`ProviderError`.
    ``errors`` holds each failure and ``attempts`` each try.
    """
    summary = "; ".join(
        f"{number}. {provider.name}: {type(error).__name__ + ': ' if not isinstance(error, ProviderError) else ''}"
        f"{error}"
        for number, (provider, error) in enumerate(failures, 1)
    )
    message = f"{name}: all {len(failures)} providers failed — {summary}"
    last = failures[-1][1] if failures else None
    combined: Any
    if isinstance(last, ProviderError):
        combined = copy.copy(last)
        combined.args = (message,)
    else:
        combined = ProviderError(message or f"{name}: no provider is ready", provider=name)
    combined.errors = [error for _, error in failures]
    combined.attempts = list(attempts)
    combined.__cause__ = last
    return combined  # type: ignore[no-any-return]


def not_ready(name: str, attempts: list[Attempt]) -> ProviderError:
    """The error when no provider of ``name`` was ready to try."""
    error = ProviderError(f"{name}: no provider is ready ({', '.join(a.provider for a in attempts)} skipped)",
                          provider=name)
    error.attempts = list(attempts)  # type: ignore[attr-defined]
    return error


class FallbackProvider(Provider):
    """Tries each provider in order and returns the first answer.

    When every provider fails, the last provider's error is raised (same type, same ``status``)
    with a message listing each provider's failure; ``errors`` and ``attempts`` on it hold them
    all. A stream falls back only while nothing has been yielded. ``on_fallback(provider, error)``
    is called each time a provider's failure hands the request to the next one.
    :attr:`current_provider` is the provider being tried now (or the last one that answered), and
    :meth:`cancel` stops the request in flight without trying another provider. Each provider is
    asked for its own model, the agent's going to those with none (see the module's docstring).
    """

    type = "fallback"

    def __init__(self, providers: Sequence[Provider], *, on_fallback: FallbackHook | None = None) -> None:
        if not providers:
            raise UserError("FallbackProvider needs at least one provider to try")
        self.providers: tuple[Provider, ...] = tuple(providers)
        self.on_fallback = on_fallback
        self.name = f"fallback({','.join(provider.name for provider in self.providers)})"
        self.real = any(provider.real for provider in self.providers)
        self.current_provider: Provider = self.providers[0]
        self._inflight: set[asyncio.Task[ModelResponse]] = set()
        self._cancelled = 0  # bumped by cancel(): requests started before it end cancelled

    def __repr__(self) -> str:
        return f"FallbackProvider({list(self.providers)!r})"

    def is_ready(self) -> bool:
        """True when at least one provider of the chain is ready."""
        return any(provider.is_ready() for provider in self.providers)

    @property
    def configured_model(self) -> str:
        """None (""): a chain has no model of its own; each of its providers asks for its own."""
        return ""

    def model_for(self, requested: str) -> str:
        """The model every provider of the chain would be asked for, or "" when they differ."""
        return models_asked(self.providers, requested)

    def cancel(self) -> bool:
        """Cancel every request in flight; each raises :class:`ProviderCancelledError` (no fallback).

        True when a request was in flight. A stream stops at its next event.
        """
        self._cancelled += 1
        running = [task for task in self._inflight if not task.done()]
        for task in running:
            task.cancel()
        return bool(running)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The first provider's answer that did not fail over, with every attempt on it."""
        failures: list[tuple[Provider, Exception]] = []
        attempts: list[Attempt] = []
        generation = self._cancelled
        for provider in self.providers:
            if not provider.is_ready():
                attempts.append(Attempt(provider.name, "skipped", provider.type, "not ready", "NotReady", True))
                continue
            self.current_provider = provider
            sent = request_for(provider, request, self.type)
            model = provider.model_for(sent.model)
            started = time.perf_counter()
            try:
                response = await self._attempt(provider, sent, generation)
            except Exception as error:
                self._failed(provider, error, started, failures, attempts, model)
                continue
            attempts.append(attempt_of(provider, None, started, model=model))
            return dataclasses.replace(response, attempts=(*response.attempts, *attempts))
        raise all_failed(self.name, failures, attempts) if failures else not_ready(self.name, attempts)

    async def _attempt(self, provider: Provider, request: ModelRequest, generation: int) -> ModelResponse:
        if generation != self._cancelled:
            raise ProviderCancelledError(f"{self.name}: the request was cancelled", provider=provider.name)
        # the call runs as a task of its own so cancel() can stop it without cancelling our caller
        task = asyncio.ensure_future(provider.complete(request))
        self._inflight.add(task)
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if generation != self._cancelled and (current is None or not current.cancelling()):
                raise ProviderCancelledError(f"{self.name}: the request to {provider.name} was cancelled",
                                             provider=provider.name) from None
            raise
        finally:
            self._inflight.discard(task)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream from the first provider that works; once an event is out, a failure is final."""
        failures: list[tuple[Provider, Exception]] = []
        attempts: list[Attempt] = []
        generation = self._cancelled
        for provider in self.providers:
            if not provider.is_ready():
                attempts.append(Attempt(provider.name, "skipped", provider.type, "not ready", "NotReady", True))
                continue
            self.current_provider = provider
            sent = request_for(provider, request, self.type)
            model = provider.model_for(sent.model)
            emitted = False
            started = time.perf_counter()
            try:
                async for event in provider.stream(sent):
                    if generation != self._cancelled:
                        raise ProviderCancelledError(f"{self.name}: the stream from {provider.name} was cancelled",
                                                     provider=provider.name)
                    emitted = True
                    if isinstance(event, ResponseDone):
                        attempts.append(attempt_of(provider, None, started, model=model))
                        response = event.response
                        event = ResponseDone(dataclasses.replace(response, attempts=(*response.attempts, *attempts)))
                    yield event
                return
            except Exception as error:
                if emitted:
                    raise
                self._failed(provider, error, started, failures, attempts, model)
        raise all_failed(self.name, failures, attempts) if failures else not_ready(self.name, attempts)

    def count_tokens(self, request: ModelRequest) -> int:
        """The first provider's estimate (the one that will be tried first)."""
        first = self.providers[0]
        return first.count_tokens(request_for(first, request, self.type))

    async def list_models(self) -> list[str]:
        """Every provider's models, in chain order, without duplicates; a provider that is down is skipped."""
        models: dict[str, None] = {}
        for provider in self.providers:
            try:
                found = await provider.list_models()
            except Exception as error:
                if not falls_back(error):
                    raise
                continue
            models.update(dict.fromkeys(found))
        return list(models)

    def _failed(
        self, provider: Provider, error: Exception, started: float, failures: list[tuple[Provider, Exception]],
        attempts: list[Attempt], model: str,
    ) -> None:
        moves_on = falls_back(error)
        attempts.append(attempt_of(provider, error, started, fell_back=moves_on, model=model))
        if not moves_on:
            error.attempts = list(attempts)  # type: ignore[attr-defined]
            raise error
        failures.append((provider, error))
        if self.on_fallback is not None and len(failures) < len(self.providers):
            self.on_fallback(provider, error)

"""OpenAI Chat Completions through the official ``openai`` SDK — OpenAI itself or any compatible server.

Any server that speaks the Chat Completions wire format works: point ``base_url`` (or
``OPENAI_BASE_URL``) at Ollama, vLLM or llama.cpp. The SDK's own retries are switched off; this
module retries instead, so that every retry is visible (``on_retry``), its delays are testable
(``sleep``, ``jitter``) and the error that finally surfaces is one of ours
(:mod:`agent.errors`), naming the provider, the model and the HTTP status.
"""

from __future__ import annotations

import asyncio
import email.utils
import ipaddress
import json
import math
import os
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote, urlsplit, urlunsplit

from tracer import RedactionPolicy

from ..errors import (
    ProviderAuthError,
    ProviderBadRequestError,
    ProviderConnectionError,
    ProviderError,
    ProviderRateLimitError,
    ProviderResponseError,
    ProviderServerError,
    ProviderTimeoutError,
)
from ._base import (
    ModelRequest,
    ModelResponse,
    Provider,
    ResponseDone,
    StreamEvent,
    TextDelta,
    check_real_model_allowed,
)
from ._openai_wire import StreamAssembly, read_completion, shorten

if TYPE_CHECKING:  # the SDK takes ~0.8 s to import: done when a provider is first made
    import openai

DEFAULT_MODEL = "gpt-4o-mini"
OPENAI_BASE_URL = "https://api.openai.com/v1"

#: Settings keys sent to Chat Completions. Settings items may carry other keys meant for other
#: layers (a context window, a cost table); sending those would make the server reject the request.
CHAT_SETTINGS = frozenset({
    "frequency_penalty", "logit_bias", "max_completion_tokens", "max_tokens", "metadata", "parallel_tool_calls",
    "presence_penalty", "reasoning_effort", "response_format", "seed", "service_tier", "stop", "temperature",
    "tool_choice", "top_p", "user",
})
#: Settings that are invalid without tools, dropped when a request offers none.
_TOOL_SETTINGS = frozenset({"tool_choice", "parallel_tool_calls"})

#: What masks a URL's credentials: the recorder's default policy (the one MCPConnection masks its
#: messages with), and, in a URL's query, any parameter whose name ends in ``key`` (``?key=...``).
_CREDENTIALS = RedactionPolicy()
_QUERY_CREDENTIALS = RedactionPolicy.with_extra(keys=("key",))
MASK = "[REDACTED]"

Sleep = Callable[[float], Awaitable[None]]
RetryHook = Callable[[int, float, ProviderError], None]
_T = TypeVar("_T")


def full_jitter(cap: float) -> float:
    """A delay drawn uniformly from ``[0, cap]`` ("full jitter": spreads out clients that failed together)."""
    return random.uniform(0.0, cap)


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds to wait according to ``Retry-After`` (seconds or an HTTP-date) or ``retry-after-ms``.

    Returns None when the headers say nothing usable; a date in the past means 0.
    """
    if headers is None:
        return None
    for name, unit in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            seconds = float(headers.get(name) or "nan") * unit
        except ValueError:
            continue
        if math.isfinite(seconds) and seconds >= 0:
            return seconds
    try:
        when = email.utils.parsedate_to_datetime(headers.get("retry-after") or "")
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # not an RFC 9110 date (those are GMT)
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def masked_url(url: str) -> str:
    """``url`` as a repr or an error message shows it, its credentials masked: the password of its
    user info (or the whole user info when it is one word: a token given as the user), the value of
    each query parameter the redaction policy calls sensitive (``?api_key=...``, ``?token=...``,
    ``?key=...``), and whatever else the policy's patterns find (an ``sk-...`` key in the path)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return _CREDENTIALS.text(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        netloc = f"{user}:{MASK}@{host}" if colon else f"{MASK}@{host}"
    query = "&".join(_masked_parameter(pair) for pair in parts.query.split("&")) if parts.query else ""
    return _CREDENTIALS.text(urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment)))


def _masked_parameter(pair: str) -> str:
    name, equals, value = pair.partition("=")
    if not equals:
        return pair
    key = unquote(name.replace("+", " "))
    return f"{name}={MASK}" if _QUERY_CREDENTIALS.value({key: value}) != {key: value} else pair


def is_loopback_url(url: str) -> bool:
    """True when ``url`` points at this machine (127.0.0.0/8, ::1 or localhost)."""
    host = urlsplit(url).hostname
    if host is None:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class OpenAIProvider(Provider):
    """Chat Completions on OpenAI or any OpenAI-compatible server, with our own retry loop.

    ``api_key`` and ``base_url`` default to ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``. A server on
    this machine needs no key and is not treated as a real (networked) model. Retries: up to
    ``max_retries`` on 429, 5xx, timeouts and connection errors, waiting what ``Retry-After`` says or
    else ``jitter(min(backoff_max, backoff_base * 2**attempt))``; a ``Retry-After`` longer than
    ``max_retry_after`` is not waited for — the rate-limit error is raised with ``retry_after`` set, so
    a :class:`FallbackProvider` can move on. Authentication and validation errors are never retried.

    ``model`` is the model asked when the request names none (``gpt-4o-mini`` when not given). Given,
    it is this provider's own model: in a :class:`FallbackProvider` or :class:`ProviderRouter` it
    is asked whatever the agent names (see :attr:`configured_model`). Its repr and its errors show
    ``base_url`` with its credentials masked (:func:`masked_url`).

    ``timeout`` (seconds) is the SDK's: how long the server may go without sending anything, on
    connect and on each read, not a bound on the whole call. A streamed answer, or a server that
    keeps a slow non-streamed one alive with whitespace (as some gateways do), may take longer; to
    bound a whole turn, cancel it (``agent.cancel()``, or a timeout around ``agent.run``).
    """

    name = "openai"

    def __init__(
        self,
        model: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff_base: float = 0.5,
        backoff_max: float = 20.0,
        max_retry_after: float = 60.0,
        client: openai.AsyncOpenAI | None = None,
        sleep: Sleep = asyncio.sleep,
        jitter: Callable[[float], float] = full_jitter,
        on_retry: RetryHook | None = None,
    ) -> None:
        self.model = model or DEFAULT_MODEL
        self._model_given = bool(model)
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.max_retry_after = max_retry_after
        self._sleep = sleep
        self._jitter = jitter
        self.on_retry = on_retry
        if client is not None:
            self._client = client
            self._owns_client = False
        else:
            url = base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL
            key = api_key or os.environ.get("OPENAI_API_KEY")
            if not key:
                if urlsplit(url).hostname == urlsplit(OPENAI_BASE_URL).hostname:
                    raise ProviderAuthError(
                        "openai: no API key — pass api_key= or set OPENAI_API_KEY "
                        "(or set OPENAI_BASE_URL to a local OpenAI-compatible server)",
                        provider=self.name,
                    )
                key = "unused"  # local servers ignore the key, but the SDK insists on one
            import openai

            # max_retries=0: our loop retries, so each attempt is observable and its delay testable.
            self._client = openai.AsyncOpenAI(api_key=key, base_url=url, timeout=timeout, max_retries=0)
            self._owns_client = True
        self.base_url = str(self._client.base_url).rstrip("/")
        self._shown_url = masked_url(self.base_url)  # what reprs and errors say: no credentials
        #: A loopback server is not the network: it stays allowed while real models are blocked.
        self.real = not is_loopback_url(self.base_url)
        self.type = "openai" if self.real else "local"
        self._closed = False

    def __repr__(self) -> str:
        return f"OpenAIProvider(model={self.model!r}, base_url={self._shown_url!r})"

    @property
    def configured_model(self) -> str:
        """The model this provider was given (or later set to); "" when it only has the default."""
        return self.model if self._model_given or self.model != DEFAULT_MODEL else ""

    def is_ready(self) -> bool:
        """True until :meth:`aclose` (a key, or a local server, was found when it was made)."""
        return not self._closed

    async def aclose(self) -> None:
        """Close the HTTP client (only when this provider created it); the provider is no longer ready."""
        self._closed = True
        if self._owns_client:
            await self._client.close()

    # -- requests -----------------------------------------------------------------------------

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """One Chat Completions call, retried on transient failures."""
        model = request.model or self.model
        kwargs = self._chat_arguments(request, model)
        self._guard()

        async def attempt() -> ModelResponse:
            completion = await self._client.chat.completions.create(**kwargs)
            return self._response(completion, model)

        return await self._with_retries(model, attempt)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream one call: text deltas, then the whole response with tool-call deltas assembled.

        A failure is retried like :meth:`complete` only while no text has been yielded; after
        that a retry would repeat text the caller already has.
        """
        model = request.model or self.model
        kwargs = self._chat_arguments(request, model)
        kwargs.update(stream=True, stream_options={"include_usage": True})
        self._guard()
        attempt = 0
        while True:
            emitted = False
            assembly = StreamAssembly(model, self.name, self._shown_url)
            try:
                chunks = await self._client.chat.completions.create(**kwargs)
                async with chunks:  # closes the connection when the caller stops early
                    async for chunk in chunks:
                        text = assembly.add(chunk)
                        if text:
                            emitted = True
                            yield TextDelta(text)
                yield ResponseDone(assembly.response())
                return
            except Exception as exc:
                await self._before_retry(self._cut_short(exc, model, assembly), model, attempt, retry=not emitted)
                attempt += 1

    def _cut_short(self, exc: Exception, model: str, assembly: StreamAssembly) -> Exception:
        """A connection lost after chunks came is a stream cut short (it did reach the server)."""
        import openai

        if not assembly.chunks or not isinstance(exc, openai.APIConnectionError) or isinstance(
                exc, openai.APITimeoutError):
            return exc
        cut = ProviderConnectionError(f"{self.name} ({model}): the stream from {self._shown_url} was cut short after "
                                      f"{assembly.chunks} chunk(s): {exc.__cause__ or exc}", provider=self.name)
        cut.__cause__ = exc
        return cut

    async def list_models(self) -> list[str]:
        """The model ids the server offers (``GET /models``)."""
        self._guard()

        async def attempt() -> list[str]:
            return [model.id async for model in self._client.models.list()]

        return await self._with_retries(self.model, attempt)

    # -- retries and errors -------------------------------------------------------------------

    def _guard(self) -> None:
        if self.real:
            check_real_model_allowed(self.name)

    async def _with_retries(self, model: str, attempt_once: Callable[[], Awaitable[_T]]) -> _T:
        attempt = 0
        while True:
            try:
                return await attempt_once()
            except Exception as exc:
                await self._before_retry(exc, model, attempt)
                attempt += 1

    def _retry_delay(self, error: ProviderError, retry_after: float | None, attempt: int) -> float | None:
        """Seconds to wait before the next attempt, or None when the error is final."""
        if not error.retryable or attempt >= self.max_retries:
            return None
        if retry_after is not None:
            return retry_after if retry_after <= self.max_retry_after else None
        return self._jitter(min(self.backoff_max, self.backoff_base * 2**attempt))

    async def _before_retry(self, exc: Exception, model: str, attempt: int, *, retry: bool = True) -> None:
        """Wait before retry ``attempt + 1`` — or raise our error for ``exc`` when it is final."""
        error, retry_after = self._provider_error(exc, model)
        self._mask_key(error)
        delay = self._retry_delay(error, retry_after, attempt) if retry else None
        if delay is None:
            if error is exc:
                raise exc
            raise error from exc
        if self.on_retry is not None:
            self.on_retry(attempt + 1, delay, error)
        await self._sleep(delay)

    def _mask_key(self, error: ProviderError) -> None:
        """Take this provider's own key out of ``error``'s message: a server may quote the key it
        refused, and a key not shaped like ``sk-...`` is one the redaction patterns cannot know."""
        key = getattr(self._client, "api_key", None)
        if isinstance(key, str) and len(key) >= 8 and error.args and isinstance(error.args[0], str) \
                and key in error.args[0]:
            error.args = (error.args[0].replace(key, "[REDACTED]"), *error.args[1:])

    def _provider_error(self, exc: Exception, model: str) -> tuple[ProviderError, float | None]:
        """Our error for an SDK (or parsing) exception, and the server's Retry-After if it sent one.

        Anything that is not a provider failure (a bug) is re-raised unchanged.
        """
        import openai

        if isinstance(exc, ProviderError):
            return exc, None
        where, url, name = f"{self.name} ({model})", self._shown_url, self.name
        if isinstance(exc, openai.APITimeoutError):
            return ProviderTimeoutError(f"{where}: no response from {url} within {self.timeout}s", provider=name), None
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc
            return ProviderConnectionError(f"{where}: could not reach {url}: {cause}", provider=name), None
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            retry_after = parse_retry_after(exc.response.headers)
            message = f"{where}: HTTP {status} from {url}: {_error_detail(exc)}"
            if status in (401, 403):
                message += " — check the API key (OPENAI_API_KEY) and its permissions"
                return ProviderAuthError(message, provider=name, status=status), None
            if status == 429:
                return ProviderRateLimitError(message, provider=name, retry_after=retry_after), retry_after
            if status == 408:
                return ProviderTimeoutError(message, provider=name, status=status), retry_after
            if status >= 500:
                return ProviderServerError(message, provider=name, status=status), retry_after
            return ProviderBadRequestError(message, provider=name, status=status), None
        if isinstance(exc, openai.APIResponseValidationError):
            message = f"{where}: the response could not be understood: {exc.message}"
            return ProviderResponseError(message, provider=name), None
        if isinstance(exc, openai.APIError):
            # An error event inside a stream: the server failed after it had answered 200.
            return ProviderServerError(f"{where}: the server reported an error: {exc.message}", provider=name), None
        if isinstance(exc, json.JSONDecodeError):
            message = f"{where}: the response from {url} is not valid JSON ({exc.msg} at {exc.pos})"
            return ProviderResponseError(message, provider=name), None
        if isinstance(exc, openai.OpenAIError):
            return ProviderError(f"{where}: {exc}", provider=name), None
        raise exc

    # -- wire translation ---------------------------------------------------------------------

    @staticmethod
    def _chat_arguments(request: ModelRequest, model: str) -> dict[str, Any]:
        tools = request.tool_definitions()
        arguments: dict[str, Any] = {
            key: value
            for key, value in request.settings().items()
            if key in CHAT_SETTINGS and value is not None and (tools or key not in _TOOL_SETTINGS)
        }
        arguments["model"] = model
        arguments["messages"] = request.chat_messages()
        if tools:
            arguments["tools"] = [{"type": "function", "function": definition} for definition in tools]
        return arguments

    def _response(self, completion: Any, model: str) -> ModelResponse:
        return read_completion(completion, model=model, provider=self.name, base_url=self._shown_url)


def _error_detail(exc: openai.APIStatusError) -> str:
    """The server's own error message when the body has one, else the body itself, shortened."""
    inner = exc.body.get("error", exc.body) if isinstance(exc.body, dict) else exc.body
    if isinstance(inner, dict) and isinstance(inner.get("message"), str):
        inner = inner["message"]
    return shorten(exc.message if inner is None else str(inner))



"""OpenAIProvider's retries, backoff and Retry-After, against a real loopback HTTP server speaking
the OpenAI wire format.

The SDK's HTTP, JSON and SSE handling runs for real; only sleeping is faked, so retry delays can be
asserted exactly (``jitter`` is the identity, so a backoff delay is its cap). The other subjects:
``test_openai.py`` (complete, configuration), ``test_openai_stream.py`` (streaming).
"""

from __future__ import annotations

import email.utils
import socket
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.errors import (
    ProviderAuthError,
    ProviderBadRequestError,
    ProviderConnectionError,
    ProviderError,
    ProviderRateLimitError,
    ProviderResponseError,
    ProviderServerError,
    ProviderTimeoutError,
)
from agent.providers import OpenAIProvider
from agent.providers._openai import parse_retry_after
from tests.agent.providers.openaikit import MakeRequest, Sleeps, completion

# -- retries -----------------------------------------------------------------------------------


async def test_rate_limit_waits_what_retry_after_says(
    openai_server: Any, sleeps: Sleeps, request_of: MakeRequest
) -> None:
    observed: list[tuple[int, float, type[ProviderError]]] = []
    provider = OpenAIProvider(
        api_key="k",
        base_url=openai_server.base_url,
        sleep=sleeps,
        on_retry=lambda attempt, delay, error: observed.append((attempt, delay, type(error))),
    )
    openai_server.script(
        openai_server.error(429, "slow down", headers={"Retry-After": "2"}),
        openai_server.error(429, "slow down", headers={"retry-after-ms": "250"}),
        openai_server.json(completion("finally")),
    )

    response = await provider.complete(request_of("hi"))

    assert response.text == "finally"
    assert sleeps == [2.0, 0.25]
    assert observed == [(1, 2.0, ProviderRateLimitError), (2, 0.25, ProviderRateLimitError)]
    await provider.aclose()


async def test_retry_after_as_an_http_date(
    provider: OpenAIProvider, openai_server: Any, sleeps: Sleeps, request_of: MakeRequest
) -> None:
    when = email.utils.formatdate(time.time() + 5, usegmt=True)
    openai_server.script(
        openai_server.error(429, "slow down", headers={"Retry-After": when}), openai_server.json(completion())
    )

    await provider.complete(request_of("hi"))

    [delay] = sleeps
    assert 3.0 < delay <= 5.0  # the date has one-second resolution, and time passes


async def test_server_errors_back_off_exponentially_then_give_up(
    provider: OpenAIProvider, openai_server: Any, sleeps: Sleeps, request_of: MakeRequest
) -> None:
    openai_server.script(*[openai_server.error(500, "boom") for _ in range(4)])

    with pytest.raises(ProviderServerError) as caught:
        await provider.complete(request_of("hi", settings={"model": "gpt-4o-mini"}))

    assert len(openai_server.received) == 4  # the first try and max_retries=3 retries
    assert sleeps == [0.5, 1.0, 2.0]
    assert caught.value.status == 500 and caught.value.retryable
    message = str(caught.value)
    assert "openai" in message and "gpt-4o-mini" in message and "500" in message and "boom" in message


async def test_backoff_is_capped_and_jittered(openai_server: Any, sleeps: Sleeps, request_of: MakeRequest) -> None:
    caps: list[float] = []

    def half(cap: float) -> float:
        caps.append(cap)
        return cap / 2

    provider = OpenAIProvider(
        api_key="k", base_url=openai_server.base_url, max_retries=4, backoff_base=1.0, backoff_max=3.0,
        sleep=sleeps, jitter=half,
    )
    openai_server.script(*[openai_server.error(502, "bad gateway") for _ in range(4)], openai_server.json(completion()))

    await provider.complete(request_of("hi"))

    assert caps == [1.0, 2.0, 3.0, 3.0]
    assert sleeps == [0.5, 1.0, 1.5, 1.5]
    await provider.aclose()


async def test_a_retry_after_beyond_the_limit_is_not_waited_for(
    openai_server: Any, sleeps: Sleeps, request_of: MakeRequest
) -> None:
    provider = OpenAIProvider(api_key="k", base_url=openai_server.base_url, sleep=sleeps, max_retry_after=30)
    openai_server.script(openai_server.error(429, "quota", headers={"Retry-After": "3600"}))

    with pytest.raises(ProviderRateLimitError) as caught:
        await provider.complete(request_of("hi"))

    assert caught.value.retry_after == 3600.0
    assert sleeps == [] and len(openai_server.received) == 1
    await provider.aclose()


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (401, ProviderAuthError),
        (403, ProviderAuthError),
        (400, ProviderBadRequestError),
        (404, ProviderBadRequestError),
        (422, ProviderBadRequestError),
    ],
)
async def test_auth_and_validation_errors_are_never_retried(
    provider: OpenAIProvider,
    openai_server: Any,
    sleeps: Sleeps,
    request_of: MakeRequest,
    status: int,
    error_type: type[ProviderError],
) -> None:
    openai_server.script(openai_server.error(status, "nope", headers={"Retry-After": "1"}))

    with pytest.raises(error_type) as caught:
        await provider.complete(request_of("hi"))

    assert len(openai_server.received) == 1 and sleeps == []
    assert caught.value.status == status and not caught.value.retryable
    assert f"HTTP {status}" in str(caught.value) and "nope" in str(caught.value)


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(("{broken", "application/json"), id="invalid-json"),
        pytest.param(("<html>gateway</html>", "text/html"), id="not-json"),
        pytest.param(('{"object": "chat.completion"}', "application/json"), id="no-choices"),
        pytest.param(('{"choices": []}', "application/json"), id="empty-choices"),
    ],
)
async def test_a_malformed_body_is_a_response_error_and_not_retried(
    provider: OpenAIProvider, openai_server: Any, sleeps: Sleeps, request_of: MakeRequest, reply: tuple[str, str]
) -> None:
    body, content_type = reply
    openai_server.script(openai_server.raw(body, content_type=content_type))

    with pytest.raises(ProviderResponseError, match="openai"):
        await provider.complete(request_of("hi"))
    assert len(openai_server.received) == 1 and sleeps == []


async def test_a_slow_server_times_out_and_is_retried(
    openai_server: Any, sleeps: Sleeps, request_of: MakeRequest
) -> None:
    provider = OpenAIProvider(api_key="k", base_url=openai_server.base_url, timeout=0.2, max_retries=1, sleep=sleeps)
    openai_server.script(openai_server.json(completion(), delay=5), openai_server.json(completion(), delay=5))

    with pytest.raises(ProviderTimeoutError, match=r"within 0\.2s"):
        await provider.complete(request_of("hi"))
    assert len(openai_server.received) == 2 and len(sleeps) == 1
    await provider.aclose()


async def test_connection_errors_are_retried(sleeps: Sleeps, request_of: MakeRequest) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = OpenAIProvider(api_key="k", base_url=f"http://127.0.0.1:{port}/v1", max_retries=2, sleep=sleeps)

    with pytest.raises(ProviderConnectionError, match=f"127.0.0.1:{port}"):
        await provider.complete(request_of("hi"))
    assert len(sleeps) == 2
    await provider.aclose()


# -- Retry-After parsing -----------------------------------------------------------------------


@given(st.floats(min_value=0, max_value=1e6, allow_nan=False))
def test_retry_after_seconds_round_trip(seconds: float) -> None:
    assert parse_retry_after({"retry-after": repr(seconds)}) == seconds


@given(st.integers(min_value=0, max_value=10**6))
def test_retry_after_http_date(offset: int) -> None:
    now = 1_700_000_000.0
    header = email.utils.formatdate(now + offset, usegmt=True)
    assert parse_retry_after({"retry-after": header}, now=now) == offset


@pytest.mark.parametrize("value", ["soon", "-3", "nan", "inf", ""])
def test_unusable_retry_after_is_ignored(value: str) -> None:
    assert parse_retry_after({"retry-after": value}) is None


def test_a_retry_after_date_in_the_past_means_now() -> None:
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0

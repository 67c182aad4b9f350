"""OpenAIProvider against a real loopback HTTP server speaking the OpenAI wire format.

The SDK's HTTP, JSON and SSE handling runs for real; only sleeping is faked, so retry delays can be
asserted exactly (``jitter`` is the identity, so a backoff delay is its cap).
"""

from __future__ import annotations

import email.utils
import json
import socket
import time
from collections.abc import AsyncIterator, Callable
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
    RealModelBlockedError,
)
from agent.providers import (
    ModelRequest,
    OpenAIProvider,
    ResponseDone,
    StreamEvent,
    TextDelta,
    ToolCall,
    Usage,
)
from agent.providers._openai import is_loopback_url, parse_retry_after
from tests.agent.providers.conftest import Reply

MakeRequest = Callable[..., ModelRequest]
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def completion(
    text: str | None = "Hello!",
    *,
    tool_calls: list[tuple[str, str, str]] | None = None,
    finish: str = "stop",
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A Chat Completions response body."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
            for call_id, name, arguments in tool_calls
        ]
    return {
        "id": "chatcmpl-abc",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-test-2024",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": usage or {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    }


def chunk(delta: dict[str, Any] | None = None, *, finish: str | None = None, usage: dict[str, Any] | None = None) -> dict[str, Any]:
    """A streamed chunk; with ``usage`` it is the final usage-only chunk (no choices)."""
    choices = [] if usage else [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    body: dict[str, Any] = {
        "id": "chatcmpl-stream",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "gpt-test-2024",
        "choices": choices,
    }
    if usage:
        body["usage"] = usage
    return body


class Sleeps(list[float]):
    """A fake ``asyncio.sleep`` that records the delays asked for."""

    async def __call__(self, delay: float) -> None:
        self.append(delay)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
async def provider(openai_server: Any, sleeps: Sleeps) -> AsyncIterator[OpenAIProvider]:
    provider = OpenAIProvider(
        "gpt-default", api_key="test-key", base_url=openai_server.base_url, sleep=sleeps, jitter=lambda cap: cap
    )
    yield provider
    await provider.aclose()


async def collect(provider: OpenAIProvider, request: ModelRequest) -> list[StreamEvent]:
    return [event async for event in provider.stream(request)]


# -- complete ----------------------------------------------------------------------------------


async def test_complete_sends_the_snapshot_and_returns_the_answer(
    provider: OpenAIProvider, openai_server: Any, request_of: MakeRequest
) -> None:
    usage = {
        "prompt_tokens": 40,
        "completion_tokens": 5,
        "total_tokens": 45,
        "prompt_tokens_details": {"cached_tokens": 32},
    }
    openai_server.script(openai_server.json(completion("Sunny.", usage=usage)))
    settings = {"model": "gpt-4o-mini", "temperature": 0.2, "max_tokens": 512, "seed": 7, "context_window": 9000}
    request = request_of("Weather in Paris?", system="You are terse.", tools=[WEATHER_TOOL], settings=settings)

    response = await provider.complete(request)

    assert response.text == "Sunny."
    assert response.usage == Usage(input_tokens=40, output_tokens=5, cached_tokens=32)
    assert (response.model, response.response_id, response.provider) == ("gpt-test-2024", "chatcmpl-abc", "openai")
    assert response.finish_reason == "stop"
    [received] = openai_server.received
    assert (received.method, received.path) == ("POST", "/v1/chat/completions")
    assert received.headers["authorization"] == "Bearer test-key"
    assert received.body == {
        "model": "gpt-4o-mini",  # the request's model wins over the constructor's
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Weather in Paris?"},
        ],
        "tools": [{"type": "function", "function": WEATHER_TOOL}],
        "temperature": 0.2,
        "max_tokens": 512,
        "seed": 7,  # and "context_window" is not a Chat Completions setting, so it stays out
    }


async def test_no_tools_means_no_tools_key_and_no_tool_choice(
    provider: OpenAIProvider, openai_server: Any, request_of: MakeRequest
) -> None:
    openai_server.script(openai_server.json(completion()))
    await provider.complete(request_of("hi", settings={"tool_choice": "auto", "top_p": 0.9}))

    body = openai_server.bodies[0]
    assert "tools" not in body and "tool_choice" not in body
    assert body["model"] == "gpt-default"  # no model in the request: the constructor's default
    assert body["top_p"] == 0.9


async def test_tool_calls_come_back_with_their_raw_argument_text(
    provider: OpenAIProvider, openai_server: Any, request_of: MakeRequest
) -> None:
    calls = [("call_1", "get_weather", '{"city": "Paris"}'), ("call_2", "get_weather", '{"city": ')]
    openai_server.script(openai_server.json(completion(None, tool_calls=calls, finish="tool_calls")))

    response = await provider.complete(request_of("Weather?", tools=[WEATHER_TOOL]))

    assert response.text == ""
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls == (
        ToolCall("call_1", "get_weather", '{"city": "Paris"}'),
        ToolCall("call_2", "get_weather", '{"city": '),  # invalid JSON is kept for the loop to report
    )


async def test_malformed_tool_calls_reach_the_loop_as_calls_it_can_report(
    provider: OpenAIProvider, openai_server: Any, request_of: MakeRequest
) -> None:
    """Arguments sent as a JSON object (not the string the wire format says) reached the tool as a
    dict ("'dict' object has no attribute 'strip'"); a call without a function was dropped, so the
    run answered with nothing. Both now reach the loop, which tells the model what was wrong."""
    body = completion(None, finish="tool_calls")
    body["choices"][0]["message"]["tool_calls"] = [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
        {"id": "call_2", "type": "function"},
        {"id": "call_3", "type": "function", "function": {"name": "get_weather", "arguments": None}},
    ]
    openai_server.script(openai_server.json(body))

    response = await provider.complete(request_of("Weather?", tools=[WEATHER_TOOL]))

    assert response.tool_calls == (
        ToolCall("call_1", "get_weather", '{"city": "Paris"}'),
        ToolCall("call_2", "", ""),  # no tool is named "": the loop says so and lists the tools
        ToolCall("call_3", "get_weather", ""),
    )


async def test_list_models(provider: OpenAIProvider, openai_server: Any) -> None:
    models = [{"id": name, "object": "model", "created": 0, "owned_by": "me"} for name in ("llama3", "qwen")]
    openai_server.script(openai_server.json({"object": "list", "data": models}))

    assert await provider.list_models() == ["llama3", "qwen"]
    assert openai_server.received[0].path == "/v1/models"


# -- stream ------------------------------------------------------------------------------------


async def test_stream_yields_text_deltas_then_the_whole_response(
    provider: OpenAIProvider, openai_server: Any, request_of: MakeRequest
) -> None:
    openai_server.script(
        openai_server.sse([
            chunk({"role": "assistant", "content": ""}),
            chunk({"content": "Hel"}),
            chunk({"content": "lo"}),
            chunk(finish="stop"),
            chunk(usage={"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}),
        ])
    )

    events = await collect(provider, request_of("hi", settings={"model": "gpt-4o"}))

    assert events[:2] == [TextDelta("Hel"), TextDelta("lo")]
    [done] = events[2:]
    assert isinstance(done, ResponseDone)
    assert done.response.text == "Hello"
    assert done.response.usage == Usage(9, 2, 0)
    assert (done.response.finish_reason, done.response.response_id) == ("stop", "chatcmpl-stream")
    body = openai_server.bodies[0]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["model"] == "gpt-4o"


async def test_stream_assembles_tool_call_deltas_split_across_chunks(
    provider: OpenAIProvider, openai_server: Any, request_of: MakeRequest
) -> None:
    def call_delta(index: int, arguments: str, call_id: str | None = None, name: str | None = None) -> dict[str, Any]:
        function: dict[str, Any] = {"arguments": arguments}
        if name:
            function["name"] = name
        delta: dict[str, Any] = {"index": index, "function": function}
        if call_id:
            delta.update(id=call_id, type="function")
        return {"tool_calls": [delta]}

    openai_server.script(
        openai_server.sse([
            chunk({"role": "assistant", "content": None}),
            chunk(call_delta(0, "", "call_a", "get_weather")),
            chunk(call_delta(0, '{"ci')),
            chunk(call_delta(1, "", "call_b", "get_time")),
            chunk(call_delta(0, 'ty": "Paris"}')),
            chunk(call_delta(1, '{"tz": "CET"}')),
            chunk(finish="tool_calls"),
            chunk(usage={"prompt_tokens": 20, "completion_tokens": 15, "total_tokens": 35}),
        ])
    )

    events = await collect(provider, request_of("weather and time?", tools=[WEATHER_TOOL]))

    [done] = events
    assert isinstance(done, ResponseDone)
    assert done.response.tool_calls == (
        ToolCall("call_a", "get_weather", '{"city": "Paris"}'),
        ToolCall("call_b", "get_time", '{"tz": "CET"}'),
    )
    assert done.response.finish_reason == "tool_calls"
    assert openai_server.bodies[0]["tools"] == [{"type": "function", "function": WEATHER_TOOL}]


async def test_stream_retries_a_failure_before_anything_was_yielded(
    provider: OpenAIProvider, openai_server: Any, sleeps: Sleeps, request_of: MakeRequest
) -> None:
    openai_server.script(
        openai_server.error(503, "overloaded"),
        openai_server.sse([chunk({"content": "ok"}), chunk(finish="stop")]),
    )

    events = await collect(provider, request_of("hi"))

    assert events[0] == TextDelta("ok")
    assert len(openai_server.received) == 2
    assert sleeps == [0.5]


async def test_stream_error_after_text_is_not_retried(
    provider: OpenAIProvider, openai_server: Any, sleeps: Sleeps, request_of: MakeRequest
) -> None:
    openai_server.script(openai_server.sse([chunk({"content": "par"}), {"error": {"message": "engine crashed"}}]))

    seen: list[StreamEvent] = []
    with pytest.raises(ProviderServerError, match="engine crashed"):
        async for event in provider.stream(request_of("hi")):
            seen.append(event)

    assert seen == [TextDelta("par")]  # a retry would have repeated this text
    assert len(openai_server.received) == 1 and sleeps == []


async def test_a_stream_that_stops_before_its_end_is_not_an_answer(
    provider: OpenAIProvider, openai_server: Any, sleeps: Sleeps, request_of: MakeRequest
) -> None:
    """A stream the connection closed before its finish_reason (no [DONE]) was taken as the whole
    answer: 'the café near' stood as the reply."""
    cut = openai_server.sse([chunk({"content": "the café near"})], done=False)
    openai_server.script(cut)
    seen: list[StreamEvent] = []
    with pytest.raises(ProviderConnectionError, match=r"ended before the response was complete .*1 chunk"):
        async for event in provider.stream(request_of("hi")):
            seen.append(event)
    assert seen == [TextDelta("the café near")] and sleeps == []  # text was given: not retried

    calls_only = openai_server.sse([chunk({"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                                                           "function": {"name": "get_weather", "arguments": "{"}}]})],
                                   done=False)
    openai_server.script(calls_only, openai_server.sse([chunk({"content": "ok"}), chunk(finish="stop")]))
    events = await collect(provider, request_of("hi"))
    assert isinstance(events[-1], ResponseDone) and events[-1].response.text == "ok"  # nothing given yet: retried
    assert len(sleeps) == 1


async def test_a_server_that_ignores_stream_true_is_named_as_the_likely_cause(
    provider: OpenAIProvider, openai_server: Any, request_of: MakeRequest
) -> None:
    """A server answering one JSON body to stream=true was reported only as 'the stream ended
    without a single chunk'."""
    openai_server.script(openai_server.json(completion("hello")))
    with pytest.raises(ProviderResponseError, match=r"without a single chunk .*ignores stream=true"):
        await collect(provider, request_of("hi"))


async def test_a_stream_cut_mid_event_says_so(
    provider: OpenAIProvider, openai_server: Any, request_of: MakeRequest
) -> None:
    event = f"data: {json.dumps(chunk({'content': 'par'}))}\n\n".encode()
    broken = Reply(200, content_type="text/event-stream", headers={"transfer-encoding": "chunked"},
                   events=(f"{len(event):x}\r\n".encode() + event + b"\r\n", b"40\r\ndata: {"))
    openai_server.script(broken)
    with pytest.raises(ProviderConnectionError, match="was cut short after 1 chunk") as caught:
        await collect(provider, request_of("hi"))
    assert "could not reach" not in str(caught.value)


async def test_stream_with_a_malformed_event_is_a_response_error(
    provider: OpenAIProvider, openai_server: Any, sleeps: Sleeps, request_of: MakeRequest
) -> None:
    openai_server.script(openai_server.sse(["{not json"]))

    with pytest.raises(ProviderResponseError, match="not valid JSON"):
        await collect(provider, request_of("hi"))
    assert len(openai_server.received) == 1 and sleeps == []


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


# -- configuration and the real-model guard -----------------------------------------------------


async def test_key_and_base_url_come_from_the_environment(
    openai_server: Any, monkeypatch: pytest.MonkeyPatch, request_of: MakeRequest
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    openai_server.script(openai_server.json(completion()))
    provider = OpenAIProvider()

    await provider.complete(request_of("hi"))

    assert openai_server.received[0].headers["authorization"] == "Bearer env-key"
    assert not provider.real
    await provider.aclose()


async def test_a_local_server_needs_no_key(openai_server: Any, request_of: MakeRequest) -> None:
    openai_server.script(openai_server.json(completion("from llama")))
    provider = OpenAIProvider("llama3", base_url=openai_server.base_url)

    assert (await provider.complete(request_of("hi"))).text == "from llama"
    await provider.aclose()


def test_openai_itself_without_a_key_is_refused_with_a_fix() -> None:
    with pytest.raises(ProviderAuthError, match="OPENAI_API_KEY"):
        OpenAIProvider()


@pytest.mark.footprint_expects_blocked  # sees the refusal itself
async def test_a_remote_base_url_is_blocked_while_real_models_are(request_of: MakeRequest, sleeps: Sleeps) -> None:
    provider = OpenAIProvider(api_key="sk-not-real", base_url="https://api.openai.com/v1", sleep=sleeps)
    assert provider.real

    with pytest.raises(RealModelBlockedError):
        await provider.complete(request_of("hi"))
    with pytest.raises(RealModelBlockedError):
        await collect(provider, request_of("hi"))
    with pytest.raises(RealModelBlockedError):
        await provider.list_models()
    assert sleeps == []
    await provider.aclose()


@pytest.mark.parametrize(
    ("url", "loopback"),
    [
        ("http://127.0.0.1:11434/v1", True),
        ("http://127.8.9.10/v1", True),
        ("http://localhost:8000/v1", True),
        ("http://[::1]:8080/v1", True),
        ("http://10.0.0.5:8000/v1", False),
        ("https://api.openai.com/v1", False),
        ("http://localhost.example.com/v1", False),
    ],
)
def test_is_loopback_url(url: str, loopback: bool) -> None:
    assert is_loopback_url(url) is loopback


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

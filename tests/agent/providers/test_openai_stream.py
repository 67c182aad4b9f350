"""OpenAIProvider's stream, against a real loopback HTTP server speaking
the OpenAI wire format.

The SDK's HTTP, JSON and SSE handling runs for real; only sleeping is faked, so retry delays can be
asserted exactly (``jitter`` is the identity, so a backoff delay is its cap). The other subjects:
``test_openai.py`` (complete, configuration), ``test_openai_retries.py`` (retries, Retry-After).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.errors import ProviderConnectionError, ProviderResponseError, ProviderServerError
from agent.providers import OpenAIProvider, ResponseDone, StreamEvent, TextDelta, ToolCall, Usage
from tests.agent.providers.conftest import Reply
from tests.agent.providers.openaikit import WEATHER_TOOL, MakeRequest, Sleeps, chunk, collect, completion

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

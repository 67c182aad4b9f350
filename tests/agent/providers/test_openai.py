"""OpenAIProvider's complete and its configuration (key, base URL, the real-model guard), against a
real loopback HTTP server speaking the OpenAI wire format.

The SDK's HTTP, JSON and SSE handling runs for real; only sleeping is faked, so retry delays can be
asserted exactly (``jitter`` is the identity, so a backoff delay is its cap). The other subjects:
``test_openai_stream.py`` (streaming), ``test_openai_retries.py`` (retries, Retry-After).
"""

from __future__ import annotations

from typing import Any

import pytest

from agent.errors import ProviderAuthError, RealModelBlockedError
from agent.providers import OpenAIProvider, ToolCall, Usage
from agent.providers._openai import is_loopback_url
from tests.agent.providers.openaikit import WEATHER_TOOL, MakeRequest, Sleeps, collect, completion

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

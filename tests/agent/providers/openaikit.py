"""What the OpenAIProvider tests build their exchanges from: Chat Completions bodies and stream chunks,
a fake sleep that records its delays, and a stream collected into a list.

The fixtures over them (``sleeps``, ``provider``) are in ``conftest.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.providers import ModelRequest, OpenAIProvider, StreamEvent

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


async def collect(provider: OpenAIProvider, request: ModelRequest) -> list[StreamEvent]:
    return [event async for event in provider.stream(request)]

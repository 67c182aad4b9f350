"""Test models that ship with footprint: no network, fully deterministic.

``ScriptedModel`` answers from a list; ``FunctionModel`` answers with a function of the request
(so it can read its context). Both accept plain strings for text replies and :func:`calls` for
tool calls.
"""

from __future__ import annotations

import inspect
import itertools
import json
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from tracer import Item

from ..errors import ProviderError
from ._base import ModelRequest, ModelResponse, Provider, ToolCall, Usage

_ids = itertools.count(1)

Scripted = ModelResponse | str | ProviderError


def calls(*pairs: tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], str], text: str = "") -> ModelResponse:
    """A response that calls tools: ``calls(("get_weather", {"city": "Paris"}), ...)``.

    A third element gives the call id; otherwise ids are ``call_1``, ``call_2``, ...
    """
    tool_calls = []
    for pair in pairs:
        name, args = pair[0], pair[1]
        call_id = pair[2] if len(pair) > 2 else f"call_{next(_ids)}"
        tool_calls.append(ToolCall(call_id, name, json.dumps(args)))
    return ModelResponse(text=text, tool_calls=tuple(tool_calls), finish_reason="tool_calls")


def raw_call(name: str, arguments: str, call_id: str | None = None) -> ModelResponse:
    """A response with one tool call whose argument text is given verbatim (e.g. invalid JSON)."""
    return ModelResponse(
        text="", tool_calls=(ToolCall(call_id or f"call_{next(_ids)}", name, arguments),), finish_reason="tool_calls"
    )


_lengths: dict[str, int] = {}  # item hash -> length of its text: a context repeats turn after turn


def _text_length(item: Item) -> int:
    length = _lengths.get(item.hash)
    if length is None:
        if len(_lengths) > 50_000:
            _lengths.clear()
        length = _lengths[item.hash] = len(item.text)
    return length


def _as_response(value: Scripted, request: ModelRequest, name: str) -> ModelResponse:
    if isinstance(value, ProviderError):
        raise value
    response = ModelResponse(text=value) if isinstance(value, str) else value
    usage = response.usage
    if usage == Usage():
        chars_in = sum(_text_length(ci.item) for ci in request.context)
        chars_out = len(response.text) + sum(len(c.arguments) + len(c.name) for c in response.tool_calls)
        usage = Usage((chars_in + 3) // 4, (chars_out + 3) // 4)
    return ModelResponse(
        response.text, response.tool_calls, response.finish_reason, usage, response.model or request.model or name,
        response.response_id, name,
    )


class _KeepsRequests:
    """``requests`` holds the last ``keep_requests`` requests received (all of a test's, by default;
    a long-running host or benchmark keeps few or none), ``calls_made`` counts every one."""

    def __init__(self, keep_requests: int) -> None:
        self.requests: list[ModelRequest] = []
        self.keep_requests = keep_requests
        self._calls = 0

    def _received(self, request: ModelRequest) -> None:
        self._calls += 1
        if self.keep_requests > 0:
            self.requests.append(request)
            if len(self.requests) > self.keep_requests:
                del self.requests[0]

    @property
    def calls_made(self) -> int:
        """How many requests it received."""
        return self._calls


class ScriptedModel(_KeepsRequests, Provider):
    """Answers with the scripted responses in order; ``requests`` keeps what each call received.

    When the script runs out it raises a ProviderError naming the call, unless ``repeat`` is set.
    """

    name = "scripted"

    def __init__(self, responses: Iterable[Scripted], *, repeat: bool = False, keep_requests: int = 10_000) -> None:
        super().__init__(keep_requests)
        self.responses: list[Scripted] = list(responses)
        self.repeat = repeat
        self._next = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The next scripted response."""
        self._received(request)
        if self._next >= len(self.responses):
            if not self.repeat or not self.responses:
                raise ProviderError(
                    f"scripted model: call {self._next + 1} but the script has {len(self.responses)} responses",
                    provider=self.name,
                )
            self._next = 0
        value = self.responses[self._next]
        self._next += 1
        return _as_response(value, request, self.name)


ModelFunction = Callable[[ModelRequest], Scripted | Awaitable[Scripted]]


class FunctionModel(_KeepsRequests, Provider):
    """Answers with ``fn(request)`` (sync or async), so it can read the context it was sent."""

    name = "function"

    def __init__(self, fn: ModelFunction, *, name: str | None = None, keep_requests: int = 10_000) -> None:
        super().__init__(keep_requests)
        self.fn = fn
        if name:
            self.name = name

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The function's answer."""
        self._received(request)
        value = self.fn(request)
        if inspect.isawaitable(value):
            value = await value
        return _as_response(value, request, self.name)


def tool_results(request: ModelRequest) -> Sequence[dict[str, Any]]:
    """The tool results in a request, oldest first (a convenience for function models)."""
    return [dict(ci.item.body) for ci in request.context if ci.item.kind == "tool_result"]

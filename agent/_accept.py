"""What the loop accepts from a provider: a well-typed :class:`ModelResponse` whose tool calls have
distinct ids.

A provider is outside code (a ``FunctionModel``, a custom class) or reads a server that may send
anything; a text that is not a string or a token count that is not a count would otherwise fail far
from its cause — in pricing, in the store's writer — with a bare ``TypeError``. Here it fails the
inference with a :class:`ProviderResponseError` naming the provider and the field.

Tool-call ids pair each call with its result in the next request. Servers send none (llama.cpp,
some Ollama versions), or the same one twice; two results with one id, or with "", make the next
request ambiguous (OpenAI rejects it). Such a call gets an id of its own, ``call_<turn>_<index>``
(the same on a replay, so the recorded requests still match), and the inference stage records the
ids the model sent.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tracer import utf8_text

from .errors import ProviderResponseError
from .providers import ModelResponse, ToolCall, Usage

#: Counts at or past this do not fit the store's 64-bit columns.
_MAX_COUNT = 2**63


def accepted(response: Any, provider: str, turn: int) -> tuple[ModelResponse, list[dict[str, Any]]]:
    """``response`` with every tool call holding a distinct id, and the ids it replaced (index, sent).

    Raises :class:`ProviderResponseError` when ``response`` is not a well-typed ModelResponse.
    """
    if not isinstance(response, ModelResponse):
        raise _wrong(provider, "its response", response, "a ModelResponse")
    for name in ("text", "finish_reason", "model", "provider"):
        if not isinstance(getattr(response, name), str):
            raise _wrong(provider, f"the response's {name}", getattr(response, name), "a string")
    if response.response_id is not None and not isinstance(response.response_id, str):
        raise _wrong(provider, "the response's response_id", response.response_id, "a string or None")
    if not isinstance(response.usage, Usage):
        raise _wrong(provider, "the response's usage", response.usage, "a Usage")
    for name in ("input_tokens", "output_tokens", "cached_tokens"):
        count = getattr(response.usage, name)
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count < _MAX_COUNT:
            raise _wrong(provider, f"the response's usage.{name}", count, "a count of tokens (0 or more)")
    if not isinstance(response.tool_calls, tuple | list):
        raise _wrong(provider, "the response's tool_calls", response.tool_calls, "a tuple of ToolCall")
    for index, call in enumerate(response.tool_calls):
        if not isinstance(call, ToolCall):
            raise _wrong(provider, f"tool call {index}", call, "a ToolCall")
        for name in ("id", "name", "arguments"):
            if not isinstance(getattr(call, name), str):
                raise _wrong(provider, f"tool call {index}'s {name}", getattr(call, name), "a string")
    return _distinct_ids(_writable(response), turn)


def _writable(response: ModelResponse) -> ModelResponse:
    """``response`` with each lone surrogate in its text and calls as its escape (see
    :func:`tracer.utf8_text`): the reply, the memory and the store then hold the same text, and a
    client's UTF-8 JSON can carry it."""
    text = utf8_text(response.text)
    calls = [call if all(utf8_text(getattr(call, n)) is getattr(call, n) for n in ("id", "name", "arguments"))
             else dataclasses.replace(call, id=utf8_text(call.id), name=utf8_text(call.name),
                                      arguments=utf8_text(call.arguments))
             for call in response.tool_calls]
    if text is response.text and all(c is o for c, o in zip(calls, response.tool_calls, strict=True)):
        return response
    return dataclasses.replace(response, text=text, tool_calls=tuple(calls))


def _distinct_ids(response: ModelResponse, turn: int) -> tuple[ModelResponse, list[dict[str, Any]]]:
    taken = {call.id for call in response.tool_calls}
    seen: set[str] = set()
    replaced: list[dict[str, Any]] = []
    calls: list[ToolCall] = []
    for index, call in enumerate(response.tool_calls):
        if call.id and call.id not in seen:
            seen.add(call.id)
            calls.append(call)
            continue
        new, n = f"call_{turn}_{index}", 0
        while new in taken:  # the model may have sent this very id for another call
            n += 1
            new = f"call_{turn}_{index}_{n}"
        taken.add(new)
        seen.add(new)
        replaced.append({"index": index, "sent": call.id})
        calls.append(dataclasses.replace(call, id=new))
    if not replaced and isinstance(response.tool_calls, tuple):
        return response, []
    return dataclasses.replace(response, tool_calls=tuple(calls)), replaced


def _wrong(provider: str, what: str, value: Any, expected: str) -> ProviderResponseError:
    shown = repr(value)
    shown = shown if len(shown) <= 120 else shown[:119] + "…"
    return ProviderResponseError(
        f"{provider}: {what} is {type(value).__name__} {shown}, not {expected}", provider=provider)

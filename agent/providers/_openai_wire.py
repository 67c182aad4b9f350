"""Reading what an OpenAI-compatible server sent back: a completion, or the chunks of a stream.

The SDK builds its response objects without validating them, so a field holds whatever the server
put there: vLLM, Ollama, LM Studio, llama.cpp and the proxies in front of them send content as a
list of parts, counts as strings, ids as numbers, a 200 whose body is only an error. Each reader
here takes the value it finds, keeps what the wire format allows, and otherwise raises a
:class:`ProviderResponseError` naming the field — never a ``TypeError`` from deep in the loop.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..errors import (
    ProviderAuthError,
    ProviderBadRequestError,
    ProviderConnectionError,
    ProviderError,
    ProviderRateLimitError,
    ProviderResponseError,
    ProviderServerError,
)
from ._base import ModelResponse, ToolCall, Usage

#: Token counts at or past this are not counts (a server's garbage); they are read as unknown (0).
_MAX_COUNT = 2**53


def read_completion(completion: Any, *, model: str, provider: str, base_url: str) -> ModelResponse:
    """The response a (non-streamed) Chat Completions body describes."""
    where = f"{provider} ({model})"
    choices = field(completion, "choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = field(choice, "message")
    if message is None:
        error = field(completion, "error")
        if error is not None:  # OpenRouter and some proxies answer 200 with only an error body
            raise reported_error(error, where, provider)
        shape = ("choices[0] has no message" if choice is not None else "an empty choices list"
                 if isinstance(choices, list) else "no choices list")
        raise ProviderResponseError(
            f"{where}: the response from {base_url} is not a chat completion ({shape}): {shorten(repr(completion))}",
            provider=provider,
        )
    # a call without a function (or its name) is kept: the loop tells the model no such tool exists
    tool_calls = tuple(
        ToolCall(id=_identifier(field(call, "id")), name=_identifier(field(function, "name")),
                 arguments=argument_text(field(function, "arguments")))
        for call in _list(field(message, "tool_calls"), f"{where}: choices[0].message.tool_calls", provider)
        for function in [field(call, "function")]
    )
    text = content_text(field(message, "content"), f"{where}: choices[0].message.content", provider)
    finish = _identifier(field(choice, "finish_reason")) or ("tool_calls" if tool_calls else "stop")
    text, finish = _with_refusal(text, finish, field(message, "refusal"))
    if not text and not tool_calls:
        raise empty_response(where, base_url, finish, provider)
    return ModelResponse(
        text=text,
        tool_calls=tool_calls,
        finish_reason=finish,
        usage=read_usage(field(completion, "usage")),
        model=_identifier(field(completion, "model")) or model,
        response_id=_identifier(field(completion, "id")) or None,
        provider=provider,
    )


class StreamAssembly:
    """Accumulates stream chunks: text, tool-call fragments, finish reason and usage.

    Servers stream parallel tool calls in several ways, all assembled alike: an ``index`` per call
    (OpenAI, vLLM), ``index`` 0 for every call with a new ``id`` for each (Ollama behind LiteLLM,
    Gemini's OpenAI endpoint, some SGLang builds), no index at all with the id in every fragment,
    or an id on each call's first fragment only. So: a fragment with an id not seen before starts a
    new call; the same id, or none, continues the current call at its index (no index: the call
    the fragment follows; with neither index nor id, a name starts a call). Calls are kept in the
    order they started.
    """

    def __init__(self, model: str, provider: str = "openai", base_url: str = "") -> None:
        self.model = model
        self.provider = provider
        self.base_url = base_url
        self.response_id: str | None = None
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.calls: list[dict[str, str]] = []  # in the order they started
        self._at_index: dict[int, int] = {}  # a stream index -> the call now streaming at it
        self._by_id: dict[tuple[int | None, str], int] = {}  # (index, id) -> its call
        self.finish_reason: str | None = None
        self.usage = Usage()
        self.chunks = 0

    @property
    def where(self) -> str:
        return f"{self.provider} ({self.model})"

    def add(self, chunk: Any) -> str:
        """Take one chunk in; return its new text ("" when it carries none)."""
        self.chunks += 1
        self.response_id = self.response_id or _identifier(field(chunk, "id")) or None
        self.model = _identifier(field(chunk, "model")) or self.model
        if field(chunk, "usage") is not None:
            self.usage = read_usage(field(chunk, "usage"))
        text = ""
        choices = field(chunk, "choices")
        for choice in choices if isinstance(choices, list) else ():
            if _index(field(choice, "index")) not in (0, None):  # we ask for one choice; ignore others
                continue
            delta = field(choice, "delta")
            if delta is not None:
                text += content_text(field(delta, "content"), f"{self.where}: a stream chunk's delta.content",
                                     self.provider)
                refusal = field(delta, "refusal")
                if isinstance(refusal, str):
                    self.refusal.append(refusal)
                for call in _list(field(delta, "tool_calls"), f"{self.where}: a stream chunk's delta.tool_calls",
                                  self.provider):
                    self._add_call(call)
            self.finish_reason = _identifier(field(choice, "finish_reason")) or self.finish_reason
        if text:
            self.text.append(text)
        return text

    def _add_call(self, delta: Any) -> None:
        index = _index(field(delta, "index"))
        call_id, function = _identifier(field(delta, "id")), field(delta, "function")
        name = _identifier(field(function, "name"))
        position = self._call_of(index, call_id, name)
        if index is not None:
            self._at_index[index] = position
        call = self.calls[position]
        if call_id and not call["id"]:  # a call whose id comes after its first fragment
            call["id"] = call_id
        if call_id:
            self._by_id[(index, call_id)] = self._by_id[(None, call_id)] = position
        if name:
            call["name"] = name  # some servers repeat the name in every fragment
        call["arguments"] += argument_text(field(function, "arguments"))

    def _call_of(self, index: int | None, call_id: str, name: str) -> int:
        """The position of the call a fragment belongs to, a new call's when it starts one."""
        if call_id:
            # the id again: the same call, whatever came in between (at the same index: a server
            # may give two calls at different indexes one id, and those are two calls)
            known = self._by_id.get((index, call_id))
            if known is not None:
                return known
        if index is not None:
            current = self._at_index.get(index)
        else:  # no index: the fragment continues the call it follows, unless a name says it starts one
            current = len(self.calls) - 1 if self.calls and (call_id or not name) else None
        if current is not None and call_id and self.calls[current]["id"] not in ("", call_id):
            current = None  # an id not seen before: a new call, even at an index in use
        if current is None:
            self.calls.append({"id": "", "name": "", "arguments": ""})
            current = len(self.calls) - 1
        return current

    def response(self) -> ModelResponse:
        """The whole response the chunks describe."""
        if self.chunks == 0:
            raise ProviderResponseError(
                f"{self.where}: the stream ended without a single chunk (a server that ignores "
                f"stream=true and answers with one JSON body sends none: it must stream server-sent events)",
                provider=self.provider,
            )
        if self.finish_reason is None:  # the connection closed early: what came is not the whole response
            raise ProviderConnectionError(
                f"{self.where}: the stream ended before the response was complete (no finish_reason "
                f"after {self.chunks} chunk(s))", provider=self.provider
            )
        tool_calls = tuple(ToolCall(c["id"], c["name"], c["arguments"]) for c in self.calls)
        text, finish = _with_refusal("".join(self.text), self.finish_reason, "".join(self.refusal))
        if not text and not tool_calls:
            raise empty_response(self.where, self.base_url, finish, self.provider)
        return ModelResponse(
            text=text,
            tool_calls=tool_calls,
            finish_reason=finish,
            usage=self.usage,
            model=self.model,
            response_id=self.response_id,
            provider=self.provider,
        )


# -- fields ------------------------------------------------------------------------------------


def field(value: Any, name: str) -> Any:
    """``value.name`` for an SDK object, ``value[name]`` for a plain dict (what the SDK leaves
    unconverted when the server's shape did not match), None otherwise."""
    if isinstance(value, dict):
        return value.get(name)
    if value is None or isinstance(value, str | int | float | list):
        return None
    return getattr(value, name, None)


def content_text(value: Any, where: str, provider: str) -> str:
    """A message's content as text: a string, nothing, or a list of text parts (joined)."""
    if value is None or isinstance(value, str):
        return value or ""
    if isinstance(value, list):  # [{"type": "text", "text": ...}, ...]: only text parts carry an answer
        return "".join(text for part in value for text in [field(part, "text")] if isinstance(text, str))
    raise ProviderResponseError(f"{where} is {_kind(value)}, not text: {shorten(repr(value))}", provider=provider)


def argument_text(value: Any) -> str:
    """A call's arguments as the JSON text the loop parses: a server that sends them as an object
    (the wire format says a string) has it written back as JSON; none is ""."""
    if value is None or isinstance(value, str):
        return value or ""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def read_usage(usage: Any) -> Usage:
    """Token usage; a count that is missing or not a count reads as 0."""
    details = field(usage, "prompt_tokens_details")
    return Usage(
        input_tokens=_count(field(usage, "prompt_tokens")),
        output_tokens=_count(field(usage, "completion_tokens")),
        cached_tokens=_count(field(details, "cached_tokens")),
    )


def reported_error(error: Any, where: str, provider: str) -> ProviderError:
    """Our error for an error object a server sent with status 200 (its ``code`` may be an HTTP status)."""
    message = field(error, "message")
    detail = shorten(message if isinstance(message, str) else repr(error))
    code = field(error, "code")
    status = code if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599 else None
    text = f"{where}: the server reported an error" + (f" (code {status})" if status else "") + f": {detail}"
    if status == 429:
        return ProviderRateLimitError(text, provider=provider)
    if status in (401, 403):
        return ProviderAuthError(text, provider=provider, status=status)
    if status is not None and status < 500:
        return ProviderBadRequestError(text, provider=provider, status=status)
    return ProviderServerError(text, provider=provider, status=status)


def empty_response(where: str, base_url: str, finish: str, provider: str) -> ProviderResponseError:
    """A response with neither text nor a tool call: there is nothing to answer with or to run."""
    hint = (" — the output token limit was reached first: raise max_tokens (or max_completion_tokens)"
            if finish == "length" else "")
    return ProviderResponseError(
        f"{where}: the response from {base_url} has neither text nor tool calls "
        f"(finish_reason {finish!r}){hint}", provider=provider)


def shorten(text: str, limit: int = 300) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _with_refusal(text: str, finish: str, refusal: Any) -> tuple[str, str]:
    """A refusal (``message.refusal``, content null) is the answer, and the finish reason says so."""
    if not text and isinstance(refusal, str) and refusal.strip():
        return refusal, "refusal"
    return text, finish


def _list(value: Any, where: str, provider: str) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, list):
        return value
    raise ProviderResponseError(f"{where} is {_kind(value)}, not a list: {shorten(repr(value))}", provider=provider)


def _identifier(value: Any) -> str:
    """An id, a name or a finish reason: a string as it is, a number as its digits, anything else ""."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return ""


def _index(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _count(value: Any) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    elif isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    return value if isinstance(value, int) and 0 <= value < _MAX_COUNT else 0


def _kind(value: Any) -> str:
    names = {dict: "an object", bool: "a boolean", int: "a number", float: "a number", str: "a string"}
    return names.get(type(value), f"a {type(value).__name__}")

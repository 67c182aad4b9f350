"""The GenAI semantic conventions: attribute names, and recorded context in their message format.

Names follow the OpenTelemetry GenAI semantic conventions (development status; checked against
semantic-conventions 1.37+ and ``opentelemetry-semantic-conventions`` 0.66b): operation names
``invoke_agent``, ``chat``, ``execute_tool``; usage on inference (``chat``) spans only. Message
content uses the conventions' JSON structure (``{"role", "parts": [{"type": "text", ...}]}``),
serialized to a JSON string because span attributes cannot hold nested values everywhere.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from .._records import Item, ItemKind

# operation names
INVOKE_AGENT = "invoke_agent"
CHAT = "chat"
EXECUTE_TOOL = "execute_tool"

# attribute names
OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_TEMPERATURE = "gen_ai.request.temperature"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
REQUEST_TOP_P = "gen_ai.request.top_p"
REQUEST_TOP_K = "gen_ai.request.top_k"
REQUEST_SEED = "gen_ai.request.seed"
REQUEST_STOP_SEQUENCES = "gen_ai.request.stop_sequences"
REQUEST_FREQUENCY_PENALTY = "gen_ai.request.frequency_penalty"
REQUEST_PRESENCE_PENALTY = "gen_ai.request.presence_penalty"
RESPONSE_ID = "gen_ai.response.id"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_DESCRIPTION = "gen_ai.tool.description"
ERROR_TYPE = "error.type"
# opt-in content
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
TOOL_DEFINITIONS = "gen_ai.tool.definitions"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT = "gen_ai.tool.call.result"

CONTENT_ATTRIBUTES = frozenset({
    INPUT_MESSAGES, OUTPUT_MESSAGES, SYSTEM_INSTRUCTIONS, TOOL_DEFINITIONS, TOOL_CALL_ARGUMENTS, TOOL_CALL_RESULT,
})

# settings keys (the `settings` item of a snapshot) -> request attributes
SETTINGS_ATTRIBUTES = {
    "temperature": REQUEST_TEMPERATURE,
    "max_tokens": REQUEST_MAX_TOKENS,
    "top_p": REQUEST_TOP_P,
    "top_k": REQUEST_TOP_K,
    "seed": REQUEST_SEED,
    "stop": REQUEST_STOP_SEQUENCES,
    "frequency_penalty": REQUEST_FREQUENCY_PENALTY,
    "presence_penalty": REQUEST_PRESENCE_PENALTY,
}

SYSTEM_KINDS = frozenset({ItemKind.SYSTEM, ItemKind.PROMPT_SECTION, ItemKind.MEMORY, ItemKind.SUMMARY})

# provider finish reasons -> the conventions' output-message finish_reason values
_FINISH_REASONS = {"tool_calls": "tool_call", "function_call": "tool_call", "max_tokens": "length"}


def to_json(value: Any) -> str:
    """Compact JSON text for an attribute value: keys sorted (live and stored items then agree), non-ASCII kept."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=str)


def parse_json(text: Any) -> Any:
    """A tool call's arguments as an object when they are JSON text; otherwise the text unchanged."""
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def text_part(text: str) -> dict[str, Any]:
    """A text part."""
    return {"type": "text", "content": text}


def tool_call_part(body: dict[str, Any]) -> dict[str, Any]:
    """A tool-call part from a ``tool_call`` item body."""
    return {"type": "tool_call", "id": body.get("id"), "name": body.get("name", ""),
            "arguments": parse_json(body.get("arguments"))}


def tool_response_part(body: dict[str, Any]) -> dict[str, Any]:
    """A tool-call response part from a ``tool_result`` item body."""
    return {"type": "tool_call_response", "id": body.get("call_id"), "response": body.get("content", "")}


def finish_reason(reason: str | None) -> str:
    """A provider's finish reason in the conventions' vocabulary (unknown ones kept as they are)."""
    if not reason:
        return "stop"
    return _FINISH_REASONS.get(reason, reason)


def settings_of(items: Iterable[Item]) -> dict[str, Any]:
    """The model settings a snapshot carried (its ``settings`` items merged in order)."""
    merged: dict[str, Any] = {}
    for item in items:
        if item.kind == ItemKind.SETTINGS:
            merged.update(item.body)
    return merged


def system_instructions(items: Iterable[Item]) -> list[dict[str, Any]]:
    """Prompt sections, memory facts and summaries as the conventions' system-instruction parts."""
    return [text_part(item.text) for item in items if item.kind in SYSTEM_KINDS]


def tool_definitions(items: Iterable[Item]) -> list[dict[str, Any]]:
    """The tools a snapshot offered, in the conventions' (function) form."""
    return [
        {"type": "function", "name": item.body.get("name", ""), "description": item.body.get("description", ""),
         "parameters": item.body.get("parameters", {})}
        for item in items
        if item.kind == ItemKind.TOOL_DEFINITION
    ]


def input_messages(items: Iterable[Item]) -> list[dict[str, Any]]:
    """The conversation a snapshot sent, in order, as the conventions' chat messages.

    Consecutive tool calls join the assistant message before them (as the model produced them);
    each tool result is a ``tool`` message. System content goes to ``gen_ai.system_instructions``.
    """
    messages: list[dict[str, Any]] = []
    for item in items:
        kind, body = item.kind, item.body
        if kind == ItemKind.USER:
            messages.append({"role": "user", "parts": [text_part(item.text)]})
        elif kind == ItemKind.ASSISTANT:
            messages.append({"role": "assistant", "parts": [text_part(item.text)] if item.text else []})
        elif kind == ItemKind.TOOL_CALL:
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last["parts"].append(tool_call_part(body))
            else:
                messages.append({"role": "assistant", "parts": [tool_call_part(body)]})
        elif kind == ItemKind.TOOL_RESULT:
            messages.append({"role": "tool", "parts": [tool_response_part(body)]})
    return messages


def output_messages(items: Iterable[Item], reason: str | None) -> list[dict[str, Any]]:
    """What an inference produced (text and tool calls) as one output message."""
    parts: list[dict[str, Any]] = []
    for item in items:
        if item.kind == ItemKind.TOOL_CALL:
            parts.append(tool_call_part(item.body))
        elif item.kind in (ItemKind.ASSISTANT, ItemKind.TEXT) and item.text:
            parts.append(text_part(item.text))
    return [{"role": "assistant", "parts": parts, "finish_reason": finish_reason(reason)}]


def error_type(error: str | None, fallback: str = "_OTHER") -> str:
    """A low-cardinality error type from a recorded error text (``"ProviderError: ..."``)."""
    if error:
        head = error.split(":", 1)[0].strip()
        if head and " " not in head and len(head) <= 64:
            return head
    return fallback

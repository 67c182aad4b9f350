"""The one interface every model provider implements, and the request and response it speaks.

A :class:`ModelRequest` *is* the snapshot: the ordered context items an inference sends — prompt
sections, memory facts, messages, tool definitions and settings, each with its origin. Providers
translate it to their wire format with :meth:`ModelRequest.chat_messages` and friends, so what the
store records and what the model received cannot drift apart.
"""

from __future__ import annotations

import hashlib
import os
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracer import ContextItem, Item, ItemKind, Origin, OriginKind

from ..errors import RealModelBlockedError

SYSTEM_KINDS = frozenset({ItemKind.SYSTEM, ItemKind.PROMPT_SECTION, ItemKind.MEMORY, ItemKind.SUMMARY})
#: The settings key that keeps the agent's model apart from ``model`` when a chain or router does
#: not simply ask for it (see :meth:`Provider.settings_for`); OpenAIProvider never sends it.
AGENT_MODEL = "agent_model"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call as the model sent it; ``arguments`` is the raw JSON text (it may be invalid).

    ``settled``: the provider ran the call itself (a server tool such as web search) and its
    response already holds the outcome; the agent never executes it and owes it no result.
    """

    id: str
    name: str
    arguments: str
    settled: bool = False


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one model call."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_tokens + other.cached_tokens,
        )


@dataclass(frozen=True, slots=True)
class Attempt:
    """One provider tried for a request: who, the model it was asked for (``model``; "" when it was
    skipped or handed the request on itself), and how it ended (``answered``, ``failed``,
    ``skipped``, ``cancelled``); for a failure, the error and whether it handed the request on."""

    provider: str
    outcome: str
    type: str = "custom"
    error: str = ""
    error_type: str = ""
    fell_back: bool = False
    seconds: float = 0.0
    model: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form recorded on the inference stage."""
        body: dict[str, Any] = {"provider": self.provider, "type": self.type, "outcome": self.outcome,
                                "seconds": round(self.seconds, 6)}
        if self.model:
            body["model"] = self.model
        if self.error:
            body.update(error=self.error, error_type=self.error_type, fell_back=self.fell_back)
        return body


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """What one model call returned.

    ``attempts`` lists every provider a fallback chain or router tried, in order; ``route`` is the
    routing decision that picked the provider (both empty for a plain provider). The agent's loop
    records them on the inference stage.
    """

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str = "stop"
    usage: Usage = Usage()
    model: str = ""
    response_id: str | None = None
    provider: str = ""
    attempts: tuple[Attempt, ...] = ()
    route: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of streamed assistant text."""

    text: str


@dataclass(frozen=True, slots=True)
class ResponseDone:
    """The end of a stream, with the whole response (tool-call deltas assembled)."""

    response: ModelResponse


StreamEvent = TextDelta | ResponseDone


@dataclass(frozen=True)
class ModelRequest:
    """One inference's context, in order, each item with its origin."""

    context: tuple[ContextItem, ...]
    _key: list[str] = field(default_factory=list, compare=False, repr=False)

    @classmethod
    def of(cls, items: Sequence[ContextItem]) -> ModelRequest:
        """A request from context items."""
        return cls(tuple(items))

    @property
    def key(self) -> str:
        """The snapshot's identity: a hash of its ordered item hashes (what replay is keyed by)."""
        if not self._key:
            digest = hashlib.blake2b(digest_size=16)
            for ci in self.context:
                digest.update(ci.item.hash.encode())
            self._key.append(digest.hexdigest())
        return self._key[0]

    def settings(self) -> dict[str, Any]:
        """Model settings (model, temperature, max_tokens, ...) merged from settings items."""
        merged: dict[str, Any] = {}
        for ci in self.context:
            if ci.item.kind == ItemKind.SETTINGS:
                merged.update(ci.item.body)
        return merged

    @property
    def model(self) -> str:
        """The requested model name ("" when no settings name one)."""
        return str(self.settings().get("model", ""))

    @property
    def requested_model(self) -> str:
        """The model the agent asked for ("" for none): :data:`AGENT_MODEL` when the settings keep
        it apart from ``model`` (a chain or router whose providers have models of their own), else
        ``model``. What a router's ``select`` should route on."""
        settings = self.settings()
        return str(settings.get(AGENT_MODEL) or settings.get("model") or "")

    def with_model(self, model: str, source: str) -> ModelRequest:
        """This request asking for ``model``: a settings item naming it is added last (settings
        merge in order), with ``source`` (who chose it) as its origin."""
        settings = Item(ItemKind.SETTINGS, {"model": model})
        return ModelRequest((*self.context, ContextItem(settings, Origin(OriginKind.CONFIG, source=source))))

    def system_text(self) -> str:
        """The system message: prompt sections, memory facts and summaries joined in order."""
        return "\n\n".join(ci.item.text for ci in self.context if ci.item.kind in SYSTEM_KINDS)

    def tool_definitions(self) -> list[dict[str, Any]]:
        """The offered tools as ``{"name", "description", "parameters"}``."""
        return [dict(ci.item.body) for ci in self.context if ci.item.kind == ItemKind.TOOL_DEFINITION]

    def chat_messages(self) -> list[dict[str, Any]]:
        """The conversation in OpenAI Chat Completions form (system first, tool calls grouped)."""
        messages: list[dict[str, Any]] = []
        system = self.system_text()
        if system:
            messages.append({"role": "system", "content": system})
        for ci in self.context:
            kind, body = ci.item.kind, ci.item.body
            if kind == ItemKind.USER:
                messages.append({"role": "user", "content": body.get("text", "")})
            elif kind == ItemKind.ASSISTANT:
                messages.append({"role": "assistant", "content": body.get("text", "")})
            elif kind == ItemKind.TOOL_CALL:
                if body.get("settled"):  # run by the provider: no result follows, nothing to send back
                    continue
                call = {
                    "id": body["id"],
                    "type": "function",
                    "function": {"name": body["name"], "arguments": body.get("arguments", "")},
                }
                last = messages[-1] if messages else None
                if last is not None and last["role"] == "assistant":
                    last.setdefault("tool_calls", []).append(call)
                    if not last.get("content"):
                        last["content"] = None
                else:
                    messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            elif kind == ItemKind.TOOL_RESULT:
                content = body.get("content", "")
                messages.append({
                    "role": "tool",
                    "tool_call_id": body.get("call_id", ""),
                    "content": content if isinstance(content, str) else ci.item.text,
                })
        return messages

    def last_user_text(self) -> str:
        """The newest user message ("" when there is none)."""
        for ci in reversed(self.context):
            if ci.item.kind == ItemKind.USER:
                return str(ci.item.body.get("text", ""))
        return ""


class Provider(ABC):
    """A model provider: complete, stream, count tokens, list models.

    ``name`` names this instance in recordings; ``type`` says what kind of provider it is
    (``openai``, ``local``, ``fallback``, ``router``, ``custom``, ...); :meth:`is_ready` says
    whether it can take a request now (a chain or router skips providers that cannot).
    """

    name: str = "provider"
    type: str = "custom"
    #: True for providers that send requests to a real model over the network.
    real: bool = False

    def is_ready(self) -> bool:
        """True when the provider is configured and open (default: always)."""
        return True

    @property
    def configured_model(self) -> str:
        """The model this provider was set up to ask for, "" when it has none of its own (a test
        model, a chain, a router, an :class:`OpenAIProvider` given no model). In a chain or router
        a provider's own model is the one it is asked for, whatever the agent names (default: its
        ``model`` attribute)."""
        return str(getattr(self, "model", "") or "")

    def model_for(self, requested: str) -> str:
        """The model a request naming ``requested`` ("" for none) asks this provider for: the
        requested one, else its ``model``; a provider with neither (a test model) is named for
        itself. A chain or router says "" when that depends on which of its providers answers."""
        return requested or str(getattr(self, "model", "") or "") or self.name

    def settings_for(self, requested: str) -> dict[str, str]:
        """The model entries of an agent's settings item when the agent names ``requested`` ("" for
        none): ``model``, what the request asks for (left out when no single model is: a chain whose
        providers ask for different ones), and :data:`AGENT_MODEL`, the agent's own choice, when
        that is not simply what is asked (a chain or router passes it on to providers without a
        model of their own, and a router routes on it)."""
        model = self.model_for(requested)
        entries = {"model": model} if model else {}
        if requested and requested != model:
            entries[AGENT_MODEL] = requested
        return entries

    @abstractmethod
    async def complete(self, request: ModelRequest) -> ModelResponse:
        """One model call."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream one model call: text deltas, then :class:`ResponseDone` (default: no deltas)."""
        response = await self.complete(request)
        if response.text:
            yield TextDelta(response.text)
        yield ResponseDone(response)

    def count_tokens(self, request: ModelRequest) -> int:
        """An estimate of the request's input tokens (about four characters a token)."""
        chars = sum(len(ci.item.text) for ci in request.context)
        return (chars + 3) // 4

    async def list_models(self) -> list[str]:
        """The models this provider offers (empty when it cannot say)."""
        return []


_block_real = os.environ.get("FOOTPRINT_BLOCK_REAL_MODELS") == "1"


def block_real_models(blocked: bool = True) -> None:
    """Refuse (or allow again) every request to a real model; the pytest plugin blocks them."""
    global _block_real
    _block_real = blocked


def real_models_blocked() -> bool:
    """True while real model requests are refused."""
    return _block_real


#: The refused requests, in order (the pytest plugin fails the test that made one, even when the
#: agent turned the error into a failed run and the test never looked at it).
blocked_requests: list[str] = []


def check_real_model_allowed(provider: str) -> None:
    """Raise :class:`RealModelBlockedError` when real model requests are blocked."""
    if _block_real:
        blocked_requests.append(provider)
        raise RealModelBlockedError(
            f"{provider}: a real model request was made while real model requests are blocked "
            f"(tests use ScriptedModel, FunctionModel or ReplayProvider)",
            provider=provider,
        )

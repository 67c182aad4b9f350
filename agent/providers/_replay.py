"""Record a real provider's exchanges to a cassette, and replay them with zero network calls.

A cassette is one JSON file (``fixtures/cassettes/NAME.json`` for a bare name) holding, per model
call, the request's snapshot key (:attr:`ModelRequest.key`), a readable summary of the request
(one line per context item: kind, origin, text) so a changed prompt shows up in a code review, and
the response. In replay mode a request is looked up by its key; a request that is not in the
cassette raises :class:`ReplayMismatchError`, naming the call and listing how it differs from the
nearest recorded request.

A cassette never holds a secret: the recorder's redaction policy (:class:`tracer.RedactionPolicy`,
the default one unless ``redaction=`` says otherwise) masks everything written into it — each
request item, the response's text and tool-call arguments, every name. Requests are keyed and
matched on their masked form, so a request whose secret differs from the recorded one (another
API key in the user's message, another password in a tool's result) still replays, and what
replays is the masked response (a tool call's ``"password"`` argument arrives as ``[REDACTED]``).

    model = ReplayProvider("weather", provider=OpenAIProvider(...), mode="record")  # once, online
    model = ReplayProvider("weather")                                               # in tests
"""

from __future__ import annotations

import difflib
import json
import os
import tempfile
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tracer import ContextItem, Item, RedactionPolicy

from ..errors import ReplayMismatchError, UserError
from ._base import (
    ModelRequest,
    ModelResponse,
    Provider,
    ResponseDone,
    StreamEvent,
    TextDelta,
    ToolCall,
    Usage,
)

FORMAT = "footprint.cassette/1"
DEFAULT_ROOT = Path("fixtures") / "cassettes"
_TEXT_LIMIT = 2000  # characters of an item's text kept in the summary (the key covers all of it)
_SHOWN = 160  # characters of an item's text shown in a mismatch

Mode = Literal["replay", "record", "auto"]


def cassette_path(cassette: str | os.PathLike[str], root: str | os.PathLike[str] = DEFAULT_ROOT) -> Path:
    """Where a cassette lives: a bare name goes to ``root/NAME.json``; a path is used as given."""
    path = Path(cassette)
    if path.suffix != ".json":
        path = path.with_name(path.name + ".json")
    if len(path.parts) == 1:
        path = Path(root) / path
    return path


def masked(request: ModelRequest, policy: RedactionPolicy) -> ModelRequest:
    """``request`` with ``policy`` applied to every item (the form a cassette keys and shows)."""
    if policy.is_noop:
        return request
    items = [ci if (item := _masked_item(ci.item, policy)) is ci.item else ContextItem(item, ci.origin)
             for ci in request.context]
    return ModelRequest.of(items)


def _masked_item(item: Item, policy: RedactionPolicy) -> Item:
    if not policy.may_change(item.canonical_body):
        return item
    body = policy.value(item.body)
    return item if body == item.body else Item(item.kind, body)


def summarize(request: ModelRequest) -> list[dict[str, Any]]:
    """The readable form of a request: one entry per context item, in order."""
    return [_summarize_item(ci) for ci in request.context]


def _summarize_item(ci: ContextItem) -> dict[str, Any]:
    origin = ci.origin
    where = origin.kind if not origin.source else f"{origin.kind}:{origin.source}"
    text = ci.item.text
    if len(text) > _TEXT_LIMIT:
        text = text[:_TEXT_LIMIT] + f"… (+{len(text) - _TEXT_LIMIT} chars)"
    return {"kind": ci.item.kind, "origin": where, "hash": ci.item.hash, "text": text}


@dataclass
class Exchange:
    """One recorded model call."""

    key: str
    turn: int  # the call's position in the cassette, from 1
    request: list[dict[str, Any]]
    response: ModelResponse

    def to_dict(self) -> dict[str, Any]:
        """The JSON form written to the cassette."""
        r = self.response
        return {
            "turn": self.turn,
            "key": self.key,
            "request": self.request,
            "response": {
                "text": r.text,
                "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in r.tool_calls],
                "finish_reason": r.finish_reason,
                "usage": {"input_tokens": r.usage.input_tokens, "output_tokens": r.usage.output_tokens,
                          "cached_tokens": r.usage.cached_tokens},
                "model": r.model,
                "response_id": r.response_id,
                "provider": r.provider,
            },
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Exchange:
        """From :meth:`to_dict`'s form (KeyError/TypeError/ValueError when malformed)."""
        r = data["response"]
        usage = r.get("usage") or {}
        response = ModelResponse(
            text=str(r.get("text") or ""),
            tool_calls=tuple(ToolCall(str(c["id"]), str(c["name"]), str(c.get("arguments", "")))
                             for c in r.get("tool_calls") or ()),
            finish_reason=str(r.get("finish_reason") or "stop"),
            usage=Usage(int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0)),
                        int(usage.get("cached_tokens", 0))),
            model=str(r.get("model") or ""),
            response_id=r.get("response_id"),
            provider=str(r.get("provider") or "replay"),
        )
        return cls(str(data["key"]), int(data["turn"]), list(data.get("request") or ()), response)


class ReplayProvider(Provider):
    """Serves recorded responses by snapshot key; in record mode, calls ``provider`` and writes them.

    ``mode``: ``replay`` (the default; the cassette must exist), ``record`` (call ``provider`` and
    rewrite the cassette from scratch, one exchange at a time) or ``auto`` (replay when the cassette
    exists, else record). The environment variable ``FOOTPRINT_RECORD=1`` turns ``auto`` into
    ``record``, to refresh cassettes after an intended change. A key recorded several times is
    served in the recorded order (the last one again when they run out).

    ``redaction`` masks what is written (default: the recorder's default policy; give a recorder's
    own policy when it has extra keys or patterns); requests are matched on their masked form.
    As to models it answers as the recorded provider did, so an agent's settings item (and the
    request's key) is the same in replay as when it was recorded.
    """

    real = False
    model: str = ""

    def __init__(
        self,
        cassette: str | os.PathLike[str],
        *,
        provider: Provider | None = None,
        mode: Mode = "replay",
        root: str | os.PathLike[str] = DEFAULT_ROOT,
        redaction: RedactionPolicy | None = None,
    ) -> None:
        if mode not in ("replay", "record", "auto"):
            raise UserError(f"ReplayProvider: mode must be replay, record or auto, not {mode!r}")
        self.path = cassette_path(cassette, root)
        if mode == "auto":
            mode = "record" if os.environ.get("FOOTPRINT_RECORD") == "1" or not self.path.exists() else "replay"
        if mode == "record" and provider is None:
            raise UserError(f"ReplayProvider: recording {self.path} needs the provider to record from")
        self.mode: Mode = mode
        self.provider = provider
        self.redaction = redaction if redaction is not None else RedactionPolicy()
        self.exchanges: list[Exchange] = []
        self.calls = 0  # requests received
        self._served: dict[str, int] = {}
        # the recorded provider's name and models: an agent's settings item names the model, so a
        # replay must answer as the recording did for its requests to match (model_for below)
        self._configured_model = ""
        self._models: dict[str, str] = {}  # a model the agent named -> the model the provider asked
        if mode == "replay":
            self.exchanges, self.name, self.model = self._load()
        else:
            assert provider is not None
            self.name = provider.name
            self.model = str(getattr(provider, "model", "") or "")
            self._configured_model = provider.configured_model
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._write()  # a re-recording starts from an empty cassette
        self._by_key: dict[str, list[Exchange]] = {}
        for exchange in self.exchanges:
            self._by_key.setdefault(exchange.key, []).append(exchange)

    # ------------------------------------------------------------------ the provider interface

    @property
    def configured_model(self) -> str:
        """The recorded provider's own model ("" when it had none)."""
        return self._configured_model

    def model_for(self, requested: str) -> str:
        """What the recorded provider answered (recording: what it answers, kept for the replay)."""
        if self.mode == "record":
            assert self.provider is not None
            self._models[requested] = self.provider.model_for(requested)
            return self._models[requested]
        known = self._models.get(requested)
        return known if known is not None else super().model_for(requested)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The recorded response for ``request`` (record mode: the wrapped provider's, written down)."""
        self.calls += 1
        if self.mode == "record":
            assert self.provider is not None
            return self._keep(request, await self.provider.complete(request))
        return self._lookup(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream one call; a replay sends the recorded text as one delta."""
        if self.mode != "record":
            response = await self.complete(request)
            if response.text:
                yield TextDelta(response.text)
            yield ResponseDone(response)
            return
        assert self.provider is not None
        self.calls += 1
        async for event in self.provider.stream(request):
            if isinstance(event, ResponseDone):
                event = ResponseDone(self._keep(request, event.response))
            yield event

    def count_tokens(self, request: ModelRequest) -> int:
        """The wrapped provider's estimate when recording, else the default estimate."""
        if self.provider is not None:
            return self.provider.count_tokens(request)
        return super().count_tokens(request)

    # ------------------------------------------------------------------ replay

    def _lookup(self, request: ModelRequest) -> ModelResponse:
        key = masked(request, self.redaction).key
        recorded = self._by_key.get(key)
        if not recorded:
            raise self._mismatch(request)
        index = self._served.get(key, 0)
        self._served[key] = index + 1
        return recorded[min(index, len(recorded) - 1)].response

    def _mismatch(self, request: ModelRequest) -> ReplayMismatchError:
        stage = f"model call {self.calls}"
        if not self.exchanges:
            return ReplayMismatchError(
                f"replay: {stage} is not in cassette {self.path}: the cassette is empty; record it with "
                f"mode='record' (or FOOTPRINT_RECORD=1 with mode='auto')",
                stage=stage,
            )
        mine = summarize(masked(request, self.redaction))
        nearest = max(self.exchanges, key=lambda e: (_similarity(mine, e.request), e.turn == self.calls))
        lines = item_diff(nearest.request, mine)
        difference = "\n".join(lines) if lines else "  (the items are the same; their hashes differ)"
        return ReplayMismatchError(
            f"replay: {stage} (turn {self.calls}) sent a request that is not in cassette {self.path}; "
            f"the nearest recorded request is turn {nearest.turn} (key {nearest.key[:12]}), which differs:\n"
            f"{difference}\n"
            f"If the change is intended, record the cassette again (mode='record', or FOOTPRINT_RECORD=1 with "
            f"mode='auto').",
            stage=stage,
            difference=difference,
        )

    # ------------------------------------------------------------------ record

    def _keep(self, request: ModelRequest, response: ModelResponse) -> ModelResponse:
        """Write the exchange down masked; the caller gets the response as it came."""
        shown = masked(request, self.redaction)
        exchange = Exchange(shown.key, len(self.exchanges) + 1, summarize(shown), response)
        if not self.redaction.is_noop:
            exchange = Exchange.from_dict(self.redaction.value(exchange.to_dict()))
        self.exchanges.append(exchange)
        self._by_key.setdefault(exchange.key, []).append(exchange)
        self._write()  # after every exchange: an interrupted recording keeps what it has
        return response

    def _write(self) -> None:
        header = self.redaction.value({"provider": self.name, "model": self.model,
                                       "configured_model": self._configured_model, "models": self._models})
        document = {"format": FORMAT, **header, "exchanges": [e.to_dict() for e in self.exchanges]}
        text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
        fd, tmp = tempfile.mkstemp(prefix=self.path.name, suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _load(self) -> tuple[list[Exchange], str, str]:
        if not self.path.exists():
            raise UserError(
                f"ReplayProvider: no cassette at {self.path}; record it first with mode='record' and the "
                f"real provider (or use mode='auto')"
            )
        try:
            document = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UserError(f"ReplayProvider: cannot read cassette {self.path}: {exc}") from exc
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise UserError(f"ReplayProvider: {self.path} is not a footprint cassette (format {FORMAT} expected)")
        exchanges = []
        for index, data in enumerate(document.get("exchanges") or ()):
            try:
                exchanges.append(Exchange.from_dict(data))
            except (KeyError, TypeError, ValueError) as exc:
                raise UserError(f"ReplayProvider: exchange {index + 1} of {self.path} is malformed: {exc!r}") from exc
        self._configured_model = str(document.get("configured_model") or "")
        models = document.get("models")
        self._models = {str(k): str(v) for k, v in models.items()} if isinstance(models, dict) else {}
        return exchanges, str(document.get("provider") or "replay"), str(document.get("model") or "")


def _similarity(a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]]) -> float:
    return difflib.SequenceMatcher(None, [e["hash"] for e in a], [e["hash"] for e in b], autojunk=False).ratio()


def item_diff(recorded: Sequence[dict[str, Any]], sent: Sequence[dict[str, Any]]) -> list[str]:
    """How ``sent`` differs from ``recorded``, item by item: ``changed``, ``removed`` and ``added`` lines.

    Items are compared by hash in order; within a replaced stretch, a sent item and a recorded
    one of the same kind and origin (a prompt section, a memory key, a tool) count as one change.
    """
    matcher = difflib.SequenceMatcher(None, [e["hash"] for e in recorded], [e["hash"] for e in sent],
                                      autojunk=False)
    lines: list[str] = []
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op == "equal":
            continue
        left = list(range(a0, a1))
        added: list[int] = []
        for j in range(b0, b1):
            entry = sent[j]
            twin = next((i for i in left if (recorded[i]["kind"], recorded[i]["origin"]) == (entry["kind"], entry["origin"])),
                        None)
            if twin is None:
                added.append(j)
                continue
            left.remove(twin)
            lines.append(f"  changed  #{j} {entry['kind']} [{entry['origin']}]: "
                         f"{_shown(recorded[twin]['text'])} -> {_shown(entry['text'])}")
        lines += [f"  removed  #{i} {recorded[i]['kind']} [{recorded[i]['origin']}]: {_shown(recorded[i]['text'])}"
                  for i in left]
        lines += [f"  added    #{j} {sent[j]['kind']} [{sent[j]['origin']}]: {_shown(sent[j]['text'])}"
                  for j in added]
    return lines


def _shown(text: str) -> str:
    text = " ".join(str(text).split())
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "…")

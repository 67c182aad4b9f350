"""Fixtures for provider tests: a real OpenAI-wire HTTP server on 127.0.0.1, and request builders.

The server (:class:`OpenAIServer`) answers each request with the next reply of a per-test script and
records what it received, so tests drive the real ``openai`` SDK — HTTP, JSON and SSE parsing
included — without touching the network. It lives here rather than in its own module because test
directories have no ``__init__.py`` and cannot import each other.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agent.providers import OpenAIProvider, block_real_models, real_models_blocked
from agent.providers._base import ModelRequest
from tests.agent.providers.openaikit import Sleeps
from tracer import ContextItem, Item, ItemKind, Origin, OriginKind


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP reply: a whole body, or SSE events written one by one."""

    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    events: tuple[bytes, ...] | None = None
    delay: float = 0.0


@dataclass(frozen=True)
class Received:
    """A request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


class OpenAIServer:
    """A threaded HTTP server on 127.0.0.1 speaking just enough of the OpenAI wire format."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        # A short poll interval: shutdown() waits up to one interval, at the end of every test.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="openai-server", daemon=True
        )

    @property
    def base_url(self) -> str:
        """The URL to give the SDK as ``base_url``."""
        return f"http://127.0.0.1:{self._httpd.server_port}/v1"

    def start(self) -> None:
        """Serve in a background thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop serving; wakes slow replies so they end at once."""
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def script(self, *replies: Reply) -> None:
        """Queue replies, answered in order; a request beyond the script gets a 400 saying so."""
        with self._lock:
            self.replies.extend(replies)

    @property
    def bodies(self) -> list[Any]:
        """The JSON bodies received, in order."""
        return [request.body for request in self.received]

    # -- reply builders ------------------------------------------------------------------------

    @staticmethod
    def json(body: Any, *, status: int = 200, headers: dict[str, str] | None = None, delay: float = 0.0) -> Reply:
        """A JSON reply."""
        return Reply(status, json.dumps(body).encode(), headers=headers or {}, delay=delay)

    @staticmethod
    def error(status: int, message: str, *, headers: dict[str, str] | None = None, kind: str = "error") -> Reply:
        """An OpenAI-style error body with ``status``."""
        body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
        return Reply(status, json.dumps(body).encode(), headers=headers or {})

    @staticmethod
    def raw(body: str, *, status: int = 200, content_type: str = "application/json") -> Reply:
        """A reply with exactly this body (e.g. something that is not JSON)."""
        return Reply(status, body.encode(), content_type=content_type)

    @staticmethod
    def sse(events: Sequence[dict[str, Any] | str], *, done: bool = True) -> Reply:
        """A ``text/event-stream`` reply: each event is one ``data:`` line (dicts as JSON), then [DONE]."""
        lines = [f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode() for e in events]
        if done:
            lines.append(b"data: [DONE]\n\n")
        return Reply(200, content_type="text/event-stream", events=tuple(lines))

    # -- serving -------------------------------------------------------------------------------

    def _next_reply(self, received: Received) -> Reply:
        with self._lock:
            self.received.append(received)
            if self.replies:
                return self.replies.pop(0)
        return self.error(400, f"openai_server: no scripted reply left for {received.method} {received.path}")

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            # HTTP/1.0: one request per connection, and a stream ends when the connection closes.
            protocol_version = "HTTP/1.0"

            def do_GET(self) -> None:
                self._answer(None)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                self._answer(json.loads(raw) if raw else None)

            def _answer(self, body: Any) -> None:
                headers = {key.lower(): value for key, value in self.headers.items()}
                reply = server._next_reply(Received(self.command, self.path, headers, body))
                if reply.delay and server._stopping.wait(reply.delay):
                    return
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", reply.content_type)
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    if reply.events is None:
                        self.send_header("content-length", str(len(reply.body)))
                        self.end_headers()
                        self.wfile.write(reply.body)
                        return
                    self.end_headers()
                    for event in reply.events:
                        self.wfile.write(event)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test); nothing left to do

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

        return Handler


def _running_server() -> Iterator[OpenAIServer]:
    server = OpenAIServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    """A running loopback OpenAI-wire server, stopped after the test."""
    yield from _running_server()


@pytest.fixture(scope="module")
def module_openai_server() -> Iterator[OpenAIServer]:
    """One loopback OpenAI-wire server for every test of a module (a property test's examples)."""
    yield from _running_server()


@pytest.fixture
def sleeps() -> Sleeps:
    """The OpenAIProvider's sleep: records the delays asked for, waits for none."""
    return Sleeps()


@pytest.fixture
async def provider(openai_server: OpenAIServer, sleeps: Sleeps) -> AsyncIterator[OpenAIProvider]:
    """An OpenAIProvider on :func:`openai_server`, sleeping through ``sleeps``, without jitter."""
    provider = OpenAIProvider(
        "gpt-default", api_key="test-key", base_url=openai_server.base_url, sleep=sleeps, jitter=lambda cap: cap
    )
    yield provider
    await provider.aclose()


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No real key or base URL from the environment, and real model requests blocked."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "OPENAI_ADMIN_KEY"):
        monkeypatch.delenv(name, raising=False)
    was_blocked = real_models_blocked()
    block_real_models(True)
    yield
    block_real_models(was_blocked)


def make_request(
    *texts: str,
    settings: dict[str, Any] | None = None,
    tools: Sequence[dict[str, Any]] = (),
    system: str | None = None,
) -> ModelRequest:
    """A request with an optional system prompt, user messages, tool definitions and settings."""
    items: list[ContextItem] = []
    if system is not None:
        items.append(ContextItem(Item.of_text(ItemKind.SYSTEM, system), Origin(OriginKind.CONFIG, source="persona")))
    for tool in tools:
        items.append(ContextItem(Item(ItemKind.TOOL_DEFINITION, dict(tool)), Origin(OriginKind.CONFIG, source="tools")))
    if settings is not None:
        items.append(ContextItem(Item(ItemKind.SETTINGS, dict(settings)), Origin(OriginKind.CONFIG, source="settings")))
    for text in texts:
        items.append(ContextItem(Item.of_text(ItemKind.USER, text), Origin(OriginKind.USER)))
    return ModelRequest.of(items)


@pytest.fixture
def request_of() -> Callable[..., ModelRequest]:
    """:func:`make_request`, as a fixture (test modules cannot import from conftest)."""
    return make_request

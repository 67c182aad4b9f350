"""Helpers for the host tests: agents on test models and a loopback server in a thread."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from agent import Agent, PauseRun, Tool
from agent.providers import FunctionModel, ModelRequest
from tracer import Recorder


@contextmanager
def serve_in_thread(app: Any) -> Iterator[str]:
    """Run ``app`` with uvicorn on 127.0.0.1 on a free port in a thread; yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()


def echo_model() -> FunctionModel:
    """Answers with the count of user messages it saw and the last one: 'echo #n: text'."""

    def answer(request: ModelRequest) -> str:
        users = [ci.item.text for ci in request.context if ci.item.kind == "user"]
        return f"echo #{len(users)}: {users[-1] if users else ''}"

    return FunctionModel(answer, name="echo")


def make_agent(provider: Any = None, *, recorder: Recorder | None = None, tools: list[Tool] | None = None,
               name: str = "assistant") -> Agent:
    """An agent on the echo model (or ``provider``)."""
    return Agent(name, provider=provider or echo_model(), recorder=recorder, tools=tools or [])


def ask_tool(question: str = "Which day?") -> Tool:
    """A tool that pauses the run to ask a person."""

    async def execute(_: dict[str, Any]) -> str:
        raise PauseRun(question)

    return Tool("ask_person", "Ask the user something.", {"type": "object", "properties": {}}, execute)

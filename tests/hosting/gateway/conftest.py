"""Fixtures for the gateway tests: a gateway on test models, its app, and a default-agents file."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from agent import Tool, ToolRegistry
from agent.providers import FunctionModel, ModelRequest
from hosting import InMemorySessions, create_app
from hosting.gateway import Gateway, GatewaySettings, InMemoryAgents
from tracer import Recorder, Store

TOKEN = "gw-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SEEDS = [
    {"id": "research", "name": "Research Agent", "systemPrompt": "You research things.", "provider": "default",
     "model": "default", "emoji": "🔬", "category": "knowledge",
     "config": {"maxTokens": 4096, "temperature": 0.3, "maxTurns": 10, "maxToolCalls": 20, "tools": ["lookup"]},
     "triggers": {"keywords": ["research", "find papers"]}},
    {"id": "coder", "name": "Code Agent", "systemPrompt": "You write code.", "provider": "default",
     "model": "default", "config": {"maxTokens": 8192, "temperature": 0.1, "maxTurns": 25, "maxToolCalls": 200,
                                    "toolGroups": ["files"]},
     "triggers": {"keywords": ["python", "bug"]}},
]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "recorded: the gateway fixture records runs into a store")


def base_prompt(request: ModelRequest) -> str:
    """The base prompt section the model was sent (its first line)."""
    for ci in request.context:
        if ci.item.kind == "prompt_section" and ci.item.body.get("section") == "base":
            return str(ci.item.body["text"]).split("\n")[0]
    return ""


def answer(request: ModelRequest) -> str:
    """Says which prompt it saw and what it was told; quotes a memory line when one is there."""
    memory = [ci.item.text for ci in request.context if ci.item.kind == "memory"]
    return f"[{base_prompt(request)}] {request.last_user_text()}" + (f" | {memory[0]}" if memory else "")


def lookup_tool(name: str = "lookup") -> Tool:
    async def execute(arguments: dict[str, Any]) -> str:
        return "found"

    return Tool(name, "Look something up.", {"type": "object", "properties": {}}, execute)


def clock() -> datetime:
    return datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


@pytest.fixture
def seed_file(tmp_path: Path) -> Path:
    path = tmp_path / "default-agents.json"
    path.write_text(json.dumps({"agents": SEEDS}), encoding="utf-8")
    return path


@pytest.fixture
def store(tmp_path: Path) -> Store:
    opened = Store.open(tmp_path / "fp.duckdb")
    yield opened  # type: ignore[misc]
    opened.close()


@pytest.fixture
async def gateway(request: pytest.FixtureRequest, seed_file: Path) -> AsyncIterator[Gateway]:
    """A gateway with the seed agents; it records runs only for tests marked ``recorded`` (a store costs
    most of a second to open on a busy machine)."""
    store: Store | None = request.getfixturevalue("store") if request.node.get_closest_marker("recorded") else None
    model = FunctionModel(answer, name="echo")
    other = FunctionModel(lambda r: f"other: {r.last_user_text()}", name="other")
    gw = Gateway(
        InMemoryAgents(), settings=GatewaySettings({"echo": model, "other": other}, "echo", "echo-1"),
        registry=ToolRegistry([lookup_tool(), lookup_tool("read_file"), lookup_tool("write_file")]),
        tool_groups={"files": ["read_file", "write_file"]}, sessions=InMemorySessions(),
        recorder=Recorder(store) if store is not None else None, seed_file=seed_file, clock=clock,
    )
    await gw.start()
    yield gw
    await gw.close()


@pytest.fixture
async def client(gateway: Gateway) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(gateway=gateway, token=TOKEN, close_host=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://host",
                                 headers=AUTH) as c:
        yield c

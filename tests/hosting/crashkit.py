"""The agent `footprint serve --agent tests.hosting.crashkit:make_agent` runs in the crash test.

"do it" makes the model call two tools in one batch: `note` (finishes at once) and
`wait_for_signal` (blocks until the file ``go`` exists in $FOOTPRINT_CRASH_DIR). Every execution
is appended to ``executions.log`` there, so the test can count them across processes.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from agent import Agent, Tool
from agent.providers import FunctionModel, ModelRequest, calls
from tracer import Recorder


def _dir() -> Path:
    return Path(os.environ["FOOTPRINT_CRASH_DIR"])


def _log(line: str) -> None:
    with open(_dir() / "executions.log", "a") as f:
        f.write(line + "\n")


async def _note(arguments: dict[str, Any]) -> str:
    _log(f"note {arguments['text']}")
    return f"noted {arguments['text']}"


async def _wait_for_signal(_: dict[str, Any]) -> str:
    _log("wait")
    while not (_dir() / "go").exists():
        await asyncio.sleep(0.02)
    return "signalled"


def _answer(request: ModelRequest) -> Any:
    users = [ci for ci in request.context if ci.item.kind == "user"]
    last = users[-1].item.text if users else ""
    if last == "do it":
        results = [ci.item.body["content"] for ci in request.context if ci.item.kind == "tool_result"]
        if not results:
            return calls(("note", {"text": "A"}, "call-note"), ("wait_for_signal", {}, "call-wait"))
        return "done: " + ", ".join(results)
    return f"echo #{len(users)}: {last}"


def make_agent(recorder: Recorder) -> Agent:
    """The crash test's agent."""
    tools = [
        Tool("note", "Write a note.", {"type": "object", "properties": {"text": {"type": "string"}},
                                       "required": ["text"]}, _note),
        Tool("wait_for_signal", "Wait for a signal.", {"type": "object", "properties": {}}, _wait_for_signal,
             timeout=None),
    ]
    return Agent("crashkit", provider=FunctionModel(_answer), tools=tools, recorder=recorder)

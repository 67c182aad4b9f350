"""The soak workload shared by ``bench/soak.py`` and its CI-sized test: long sessions of big turns.

Each session sends ``turns`` messages of 1-4 KB (``size`` fixes it); every third turn asks for a
tool call (``lookup``), whose result the answer quotes. The model is a test model, so what is
measured is the host and its stores.
"""

from __future__ import annotations

import random
from typing import Any

from agent import Agent, Tool
from agent.providers import FunctionModel, ModelRequest, calls
from tracer import Recorder

LOOKUP = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}


def message(session: int, turn: int, size: int | None = None, *, seed: int = 0) -> str:
    """The ``turn``-th message of ``session``: about ``size`` bytes (1-4 KB at random when None)."""
    rng = random.Random(seed * 1_000_003 + session * 10_007 + turn)
    length = size if size is not None else rng.randint(1024, 4096)
    tool = "[tool] " if turn % 3 == 2 else ""
    words = []
    total = len(tool) + 20
    while total < length:
        word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
        words.append(word)
        total += len(word) + 1
    return f"{tool}s{session} t{turn}: " + " ".join(words)


def _answer(request: ModelRequest) -> Any:
    text = request.last_user_text()
    head = text.split(":", 1)[0]
    if text.startswith("[tool]"):
        results = []
        for ci in reversed(request.context):  # the results since the message
            if ci.item.kind == "user":
                break
            if ci.item.kind == "tool_result":
                results.append(ci.item.body["content"])
        if not results:
            return calls(("lookup", {"key": head}, "call-" + head.replace(" ", "-")))
        return f"{head} answered with {results[-1]}"
    return f"{head} answered ({len(text)} bytes read)"


async def _lookup(arguments: dict[str, Any]) -> str:
    return f"value of {arguments['key']}"


def soak_agent(recorder: Recorder | None = None) -> Agent:
    """The soak's agent: a test model and one tool."""
    model = FunctionModel(_answer, name="soak", keep_requests=0)
    return Agent("soak", provider=model, tools=[Tool("lookup", "Look a key up.", LOOKUP, _lookup)],
                 recorder=recorder)


def soak_agent_unrecorded(recorder: Recorder | None = None) -> Agent:
    """The soak's agent recording nothing (to tell the session store's cost from the recorder's)."""
    return soak_agent(None)

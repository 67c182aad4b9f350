"""The host process of the crash loop (tests/hosting/test_crash.py): forked, SIGKILLed, forked again.

A child opens the store, serves ``sessions`` sessions at once in process — each sending its turns
``start..turns`` one after another, every turn a tool batch of a durable and a non-durable call —
and writes a line to ``acks`` for each turn whose reply it got (``session turn run_id``). A reply
means the turn is stored, its recorded run too; the parent kills the child at random moments and
checks what the store holds against the acks. ``durability`` is the host's and the recorder's.
"""

from __future__ import annotations

import asyncio
import os
import random
from pathlib import Path
from typing import Any

from agent import Agent, Tool
from agent.providers import FunctionModel, ModelRequest, calls
from tracer import Durability, Recorder, Store

SCHEMA = {"type": "object", "properties": {"turn": {"type": "string"}}, "required": ["turn"]}


def turn_text(session: int, turn: int) -> str:
    return f"s{session} turn {turn}: do both"


def _log(directory: Path, line: str) -> None:
    fd = os.open(directory / "executions.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def make_agent(directory: Path, recorder: Recorder, seed: int) -> Agent:
    rng = random.Random(seed)

    async def durable(arguments: dict[str, Any]) -> str:
        _log(directory, f"durable {arguments['turn']}")
        await asyncio.sleep(rng.random() * 0.02)
        return f"looked up {arguments['turn']}"

    async def payment(arguments: dict[str, Any]) -> str:
        _log(directory, f"payment {arguments['turn']}")
        await asyncio.sleep(rng.random() * 0.03)
        return f"paid {arguments['turn']}"

    def answer(request: ModelRequest) -> Any:
        text = request.last_user_text()
        tag = text.split(":", 1)[0].replace(" ", "-")
        since = []
        for ci in reversed(request.context):
            if ci.item.kind == "user":
                break
            since.append(ci.item.kind)
        if "tool_result" not in since:
            return calls(("lookup", {"turn": tag}, f"{tag}-d"), ("pay", {"turn": tag}, f"{tag}-p"))
        return f"done {tag}"

    tools = [Tool("lookup", "Look up (safe to repeat).", SCHEMA, durable, durable=True),
             Tool("pay", "Pay (never twice).", SCHEMA, payment)]
    return Agent("crashloop", provider=FunctionModel(answer, keep_requests=0), tools=tools, recorder=recorder)


async def serve(directory: Path, sessions: int, starts: list[int], turns: int, seed: int,
                durability: str = "sync") -> None:
    from hosting import DuckDBSessions, standing_agent

    store = Store.open(directory / "fp.duckdb")
    recorder = Recorder(store, durability=Durability(durability))
    host = standing_agent(agent_factory=lambda: make_agent(directory, recorder, seed), sessions=DuckDBSessions(store),
                          durability=durability, recordings=store, close_sessions=True, host_id="crashloop")
    await host.start()

    async def session(n: int) -> None:
        for t in range(starts[n], turns):
            reply = await host.handle(turn_text(n, t), session_id=f"s{n}", turn_id=f"s{n}-t{t}")
            if reply.status != "answered":
                raise RuntimeError(f"session {n} turn {t}: {reply.status} {reply.error}")
            fd = os.open(directory / "acks", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            os.write(fd, f"{n} {t} {reply.run_id}\n".encode())
            os.close(fd)

    await asyncio.gather(*(session(n) for n in range(sessions)))
    await host.close()
    store.close()


def child(directory: Path, sessions: int, starts: list[int], turns: int, seed: int, durability: str = "sync") -> None:
    """The forked child's whole life: serve, then leave without running the parent's cleanup."""
    code = 0
    try:
        asyncio.run(serve(directory, sessions, starts, turns, seed, durability))
    except BaseException as exc:  # the parent reads the reason from the file
        (directory / "child-error").write_text(f"{type(exc).__name__}: {exc}")
        code = 1
    os._exit(code)

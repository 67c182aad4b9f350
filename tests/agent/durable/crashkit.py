"""The durable session the crash test kills: run by a forked child, again and again, on one store.

Each launch calls ``start()``, queues the plan's messages it finds neither queued nor in the
conversation (a message whose ``steer``/``send`` returned is logged and never queued again, so a
lost one stays lost and the test sees it), and works until idle. Tools log each execution (with
fsync) before they act, so the test can tell which calls ran more than once.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from pathlib import Path
from typing import Any

from agent import Tool
from agent.durable import AgentProviders, DurableAgent, PersistenceContext, SessionPersistence
from agent.providers import FunctionModel, ModelRequest, ModelResponse, ToolCall
from agent.tools import ToolContext

PLAN = [("steer" if i % 3 == 0 else "send", f"batch {i}" if i % 2 == 0 else f"chat {i}") for i in range(60)]
DURABLE = {"read"}


def log_line(log: Path, line: str) -> None:
    with open(log, "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def make_persistence(kind: str, where: str) -> SessionPersistence:
    """``where``: the DuckDB file, or ``DSN|schema`` for PostgreSQL."""
    from hosting.sessions import DuckDBPersistence, PostgresPersistence

    if kind == "duckdb":
        return DuckDBPersistence(path=where)
    dsn, schema = where.split("|")
    return PostgresPersistence(dsn, schema=schema)


def build(persistence: SessionPersistence, log: Path) -> DurableAgent:
    def answer(request: ModelRequest) -> ModelResponse | str:
        newest = [ci for ci in request.context if ci.item.kind in ("user", "tool_result")][-1]
        if newest.item.kind == "user" and newest.text.startswith("batch"):
            tag = uuid.uuid4().hex[:8]
            return ModelResponse("", (ToolCall(f"r-{tag}", "read", "{}"), ToolCall(f"c-{tag}", "charge", "{}")),
                                 "tool_calls")
        return f"ok: {newest.text}"

    def tool(name: str) -> Tool:
        async def execute(args: dict[str, Any], context: ToolContext) -> str:
            log_line(log, f"exec {context.call_id}")
            await asyncio.sleep(0.03)
            return f"{name} done"

        return Tool(name, f"{name}.", {"type": "object"}, execute, durable=name in DURABLE, takes_context=True)

    providers = AgentProviders().add("m", FunctionModel(answer, keep_requests=0), "test")
    return DurableAgent("crash", providers=providers, provider="m", persistence=persistence,
                        tools=[tool("read"), tool("charge")])


async def launch(kind: str, store: str, log: Path) -> None:
    persistence = make_persistence(kind, store)
    agent = build(persistence, log)
    ctx = PersistenceContext("crash")
    present = {r.body["item"]["body"].get("text") for r in await persistence.load(ctx) if r.kind == "user"}
    present |= {v["text"] for _, v in await persistence.read_values(ctx, "")
                if isinstance(v, dict) and "queued_at" in v}
    logged = set(log.read_text().splitlines()) if log.exists() else set()
    agent.start()
    for queue, text in PLAN:
        if text in present or f"queued {text}" in logged:
            continue
        await (agent.steer(text) if queue == "steer" else agent.send(text))
        log_line(log, f"queued {text}")
        await asyncio.sleep(0.005)
    await agent.wait_for_idle()
    await persistence.close()  # type: ignore[attr-defined]


def child(kind: str, store: str, log: str) -> None:
    """The forked child's entry point."""
    asyncio.run(launch(kind, store, Path(log)))


async def stored(kind: str, where: str) -> tuple[list[Any], list[tuple[str, Any]]]:
    """The session's records and values, read by a fresh client."""
    persistence = make_persistence(kind, where)
    ctx = PersistenceContext("crash")
    try:
        return list(await persistence.load(ctx)), list(await persistence.read_values(ctx, ""))
    finally:
        await persistence.close()  # type: ignore[attr-defined]


def exec_counts(log: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in log.read_text().splitlines():
        if line.startswith("exec "):
            counts[line[5:]] = counts.get(line[5:], 0) + 1
    return counts


def summary(records: list[Any]) -> dict[str, Any]:
    """What the test checks, from the final records."""
    users = [r.body["item"]["body"]["text"] for r in records if r.kind == "user"]
    calls = [r.body["item"]["body"] for r in records if r.body.get("item", {}).get("kind") == "tool_call"]
    results = [r.body["item"]["body"] for r in records if r.kind == "tool"]
    return {"users": users, "calls": calls, "results": results,
            "json": json.dumps([r.body for r in records])[:200]}

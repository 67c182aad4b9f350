"""A durable session end to end on every persistence implementation: in memory, DuckDB, PostgreSQL.

The protocol's own rules are the conformance suite's (tests/hosting/sessions); this checks that
a DurableAgent's whole life — queues, a tool batch, a compaction, a restart — holds on each.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agent import Tool
from agent.durable import InMemoryPersistence, PersistenceContext, SessionPersistence
from agent.providers import FunctionModel, ModelRequest, ModelResponse, calls
from hosting.sessions import DuckDBPersistence, PostgresPersistence
from tests.agent.durable.durablekit import session, texts
from tests.hosting.hostkit import postgres_dsn


@pytest.fixture(params=["memory", "duckdb", "postgresql"])
async def opener(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    opened: list[Any] = []
    if request.param == "memory":
        shared = InMemoryPersistence()
        yield lambda: shared
        return
    if request.param == "duckdb":
        def open_duckdb() -> SessionPersistence:
            p = DuckDBPersistence(path=str(tmp_path / "sessions.duckdb"))
            opened.append(p)
            return p

        yield open_duckdb
        for p in opened:
            await p.close()
        return
    dsn = postgres_dsn()
    if dsn is None:
        pytest.skip("no PostgreSQL server on 127.0.0.1:5432 (CI starts one)")
    schema = f"fp_durable_{uuid.uuid4().hex[:10]}"

    def open_pg() -> SessionPersistence:
        p = PostgresPersistence(dsn, schema=schema)
        opened.append(p)
        return p

    yield open_pg
    for p in opened:
        await p.close()
    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def model() -> FunctionModel:
    def answer(request: ModelRequest) -> ModelResponse | str:
        if "Summarise" in request.system_text():
            return "summary: " + " | ".join(ci.text for ci in request.context if ci.item.kind == "user")
        newest = [ci for ci in request.context if ci.item.kind in ("user", "tool_result")][-1]
        if newest.item.kind == "user" and newest.text.startswith("add"):
            return calls(("add", {"a": 2, "b": 3}), ("add", {"a": 4, "b": 5}))
        return f"re: {newest.text}"

    return FunctionModel(answer)


ADD = Tool("add", "Add.", {"type": "object"}, lambda a: a["a"] + a["b"], durable=True)


async def test_a_session_lives_and_restarts_on_each_store(opener: Any) -> None:
    persistence = opener()
    agent = session(persistence, model(), tools=[ADD])
    await agent.send("add some numbers", model="m-big")
    await agent.steer("and hurry")
    await agent.wait_for_idle()
    kinds = [k for k, _ in texts(agent)]
    # where the steering message joins depends on how fast the store took the first write
    assert sorted(t for k, t in texts(agent) if k == "user") == ["add some numbers", "and hurry"]
    assert kinds.count("tool_call") == kinds.count("tool_result") == 2 and kinds[-1] == "assistant"
    assert [t for k, t in texts(agent) if k == "tool_result"] == ["5", "9"]
    await agent.compact()
    await agent.send("after the compaction")
    await agent.wait_for_idle()
    expected = texts(agent)
    if hasattr(persistence, "close") and not isinstance(persistence, InMemoryPersistence):
        await persistence.close()
    reopened = opener()
    again = session(reopened, model(), tools=[ADD])
    again.start()
    await again.wait_for_idle()
    assert texts(again) == expected
    assert expected[0][0] == "summary" and "add some numbers" in expected[0][1]
    stored = await reopened.read_values(PersistenceContext("s1"), "")
    assert [k for k, _ in stored] == ["settings"] and stored[0][1]["model"] == "m-big"

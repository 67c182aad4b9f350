"""Two hosts on one PostgreSQL session store: they never silently overwrite each other."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest

from agent.providers import FunctionModel, ModelRequest
from hosting import PostgresSessions, SessionBusyError, VersionConflictError, standing_agent
from tests.hosting.hostkit import make_agent, postgres_dsn


@pytest.fixture
async def pg() -> AsyncIterator[tuple[str, str]]:
    dsn = postgres_dsn()
    if dsn is None:
        pytest.skip("no PostgreSQL server on 127.0.0.1:5432 (CI starts one)")
    schema = f"fp_test_{uuid.uuid4().hex[:12]}"
    yield dsn, schema
    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.mark.parametrize("durability", ["exit", "sync"])
async def test_two_hosts_on_postgres_refuse_or_conflict_never_overwrite(pg: tuple[str, str], durability: str) -> None:
    dsn, schema = pg
    release, entered = asyncio.Event(), asyncio.Event()

    async def slow(request: ModelRequest) -> str:
        entered.set()
        await release.wait()
        return "slow answer"

    one_store, two_store = PostgresSessions(dsn, schema=schema), PostgresSessions(dsn, schema=schema)
    one = standing_agent(agent_factory=lambda: make_agent(FunctionModel(slow)), sessions=one_store,
                         durability=durability, host_id="one")
    two = standing_agent(agent_factory=make_agent, sessions=two_store, durability=durability, host_id="two")
    await two.handle("first", session_id="alice")
    held = asyncio.ensure_future(one.handle("from host one", session_id="alice"))
    await entered.wait()
    if durability == "sync":
        with pytest.raises(SessionBusyError, match="'one'"):  # host one's turn holds a live lease
            await two.handle("from host two", session_id="alice")
        release.set()
        assert (await held).answer == "slow answer"
    else:
        assert (await two.handle("from host two", session_id="alice")).ok
        release.set()
        with pytest.raises(VersionConflictError):  # host one loaded the same version: its save is refused
            await held
    stored = await two_store.load("alice")
    assert stored is not None
    users = [m.item.text for m in stored.conversation_obj().messages if m.item.kind == "user"]
    assert users == ["first", "from host one" if durability == "sync" else "from host two"]
    for host, store in ((one, one_store), (two, two_store)):
        await host.close()
        await store.close()

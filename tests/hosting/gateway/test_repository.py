"""One conformance suite for every agents repository: memory, DuckDB (both ways) and PostgreSQL.

The PostgreSQL run uses the server on 127.0.0.1:5432 (database `test`, user postgres or root) in a
schema of its own, dropped afterwards; it skips only when no server can be reached.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent import memory_record
from hosting.gateway import (
    AgentConflictError,
    AgentDefinitionError,
    AgentRecord,
    AgentsRepository,
    DuckDBAgents,
    InMemoryAgents,
    PostgresAgents,
)
from hosting.gateway._definition import patched, record_from, validated
from tests.hosting.hostkit import postgres_dsn
from tracer import Store


@pytest.fixture(params=["memory", "duckdb-recordings-file", "duckdb-own-file", "postgresql"])
async def repository(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AgentsRepository]:
    kind = request.param
    if kind == "memory":
        yield InMemoryAgents()
    elif kind == "duckdb-recordings-file":
        store = Store.open(tmp_path / "fp.duckdb")
        repo = DuckDBAgents(store)
        yield repo
        await repo.close()
        store.close()
    elif kind == "duckdb-own-file":
        repo = DuckDBAgents(path=str(tmp_path / "agents.duckdb"))
        yield repo
        await repo.close()
    else:
        dsn = postgres_dsn()
        if dsn is None:
            pytest.skip("no PostgreSQL server on 127.0.0.1:5432 (CI starts one)")
        schema = f"fp_test_{uuid.uuid4().hex[:12]}"
        repo = PostgresAgents(dsn, schema=schema)
        yield repo
        await repo.close()
        with psycopg.connect(dsn, autocommit=True) as con:
            con.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def agent(name: str, **fields: object) -> AgentRecord:
    return record_from(validated({"name": name, "systemPrompt": f"You are {name}.", **fields}))


async def test_create_get_list_count_delete(repository: AgentsRepository) -> None:
    research = await repository.create(agent("Research", id="research", temperature=0.2, tools=["search"]))
    await repository.create(agent("analyst"))

    assert await repository.count() == 2
    assert await repository.get("research") == research
    assert (await repository.get_by_name("RESEARCH")) == research  # names compare case-insensitively
    assert await repository.get("nope") is None and await repository.get_by_name("nope") is None
    assert [r.name for r in await repository.list()] == ["analyst", "Research"]
    assert [r.name for r in await repository.list(limit=1, offset=1)] == ["Research"]
    stored = await repository.get("research")
    assert stored is not None and stored.config.temperature == 0.2 and stored.config.tools == ["search"]
    assert stored.config_dict()["maxToolCalls"] == 200
    assert await repository.delete("research") and not await repository.delete("research")
    assert await repository.count() == 1


async def test_an_id_or_name_that_is_taken_is_refused(repository: AgentsRepository) -> None:
    await repository.create(agent("Research", id="research"))

    with pytest.raises(AgentConflictError, match="id 'research' already exists"):
        await repository.create(agent("Other", id="research"))
    with pytest.raises(AgentConflictError, match="name 'research' is taken by agent 'research'"):
        await repository.create(agent("research"))
    assert await repository.count() == 1


async def test_update_replaces_and_keeps_names_unique(repository: AgentsRepository) -> None:
    first = await repository.create(agent("First", id="first"))
    await repository.create(agent("Second", id="second"))

    changed = patched(first, {"systemPrompt": "You are new.", "maxTurns": 3})
    assert await repository.update(changed) == changed
    stored = await repository.get("first")
    assert stored is not None and (stored.system_prompt, stored.config.max_turns) == ("You are new.", 3)
    assert stored.updated_at > first.updated_at and stored.created_at == first.created_at
    assert await repository.revision("first") == stored.updated_at
    assert await repository.revision("gone") is None
    with pytest.raises(AgentConflictError, match="taken by agent 'second'"):
        await repository.update(patched(stored, {"name": "SECOND"}))
    assert await repository.update(patched(stored, {"name": "first"})) is not None  # its own name, recased
    ghost = agent("Ghost", id="ghost")
    assert await repository.update(ghost) is None


async def test_personal_memory_per_user(repository: AgentsRepository) -> None:
    memory = repository.memory
    await memory.put(memory_record("alice", "goal", "Run a marathon", name="marathon"))
    await memory.put(memory_record("alice", "fact", "Lives in Berlin", name="home_city"))
    await memory.put(memory_record("alice", "fact", "Lives in Hamburg", name="home_city"))
    await memory.put(memory_record("bob", "identity", "Bob", name="name"))

    alice = await memory.records("alice")

    assert [(r.key, r.text) for r in alice] == [("fact/home_city", "Lives in Hamburg"), ("goal/marathon", "Run a marathon")]
    assert alice[0].source == "personal:alice/fact/home_city"
    assert await memory.delete("alice", "fact/home_city") and not await memory.delete("alice", "fact/home_city")
    assert [r.key for r in await memory.records("bob")] == ["identity/name"]


async def test_concurrent_creates_of_one_name_store_one(repository: AgentsRepository) -> None:
    results = await asyncio.gather(*(repository.create(agent("Twin")) for _ in range(5)), return_exceptions=True)

    assert sum(isinstance(r, AgentRecord) for r in results) == 1
    assert all(isinstance(r, AgentConflictError) for r in results if not isinstance(r, AgentRecord))
    assert await repository.count() == 1


names = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=20)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prompt=st.text(max_size=200), name=names, temperature=st.floats(0, 2), tools=st.lists(
    st.from_regex(r"[a-z_]{1,10}", fullmatch=True), max_size=4, unique=True))
async def test_any_valid_definition_round_trips(
    repository: AgentsRepository, prompt: str, name: str, temperature: float, tools: list[str]
) -> None:
    try:
        record = agent(name, systemPrompt=prompt, temperature=temperature, tools=tools)
    except AgentDefinitionError as error:  # only a blank name, or a NUL (no store can keep one), is invalid here
        assert (error.field, "\x00" in name or not name.strip()) == ("name", True) or (
            error.field == "systemPrompt" and "\x00" in prompt)
        return
    existing = await repository.get_by_name(record.name)
    if existing is not None:
        await repository.delete(existing.id)
    await repository.create(record)
    assert await repository.get(record.id) == record
    await repository.delete(record.id)


async def test_one_name_is_one_name_in_every_store_whatever_its_unicode_form(repository: AgentsRepository) -> None:
    composed = await repository.create(agent("caf\u00e9"))
    assert agent("cafe\u0301").name == "caf\u00e9"  # typed with a combining accent: the same name
    with pytest.raises(AgentConflictError):
        await repository.create(agent("CAFE\u0301"))
    assert await repository.get_by_name("CAF\u00c9") == composed
    # lower case, as SQL's lower() compares: 'Straße' and 'STRASSE' are two names in every store
    await repository.create(agent("Stra\u00dfe"))
    await repository.create(agent("STRASSE"))
    assert await repository.count() == 3

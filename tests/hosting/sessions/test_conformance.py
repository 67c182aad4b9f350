"""One conformance suite, run against every session store: memory, DuckDB (both ways), PostgreSQL.

The PostgreSQL runs use the server on 127.0.0.1:5432 (database `test`, user postgres or root) in
a schema of their own, dropped afterwards; they skip only when no server can be reached.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agent import Conversation
from hosting import (
    DuckDBSessions,
    Envelope,
    InMemorySessions,
    PostgresSessions,
    SessionStore,
    UnreadableEnvelopeError,
    VersionConflictError,
)
from tests.hosting.hostkit import postgres_dsn
from tracer import ContextItem, Item, ItemKind, Origin, OriginKind, Store


@pytest.fixture(params=["memory", "duckdb-recordings-file", "duckdb-own-file", "duckdb-uncached", "postgresql"])
async def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    kind = request.param
    if kind == "memory":
        yield InMemorySessions()
    elif kind == "duckdb-recordings-file":
        store = Store.open(tmp_path / "fp.duckdb")
        s = DuckDBSessions(store)
        yield s
        await s.close()
        store.close()
    elif kind == "duckdb-own-file":
        s = DuckDBSessions(path=str(tmp_path / "sessions.duckdb"))
        yield s
        await s.close()
    elif kind == "duckdb-uncached":  # no read cache: every load reads DuckDB
        s = DuckDBSessions(path=str(tmp_path / "sessions.duckdb"), cache_bytes=0)
        yield s
        await s.close()
    else:
        dsn = postgres_dsn()
        if dsn is None:
            pytest.skip("no PostgreSQL server on 127.0.0.1:5432 (CI starts one)")
        schema = f"fp_test_{uuid.uuid4().hex[:12]}"
        s = PostgresSessions(dsn, schema=schema)
        yield s
        await s.close()
        with psycopg.connect(dsn, autocommit=True) as con:
            con.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def _envelope(session_id: str, *texts: str, **extra: Any) -> Envelope:
    conversation = Conversation(session_id, "You are terse.")
    for text in texts:
        conversation.messages.append(ContextItem(Item.of_text(ItemKind.USER, text), Origin(OriginKind.USER)))
    return Envelope(session_id, conversation.to_dict(), **extra)


async def test_absent_session_loads_as_none(sessions: SessionStore) -> None:
    assert await sessions.load("nobody") is None


async def test_save_then_load_round_trips_every_part(sessions: SessionStore) -> None:
    pause = {"run_id": "r1", "conversation_id": "alice", "question": "Which day?", "pending": [], "results": {},
             "calls": [], "turns": 1, "tool_calls": 1, "usage": {"input_tokens": 1, "output_tokens": 2,
                                                               "cached_tokens": 0}, "next_seq": 7, "last_stage": "s9"}
    saved = await sessions.save(_envelope("alice", "hello", "ünïcode ✓", pause=pause, status="awaiting",
                                          last_run_id="r1", turn={"state": "done", "turn_id": "t1"},
                                          tool_results={"c1": {"content": "ok", "is_error": False}}))
    assert saved.version == 1
    loaded = await sessions.load("alice")
    assert loaded is not None
    assert loaded.version == 1
    assert loaded.conversation_obj().to_dict() == saved.conversation_obj().to_dict()
    assert [m.item.text for m in loaded.conversation_obj().messages] == ["hello", "ünïcode ✓"]
    assert loaded.pause == pause and loaded.pause_state() is not None
    assert (loaded.status, loaded.last_run_id, loaded.turn) == ("awaiting", "r1", {"state": "done", "turn_id": "t1"})
    assert loaded.tool_results == {"c1": {"content": "ok", "is_error": False}}
    assert loaded.created_at == pytest.approx(saved.created_at)
    assert loaded.updated_at == pytest.approx(saved.updated_at)


async def test_versions_advance_and_a_stale_save_is_refused(sessions: SessionStore) -> None:
    first = await sessions.save(_envelope("bob", "one"))
    second = await sessions.save(_envelope("bob", "one", "two", version=first.version))
    assert second.version == 2
    with pytest.raises(VersionConflictError, match="'bob'") as caught:
        await sessions.save(_envelope("bob", "one", "stale", version=first.version))
    assert (caught.value.expected, caught.value.found) == (1, 2)
    with pytest.raises(VersionConflictError):
        await sessions.save(_envelope("bob", "created twice"))  # version 0: only for a new session
    loaded = await sessions.load("bob")
    assert loaded is not None
    assert [m.item.text for m in loaded.conversation_obj().messages] == ["one", "two"]


async def test_concurrent_saves_of_one_version_let_exactly_one_win(sessions: SessionStore) -> None:
    base = await sessions.save(_envelope("carol", "base"))
    outcomes = await asyncio.gather(
        *(sessions.save(_envelope("carol", "base", f"writer {i}", version=base.version)) for i in range(8)),
        return_exceptions=True,
    )
    winners = [o for o in outcomes if isinstance(o, Envelope)]
    assert len(winners) == 1
    assert all(isinstance(o, VersionConflictError) for o in outcomes if not isinstance(o, Envelope))
    loaded = await sessions.load("carol")
    assert loaded is not None and loaded.conversation_obj().to_dict() == winners[0].conversation_obj().to_dict()


async def test_unreadable_envelope_names_the_session(sessions: SessionStore) -> None:
    await sessions.save(_envelope("dave", "hello"))
    await sessions.write_raw("dave", '{"format": "footprint.session/2", "conversation": {"mess')  # type: ignore[attr-defined]
    with pytest.raises(UnreadableEnvelopeError, match="'dave'") as caught:
        await sessions.load("dave")
    assert caught.value.session_id == "dave"
    await sessions.write_raw("dave", '{"format": "footprint.session/2", "conversation": 3}')  # type: ignore[attr-defined]
    with pytest.raises(UnreadableEnvelopeError, match="conversation fields are malformed"):
        await sessions.load("dave")


async def test_delete_and_list(sessions: SessionStore) -> None:
    for i, sid in enumerate(["s1", "s2", "s3"]):
        await sessions.save(_envelope(sid, f"m{i}", status="answered"))
        await asyncio.sleep(0.002)  # distinct updated_at
    listed = await sessions.list()
    assert [s.session_id for s in listed] == ["s3", "s2", "s1"]
    assert all(s.version == 1 and s.status == "answered" for s in listed)
    assert [s.session_id for s in await sessions.list(limit=1, offset=1)] == ["s2"]
    assert await sessions.delete("s2") is True
    assert await sessions.delete("s2") is False
    assert await sessions.load("s2") is None
    assert [s.session_id for s in await sessions.list()] == ["s3", "s1"]
    # a deleted session starts again at version 1
    assert (await sessions.save(_envelope("s2", "again"))).version == 1


async def test_a_turn_id_names_one_turn_forever_not_only_the_last(sessions: SessionStore) -> None:
    """A retry of an earlier turn, after later ones, gets that turn's stored reply (it is not run
    again); the same id with another message is refused; a host started again on the store agrees."""
    from hosting import TurnIdReusedError, standing_agent
    from tests.hosting.hostkit import echo_model, make_agent

    model = echo_model()
    host = standing_agent(agent_factory=lambda: make_agent(model), sessions=sessions)
    first = await host.handle("hello", session_id="alice", turn_id="t-1")
    await host.handle("later", session_id="alice", turn_id="t-2")
    await host.handle("no id", session_id="alice")
    again = await host.handle("hello", session_id="alice", turn_id="t-1")
    assert again.replayed and (again.answer, again.run_id) == (first.answer, first.run_id) == ("echo #1: hello", first.run_id)
    with pytest.raises(TurnIdReusedError, match="'t-1'"):
        await host.handle("something else", session_id="alice", turn_id="t-1")
    assert len(model.requests) == 3
    restarted = standing_agent(agent_factory=lambda: make_agent(model), sessions=sessions)
    assert (await restarted.handle("later", session_id="alice", turn_id="t-2")).replayed
    assert (await restarted.handle("next", session_id="alice", turn_id="t-3")).answer == "echo #4: next"
    assert (await restarted.handle("hello", session_id="bob", turn_id="t-1")).answer == "echo #1: hello"  # per session
    assert len(model.requests) == 5
    loaded = await sessions.load("alice")
    assert loaded is not None and len(loaded.held()) == 8  # 4 turns, 2 messages each: none ran twice

"""The host's sessions as records: a save appends what is new, loads give it back, old stores migrate."""

from __future__ import annotations

import hashlib
import json
import operator
import os
import stat
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent import Conversation
from hosting import DuckDBSessions, Envelope, InMemorySessions, PostgresSessions, UnreadableEnvelopeError
from hosting.sessions import RecordSessions
from hosting.sessions import _records as records_module
from hosting.sessions._memory import MemoryTables
from tests.hosting.hostkit import postgres_dsn
from tests.hosting.sessions.test_persistence_conformance import API_KEY
from tracer import ContextItem, Item, ItemKind, Origin, OriginKind, Store

FIXTURE = Path(__file__).resolve().parents[3] / "fixtures" / "sessions" / "v1-envelopes.json"


def _item(kind: str, text: str) -> ContextItem:
    return ContextItem(Item.of_text(kind, text), Origin(OriginKind.USER if kind == ItemKind.USER else OriginKind.STAGE))


def _fresh(session_id: str, *texts: str) -> Envelope:
    conversation = Conversation(session_id, "You are terse.", [_item(ItemKind.USER, t) for t in texts])
    return Envelope(session_id, conversation.to_dict(), messages=tuple(conversation.messages))


async def _next(sessions: RecordSessions, envelope: Envelope, *added: ContextItem, drop: int = 0,
                turn: dict[str, Any] | None = None) -> Envelope:
    conversation = envelope.conversation_obj()
    if drop:
        del conversation.messages[max(0, len(conversation.messages) - drop):]
    conversation.messages.extend(added)
    return await sessions.save(envelope.successor(conversation, pause=None, status="answered", last_run_id="r",
                                                  turn=turn, tool_results={}))


@pytest.fixture(params=["memory", "duckdb", "duckdb-uncached"])
async def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RecordSessions]:
    if request.param == "memory":
        s: RecordSessions = InMemorySessions()
    else:
        s = DuckDBSessions(path=str(tmp_path / f"{uuid.uuid4().hex}.duckdb"),
                           cache_bytes=0 if request.param == "duckdb-uncached" else 64 << 20)
    yield s
    await s.close()


async def test_each_save_appends_only_what_the_turn_added(sessions: RecordSessions) -> None:
    envelope = await sessions.save(_fresh("long", "turn 0"))
    sizes = []
    for n in range(1, 150):
        before = await sessions.stored_bytes()
        envelope = await _next(sessions, envelope, _item(ItemKind.ASSISTANT, "x" * 200), _item(ItemKind.USER, f"t{n:04}"),
                               turn={"state": "done", "n": n})
        sizes.append(await sessions.stored_bytes() - before)
    # the bytes a save adds do not grow with the conversation (the session value is rewritten, the same size)
    assert max(sizes[1:]) - min(sizes[1:]) <= 2, sizes  # (the first replaces a value without a turn)
    stored = await sessions.persistence.read("long", prefix="host.")
    assert len(stored.records) == 1 + 2 * 149  # one record per message, nothing rewritten
    loaded = await sessions.load("long")
    assert loaded is not None and loaded.version == 150 and loaded.message_count == 299
    assert loaded.turn == {"state": "done", "n": 149}


async def test_a_save_keeps_the_conversation_it_was_given_and_copies_none_of_it(sessions: RecordSessions) -> None:
    """What a save keeps as the stored conversation is the envelope's own tuple: nothing of a long
    conversation is copied per save (under sync a turn saves several times). A message masked on
    its way in is the exception: the kept tuple holds the masked one, and the same earlier objects."""
    envelope = await sessions.save(_fresh("s-nocopy", *[f"message {i}" for i in range(50)]))

    def successor(of: Envelope, text: str) -> Envelope:
        conversation = of.conversation_obj()
        conversation.messages.append(_item(ItemKind.USER, text))
        return of.successor(conversation, pause=None, status="answered", last_run_id="r", turn=None, tool_results={})

    plain = successor(envelope, "one more")
    saved = await sessions.save(plain)
    assert saved.held() is plain.held() and saved.stored is plain.held()
    secret = successor(saved, f"my key is {API_KEY}")
    masked = await sessions.save(secret)
    assert masked.held() is not secret.held() and len(masked.held()) == 52
    assert all(map(operator.is_, masked.held()[:51], secret.held()[:51]))
    assert API_KEY not in masked.held()[-1].item.text
    loaded = await sessions.load("s-nocopy")
    assert loaded is not None and [m.item.text for m in loaded.held()] == [m.item.text for m in masked.held()]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.lists(st.sampled_from(["a", "b", "ü ✓", ""]), max_size=3), st.integers(0, 3)),
                min_size=1, max_size=8))
async def test_added_and_dropped_messages_load_back_exactly(sessions: RecordSessions,
                                                            turns: list[tuple[list[str], int]]) -> None:
    sid = f"p-{uuid.uuid4().hex[:8]}"
    envelope = await sessions.save(_fresh(sid, "first"))
    expected = envelope.conversation_obj().messages
    for texts, drop in turns:
        added = [_item(ItemKind.ASSISTANT, t) for t in texts]
        envelope = await _next(sessions, envelope, *added, drop=drop)
        expected = expected[:max(0, len(expected) - drop)] + added if drop else expected + added
        loaded = await sessions.load(sid)
        assert loaded is not None and list(loaded.conversation_obj().messages) == expected
        envelope = loaded


async def test_credentials_never_reach_the_store_nor_the_next_turn(sessions: RecordSessions) -> None:
    envelope = await sessions.save(_fresh("sec", f"my key is {API_KEY}"))
    call = ContextItem(Item(ItemKind.TOOL_CALL, {"id": "c1", "name": "login",
                                                 "arguments": json.dumps({"user": "ada", "password": "hunter2"})}),
                       Origin(OriginKind.STAGE))
    envelope = await _next(sessions, envelope, call, turn={"state": "done", "reply": {"error": f"bad key {API_KEY}"}})
    for held in (envelope, await sessions.load("sec")):
        assert held is not None
        text = repr(held.conversation_obj().to_dict()) + repr(held.turn)
        assert API_KEY not in text and "hunter2" not in text and "[REDACTED]" in text
    raw = await sessions.persistence.read("sec", prefix="")
    assert API_KEY not in repr(raw) and "hunter2" not in repr(raw)


def _legacy_rows() -> tuple[str, list[list[Any]]]:
    data = json.loads(FIXTURE.read_text())
    return data["ddl"], data["rows"]


async def _assert_migrated(sessions: RecordSessions) -> None:
    alice = await sessions.load("alice")
    assert alice is not None and alice.version == 12 and alice.status == "answered"
    kinds = [(m.item.kind, m.item.text) for m in alice.conversation_obj().messages]
    assert [t for k, t in kinds if k == "user"] == ["hello", "weather?", "thanks"]
    assert [t for k, t in kinds if k == "assistant"] == ["echo #1: hello", "echo #2: weather?", "echo #3: thanks"]
    assert [m.item.body["call_id"] for m in alice.conversation_obj().messages if m.item.kind == "tool_result"] == \
        ["call-w1"]
    assert alice.turn is not None and alice.turn["state"] == "done" and alice.turn["turn_id"] == "alice-thanks"
    bob = await sessions.load("bob")
    assert bob is not None and bob.status == "awaiting" and bob.pause_state() is not None
    assert bob.pause is not None and bob.pause["question"] == "Which day?"
    with pytest.raises(UnreadableEnvelopeError, match=r"'carol'.*not JSON"):
        await sessions.load("carol")  # refused before, refused after: never replaced by a fresh one
    assert sorted(s.session_id for s in await sessions.list()) == ["alice", "bob", "carol"]
    # and the migrated session goes on by appending
    more = await _next(sessions, alice, _item(ItemKind.USER, "and now?"))
    assert more.version == 13
    again = await sessions.load("alice")
    assert again is not None and again.message_count == alice.message_count + 1


@pytest.mark.parametrize("where", ["own-file", "recordings-file"])
async def test_a_duckdb_store_of_the_envelope_version_migrates_on_open(tmp_path: Path, where: str) -> None:
    ddl, rows = _legacy_rows()
    path = tmp_path / "old.duckdb"
    recordings = Store.open(path) if where == "recordings-file" else None
    con = recordings.cursor() if recordings is not None else duckdb.connect(str(path))
    con.execute(ddl)
    con.executemany("INSERT INTO fp_session VALUES (?, ?, ?, ?, ?, ?)", rows)
    con.close()
    sessions = DuckDBSessions(recordings) if recordings is not None else DuckDBSessions(path=str(path))
    try:
        await _assert_migrated(sessions)
        tables = {r[0] for r in sessions.persistence._con.execute(  # type: ignore[attr-defined]
            "SELECT table_name FROM information_schema.tables").fetchall()}
        assert "fp_session" not in tables and {"fp_session_head", "fp_session_record", "fp_session_value"} <= tables
    finally:
        await sessions.close()
        if recordings is not None:
            recordings.close()
    reopened = DuckDBSessions(path=str(path)) if recordings is None else None
    if reopened is not None:  # a second open finds nothing more to migrate
        await reopened.close()


async def test_a_postgres_store_of_the_envelope_version_migrates_on_first_use() -> None:
    dsn = postgres_dsn()
    if dsn is None:
        pytest.skip("no PostgreSQL server on 127.0.0.1:5432 (CI starts one)")
    ddl, rows = _legacy_rows()
    schema = f"fp_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute(f"CREATE SCHEMA {schema}")
        con.execute(ddl.replace("CREATE TABLE fp_session", f"CREATE TABLE {schema}.fp_session")
                    .replace("VARCHAR", "TEXT").replace('"version"', "version").replace("DOUBLE", "DOUBLE PRECISION"))
        with con.cursor() as cur:
            cur.executemany(f"INSERT INTO {schema}.fp_session VALUES (%s, %s, %s, %s, %s, %s)", rows)
    sessions = PostgresSessions(dsn, schema=schema)
    try:
        await _assert_migrated(sessions)
    finally:
        await sessions.close()
        with psycopg.connect(dsn, autocommit=True) as con:
            con.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


async def test_a_session_file_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "own.duckdb"
    sessions = DuckDBSessions(path=str(path))
    await sessions.save(_fresh("a", "hello"))
    await sessions.close()
    assert stat.S_IMODE(os.stat(path).st_mode) & 0o077 == 0


async def test_a_shared_store_reads_only_what_other_hosts_appended_since() -> None:
    dsn = postgres_dsn()
    if dsn is None:
        pytest.skip("no PostgreSQL server on 127.0.0.1:5432 (CI starts one)")
    schema = f"fp_test_{uuid.uuid4().hex[:12]}"
    one, two = PostgresSessions(dsn, schema=schema), PostgresSessions(dsn, schema=schema)
    try:
        envelope = await one.save(_fresh("shared", "hello"))
        seen = await two.load("shared")  # read whole, then cached
        assert seen is not None and seen.message_count == 1
        for n in range(3):  # host one goes on; host two reads only the records added since
            envelope = await _next(one, envelope, _item(ItemKind.ASSISTANT, f"answer {n}"), _item(ItemKind.USER, f"q{n}"))
            seen = await two.load("shared")
            assert seen is not None and seen.version == envelope.version
            assert list(seen.conversation_obj().messages) == list(envelope.conversation_obj().messages)
        seen = await _next(two, seen, _item(ItemKind.ASSISTANT, "from two"))  # and writes on top of it
        back = await one.load("shared")
        assert back is not None and back.conversation_obj().messages[-1].item.text == "from two"
        await one.delete("shared")
        await one.save(_fresh("shared", "a new one"))  # deleted and made again: read whole
        again = await two.load("shared")
        assert again is not None and [m.item.text for m in again.conversation_obj().messages] == ["a new one"]
    finally:
        await one.close()
        await two.close()
        with psycopg.connect(dsn, autocommit=True) as con:
            con.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


class _SharedTables(MemoryTables):
    """Memory tables that say several hosts write them (as PostgreSQL does): a load asks them."""

    shared = True


async def test_a_shared_load_weighs_only_the_messages_appended_since(monkeypatch: pytest.MonkeyPatch) -> None:
    # a long session's every turn must not pay for summing what its whole cached conversation holds
    tables = _SharedTables()
    one, two = RecordSessions(tables), RecordSessions(tables)
    envelope = await one.save(_fresh("shared", *(f"question {n}" for n in range(200))))
    assert await two.load("shared") is not None  # read whole, then cached
    weighed: list[int] = []
    held_bytes = records_module._held_bytes

    def counting(messages: Any) -> int:
        weighed.append(len(messages))
        return held_bytes(messages)

    monkeypatch.setattr(records_module, "_held_bytes", counting)
    for n in range(3):
        envelope = await _next(one, envelope, _item(ItemKind.ASSISTANT, f"answer {n}"), _item(ItemKind.USER, f"q{n}"))
        weighed.clear()
        seen = await two.load("shared")
        assert seen is not None and seen.message_count == envelope.message_count
        assert max(weighed) <= 2
        cached, size, _ = two._cache["shared"]
        assert size == held_bytes(cached.held())
    envelope = await _next(one, envelope, _item(ItemKind.ASSISTANT, "again"), drop=3)  # a rewind: weighed whole
    seen = await two.load("shared")
    assert seen is not None and list(seen.held()) == list(envelope.held())
    cached, size, _ = two._cache["shared"]
    assert size == held_bytes(cached.held())


# ---------------------------------------------------------------------- a session let go of and read back


def _context_answer(request: Any) -> Any:
    """Calls a tool on a ``[tool]`` message, and answers with a digest of the whole context it was
    sent: an answer differs when anything in the context does."""
    from agent.providers import calls

    text = request.last_user_text()
    since = []
    for ci in reversed(request.context):
        if ci.item.kind == ItemKind.USER:
            break
        since.append(ci)
    if text.startswith("[tool]") and not any(ci.item.kind == ItemKind.TOOL_RESULT for ci in since):
        return calls(("lookup", {"key": text[:12]}, f"call-{len(request.context)}"))
    digest = hashlib.blake2b("\x00".join(ci.item.hash for ci in request.context).encode(), digest_size=6)
    return f"{len(request.context)} items, {digest.hexdigest()}"


def _windowed_agent(recorder: Any) -> Any:
    from agent import Agent, ConversationMemory, Tool
    from agent.providers import FunctionModel

    async def lookup(arguments: dict[str, Any]) -> str:
        return f"value of {arguments['key']}"

    return Agent("windowed", provider=FunctionModel(_context_answer, name="digest"),
                 tools=[Tool("lookup", "Look a key up.", {"type": "object", "properties": {"key": {"type": "string"}}},
                             lookup)],
                 recorder=recorder, memory=ConversationMemory(max_tokens=120))


def _recorded(store: Store, session_id: str) -> list[Any]:
    """The session's recording with its ids numbered in order: per run, per stage, what it was sent
    and what it left out (through the left-out reader, which follows ``dropped_since``)."""
    from tracer import RunFilter, dropped_context

    runs = sorted(store.list_runs(RunFilter(session_id=session_id), limit=1000), key=lambda r: (r.started_at, r.id))
    ids: dict[str | None, str] = {None: "-"}

    def name(value: str | None) -> str:
        return ids.setdefault(value, f"#{len(ids)}")

    out: list[Any] = []
    for run in runs:
        data = store.load_run(run.id)
        for stage in sorted(data.stages, key=lambda s: s.seq):
            name(stage.id)
        left = {d.stage_id: [(i.item_hash, i.dropped_by, name(i.origin.run_id), name(i.origin.stage_id))
                             for i in d.items] for d in dropped_context(store, run.id)}
        out.append((name(run.id), run.status, run.output, [
            (stage.kind, [(e.item_hash, e.origin.kind, name(e.origin.run_id), name(e.origin.stage_id), e.included,
                           e.dropped_by) for e in data.inputs.get(stage.id, [])], left.get(stage.id))
            for stage in sorted(data.stages, key=lambda s: s.seq)]))
    return out


@pytest.mark.parametrize("durability", ["sync", "exit"])
async def test_a_session_let_go_and_read_back_continues_as_one_kept(tmp_path: Path, durability: str) -> None:
    """Two hosts run the same turns of two sessions: one keeps both conversations in memory, the
    other keeps none (every turn reads its session back from the store). They answer the same, and
    record the same snapshots and the same left-out context (ids aside)."""
    from hosting import standing_agent
    from tracer import Recorder

    replies: dict[int, list[Any]] = {}
    recorded: dict[int, list[Any]] = {}
    for cache in (64 << 20, 0):
        store = Store.open(tmp_path / f"cache-{cache}.duckdb")
        sessions = DuckDBSessions(store, cache_bytes=cache)
        recorder = Recorder(store)
        host = standing_agent(agent_factory=lambda recorder=recorder: _windowed_agent(recorder), sessions=sessions,
                              durability=durability, close_sessions=True)
        got = replies[cache] = []
        try:
            for turn in range(14):
                for session in ("a", "b"):
                    tool = "[tool] " if turn % 3 == 1 else ""
                    reply = await host.handle(f"{tool}{session} turn {turn}: " + "words " * 8, session_id=session)
                    got.append((reply.status, reply.answer))
        finally:
            await host.close()
        store.flush()
        recorded[cache] = [_recorded(store, s) for s in ("a", "b")]
        assert any(left for run in recorded[cache][0] for _, _, _, stages in [run] for *_, left in stages if left)
        store.close()
    assert replies[0] == replies[64 << 20]
    assert all(status == "answered" for status, _ in replies[0])
    assert recorded[0] == recorded[64 << 20]


@pytest.mark.parametrize("bad", ["fp\n", "1fp", "fp-session", "fp_séssion", "", "x" * 42])
def test_a_table_prefix_or_schema_that_is_not_a_plain_identifier_is_refused_naming_the_rule(
    tmp_path: Path, bad: str
) -> None:
    """What names tables is checked whole (a trailing newline too: ``$`` matches before one), in
    both stores, before anything is opened or connected to."""
    from hosting.sessions._duckdb_persistence import DuckDBPersistence
    from hosting.sessions._postgres_persistence import PostgresPersistence

    with pytest.raises(ValueError, match="must be 1-41 ASCII letters, digits or underscores"):
        DuckDBPersistence(path=str(tmp_path / "s.duckdb"), prefix=bad)
    assert not (tmp_path / "s.duckdb").exists()
    for schema, prefix in ((bad, "fp_session"), ("public", bad)):
        with pytest.raises(ValueError, match="must be 1-41 ASCII letters, digits or underscores"):
            PostgresPersistence("postgresql://nobody@127.0.0.1:1/none", schema=schema, prefix=prefix)

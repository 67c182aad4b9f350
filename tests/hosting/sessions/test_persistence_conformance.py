"""One conformance suite for the persistence protocol (``agent.durable.SessionPersistence``).

Run on ``agent.durable.InMemoryPersistence`` and on the host's record stores: in memory, DuckDB
(a file of its own and the recordings file) and PostgreSQL (127.0.0.1:5432, a schema of its own,
dropped afterwards; skipped only when no server can be reached). Besides the rules one by one, a
generator plays random programs — appends, clears, value writes and deletes, transactions that
commit or raise — against a plain model of the rules and compares what every store gives back.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agent.durable import InMemoryPersistence, PersistenceContext, SessionPersistence, SessionRecord
from hosting import DuckDBPersistence, PostgresPersistence, SessionStoreError
from hosting.sessions import MemoryTables
from tests.hosting.hostkit import postgres_dsn
from tracer import Store

API_KEY = "sk-" + "A1b2C3d4" * 4


class Boom(Exception):
    """Raised by test work to roll a transaction back."""


@pytest.fixture(params=["agent-memory", "memory-tables", "duckdb-own-file", "duckdb-recordings-file", "postgresql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionPersistence]:
    kind = request.param
    if kind == "agent-memory":
        yield InMemoryPersistence()
    elif kind == "memory-tables":
        yield MemoryTables()
    elif kind == "duckdb-own-file":
        s = DuckDBPersistence(path=str(tmp_path / "sessions.duckdb"))
        yield s
        await s.close()
    elif kind == "duckdb-recordings-file":
        recordings = Store.open(tmp_path / "fp.duckdb")
        s = DuckDBPersistence(recordings)
        yield s
        await s.close()
        recordings.close()
    else:
        dsn = postgres_dsn()
        if dsn is None:
            pytest.skip("no PostgreSQL server on 127.0.0.1:5432 (CI starts one)")
        schema = f"fp_test_{uuid.uuid4().hex[:12]}"
        s = PostgresPersistence(dsn, schema=schema)
        yield s
        await s.close()
        with psycopg.connect(dsn, autocommit=True) as con:
            con.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def ctx(session_id: str = "s") -> PersistenceContext:
    return PersistenceContext(session_id)


def bodies(records: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(r.kind, r.body) for r in records]


async def test_a_new_session_has_nothing(store: SessionPersistence) -> None:
    assert isinstance(store, SessionPersistence)
    assert list(await store.load(ctx("nobody"))) == []
    assert list(await store.read_values(ctx("nobody"), "")) == []
    await store.delete_value(ctx("nobody"), "absent")  # not an error


async def test_records_come_back_in_append_order_numbered_from_one(store: SessionPersistence) -> None:
    for i in range(5):
        await store.append(ctx(), SessionRecord("user", {"text": f"m{i}", "n": i, "ü": ["✓", None, 1.5]}))
    records = list(await store.load(ctx()))
    assert [r.seq for r in records] == [1, 2, 3, 4, 5]
    assert bodies(records) == [("user", {"text": f"m{i}", "n": i, "ü": ["✓", None, 1.5]}) for i in range(5)]
    records[0].body["text"] = "changed by a caller"
    assert (await store.load(ctx()))[0].body["text"] == "m0"  # what was loaded is a copy


async def test_a_body_that_is_not_json_is_refused_and_nothing_is_kept(store: SessionPersistence) -> None:
    with pytest.raises(TypeError, match="not JSON-serialisable"):
        await store.append(ctx(), SessionRecord("user", {"when": object()}))
    with pytest.raises(TypeError, match="not JSON-serialisable"):
        await store.write_value(ctx(), "k", {1, 2})
    assert list(await store.load(ctx())) == [] and list(await store.read_values(ctx(), "")) == []


async def test_a_transaction_lands_whole_or_not_at_all(store: SessionPersistence) -> None:
    await store.append(ctx(), SessionRecord("user", {"text": "before"}))
    await store.write_value(ctx(), "send.001", {"text": "queued"})

    async def consume(tx: PersistenceContext) -> str:
        assert tx.in_transaction and tx.session_id == "s"
        await store.append(tx, SessionRecord("user", {"text": "queued"}))
        await store.delete_value(tx, "send.001")
        # inside, the transaction's own writes are visible
        assert bodies(await store.load(tx))[-1] == ("user", {"text": "queued"})
        assert list(await store.read_values(tx, "send.")) == []
        return "consumed"

    assert await store.transaction(ctx(), consume) == "consumed"
    assert bodies(await store.load(ctx())) == [("user", {"text": "before"}), ("user", {"text": "queued"})]
    assert list(await store.read_values(ctx(), "send.")) == []

    async def fails(tx: PersistenceContext) -> None:
        await store.append(tx, SessionRecord("assistant", {"text": "never"}))
        await store.write_value(tx, "tool.0", {"call": "x"})
        await store.clear_records(tx)
        raise Boom

    with pytest.raises(Boom):
        await store.transaction(ctx(), fails)
    assert bodies(await store.load(ctx())) == [("user", {"text": "before"}), ("user", {"text": "queued"})]
    assert list(await store.read_values(ctx(), "")) == []


async def test_a_cancelled_transaction_rolls_back_and_the_store_goes_on(store: SessionPersistence) -> None:
    """DurableAgent.abort() cancels a turn wherever it is, also inside a transaction: nothing of it lands."""
    import asyncio

    await store.write_value(ctx(), "tool.0000", {"id": "c1"})
    inside = asyncio.Event()

    async def commit_result(tx: PersistenceContext) -> None:
        await store.append(tx, SessionRecord("tool", {"text": "result"}))
        await store.delete_value(tx, "tool.0000")
        inside.set()
        await asyncio.sleep(30)  # cancelled here, with the writes pending

    task = asyncio.ensure_future(store.transaction(ctx(), commit_result))
    await asyncio.wait_for(inside.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert list(await store.load(ctx())) == []
    assert [k for k, _ in await store.read_values(ctx(), "")] == ["tool.0000"]
    await store.append(ctx(), SessionRecord("tool", {"text": "after"}))  # the store is usable again
    assert bodies(await store.load(ctx())) == [("tool", {"text": "after"})]


async def test_a_nested_transaction_joins_the_outer_one(store: SessionPersistence) -> None:
    async def inner(tx: PersistenceContext) -> None:
        await store.append(tx, SessionRecord("user", {"text": "inner"}))

    async def outer(tx: PersistenceContext) -> None:
        await store.transaction(tx, inner)
        await store.append(tx, SessionRecord("user", {"text": "outer"}))
        raise Boom  # the inner one's write goes too: it was part of this transaction

    with pytest.raises(Boom):
        await store.transaction(ctx(), outer)
    assert list(await store.load(ctx())) == []

    async def outer_ok(tx: PersistenceContext) -> None:
        await store.transaction(tx, inner)
        await store.append(tx, SessionRecord("user", {"text": "outer"}))

    await store.transaction(ctx(), outer_ok)
    assert [b["text"] for _, b in bodies(await store.load(ctx()))] == ["inner", "outer"]


async def test_compaction_clears_and_appends_the_replacement_in_one_transaction(store: SessionPersistence) -> None:
    for i in range(3):
        await store.append(ctx(), SessionRecord("user", {"text": f"old {i}"}))

    async def compact(tx: PersistenceContext) -> None:
        await store.clear_records(tx)
        await store.append(tx, SessionRecord("compaction", {"summary": "three old messages"}))
        assert bodies(await store.load(tx)) == [("compaction", {"summary": "three old messages"})]

    await store.transaction(ctx(), compact)
    await store.append(ctx(), SessionRecord("user", {"text": "after"}))
    records = list(await store.load(ctx()))
    assert bodies(records) == [("compaction", {"summary": "three old messages"}), ("user", {"text": "after"})]
    # numbers keep growing across a clear: a record's number is never given to another
    assert records[0].seq > 3 and records[1].seq == records[0].seq + 1


async def test_values_are_sorted_by_key_under_a_prefix(store: SessionPersistence) -> None:
    for key in ("steering.0002", "send.0010", "steering.0001", "send.0002", "tool.1", "settings", "sendx"):
        await store.write_value(ctx(), key, {"key": key})
    await store.write_value(ctx(), "send.0002", {"key": "send.0002", "again": True})
    assert [k for k, _ in await store.read_values(ctx(), "send.")] == ["send.0002", "send.0010"]
    assert dict(await store.read_values(ctx(), "send."))["send.0002"] == {"key": "send.0002", "again": True}
    assert [k for k, _ in await store.read_values(ctx(), "steering.")] == ["steering.0001", "steering.0002"]
    assert [k for k, _ in await store.read_values(ctx(), "")] == sorted(
        ["steering.0002", "send.0010", "steering.0001", "send.0002", "tool.1", "settings", "sendx"])
    await store.delete_value(ctx(), "send.0010")
    await store.delete_value(ctx(), "send.0010")
    assert [k for k, _ in await store.read_values(ctx(), "send.")] == ["send.0002"]
    await store.write_value(ctx(), "plain", 42)
    await store.write_value(ctx(), "list", [1, "two", None])
    assert dict(await store.read_values(ctx(), "")) | {} == {
        **{k: v for k, v in await store.read_values(ctx(), "")}, "plain": 42, "list": [1, "two", None]}


async def test_sessions_are_kept_apart(store: SessionPersistence) -> None:
    await store.append(ctx("a"), SessionRecord("user", {"text": "for a"}))
    await store.write_value(ctx("a"), "k", "a's")
    await store.append(ctx("b"), SessionRecord("user", {"text": "for b"}))
    await store.clear_records(ctx("b"))
    assert bodies(await store.load(ctx("a"))) == [("user", {"text": "for a"})]
    assert list(await store.read_values(ctx("b"), "")) == []
    assert list(await store.load(ctx("b"))) == []


async def test_many_sessions_writing_at_once_all_land(store: SessionPersistence) -> None:
    async def session(n: int) -> None:
        for i in range(6):
            async def turn(tx: PersistenceContext, i: int = i) -> None:
                await store.append(tx, SessionRecord("user", {"n": n, "i": i}))
                await store.write_value(tx, "turn", i)

            await store.transaction(ctx(f"c{n}"), turn)

    await asyncio.gather(*(session(n) for n in range(12)))
    for n in range(12):
        records = list(await store.load(ctx(f"c{n}")))
        assert [r.body["i"] for r in records] == list(range(6))
        assert [r.seq for r in records] == list(range(1, 7))
        assert dict(await store.read_values(ctx(f"c{n}"), "")) == {"turn": 5}


async def test_credentials_are_masked_before_anything_is_kept(store: SessionPersistence) -> None:
    await store.append(ctx(), SessionRecord("user", {"text": f"my key is {API_KEY}", "password": "hunter2"}))
    await store.write_value(ctx(), "settings", {"api_key": "plain-secret", "note": f"Bearer {API_KEY}"})
    kept = repr(list(await store.load(ctx()))) + repr(list(await store.read_values(ctx(), "")))
    assert API_KEY not in kept and "hunter2" not in kept and "plain-secret" not in kept
    assert "[REDACTED]" in kept


# ---------------------------------------------------------------------- random programs against a model


class Model:
    """The rules, plainly: a list of records and a dict of values per session."""

    def __init__(self) -> None:
        self.records: list[tuple[str, dict[str, Any]]] = []
        self.values: dict[str, Any] = {}


def random_program(rng: random.Random, depth: int = 0) -> list[Any]:
    steps: list[Any] = []
    for _ in range(rng.randint(1, 12 if depth == 0 else 4)):
        roll = rng.random()
        if roll < 0.35:
            steps.append(("append", rng.choice(["user", "assistant", "tool"]), {"t": rng.randint(0, 999)}))
        elif roll < 0.45:
            steps.append(("clear",))
        elif roll < 0.65:
            steps.append(("write", rng.choice(["send.1", "send.2", "tool.0", "steer.1", "x"]), rng.randint(0, 9)))
        elif roll < 0.75:
            steps.append(("delete", rng.choice(["send.1", "send.2", "tool.0", "nope"])))
        elif depth < 2:
            steps.append(("tx", random_program(rng, depth + 1), rng.random() < 0.3))
    return steps


async def play(store: SessionPersistence, model: Model, c: PersistenceContext, steps: list[Any]) -> None:
    for step in steps:
        if step[0] == "append":
            await store.append(c, SessionRecord(step[1], step[2]))
            model.records.append((step[1], step[2]))
        elif step[0] == "clear":
            await store.clear_records(c)
            model.records.clear()
        elif step[0] == "write":
            await store.write_value(c, step[1], step[2])
            model.values[step[1]] = step[2]
        elif step[0] == "delete":
            await store.delete_value(c, step[1])
            model.values.pop(step[1], None)
        else:
            _, inner, fail = step
            saved = (list(model.records), dict(model.values))

            async def work(tx: PersistenceContext, inner: list[Any] = inner, fail: bool = fail) -> None:
                await play(store, model, tx, inner)
                assert bodies(await store.load(tx)) == model.records  # reads see the transaction's writes
                assert dict(await store.read_values(tx, "")) == model.values
                if fail:
                    raise Boom

            try:
                await store.transaction(c, work)
            except Boom:
                if not c.in_transaction:
                    model.records, model.values = saved
                else:
                    raise


async def test_random_programs_match_the_rules(store: SessionPersistence) -> None:
    rng = random.Random(20261201)
    for n in range(60):
        model = Model()
        c = ctx(f"prog{n}")
        try:
            await play(store, model, c, random_program(rng))
        except Boom:  # a failing transaction at the top: the model rolled back already
            pass
        records = list(await store.load(c))
        assert bodies(records) == model.records, f"program {n}"
        assert [r.seq for r in records] == sorted({r.seq for r in records}), f"program {n}: numbers not increasing"
        values = list(await store.read_values(c, ""))
        assert values == sorted(model.values.items()), f"program {n}"
        for prefix in ("send.", "tool.", "s"):
            assert list(await store.read_values(c, prefix)) == [(k, v) for k, v in sorted(model.values.items())
                                                                if k.startswith(prefix)]


# ---------------------------------------------------------------------- the databases only


async def test_what_was_committed_survives_reopening(tmp_path: Path) -> None:
    path = str(tmp_path / "s.duckdb")
    first = DuckDBPersistence(path=path)
    await first.append(ctx(), SessionRecord("user", {"text": "kept"}))
    await first.write_value(ctx(), "k", "v")
    await first.close()
    again = DuckDBPersistence(path=path)
    try:
        assert bodies(await again.load(ctx())) == [("user", {"text": "kept"})]
        assert list(await again.read_values(ctx(), "")) == [("k", "v")]
        await again.append(ctx(), SessionRecord("user", {"text": "next"}))
        assert [r.seq for r in await again.load(ctx())] == [1, 2]
    finally:
        await again.close()


async def test_saves_of_many_sessions_share_commits(tmp_path: Path) -> None:
    store = DuckDBPersistence(path=str(tmp_path / "s.duckdb"))
    try:
        await asyncio.gather(*(store.append(ctx(f"g{n}"), SessionRecord("user", {"n": n})) for n in range(40)))
        assert store.commits == 40 and store.batches < 40  # group commit
    finally:
        await store.close()


async def test_a_failed_commit_is_never_acknowledged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = DuckDBPersistence(path=str(tmp_path / "s.duckdb"))
    try:
        await store.append(ctx(), SessionRecord("user", {"text": "stored"}))
        original = store._apply

        def failing(batch: Any) -> Any:
            original(batch)
            raise RuntimeError("disk full")

        monkeypatch.setattr(store, "_apply", failing)
        results = await asyncio.gather(
            *(store.append(ctx(f"f{n}"), SessionRecord("user", {"n": n})) for n in range(5)),
            store.append(ctx(), SessionRecord("user", {"text": "lost"})), return_exceptions=True,
        )
        assert all(isinstance(r, SessionStoreError) for r in results), results
        monkeypatch.setattr(store, "_apply", original)
        assert bodies(await store.load(ctx())) == [("user", {"text": "stored"})]  # rolled back, all of it
        assert list(await store.load(ctx("f0"))) == []
    finally:
        await store.close()


@asynccontextmanager
async def _postgres_clients(count: int) -> AsyncIterator[list[PostgresPersistence]]:
    """``count`` clients of one PostgreSQL schema of their own (dropped afterwards)."""
    dsn = postgres_dsn()
    if dsn is None:
        pytest.skip("no PostgreSQL server on 127.0.0.1:5432 (CI starts one)")
    schema = f"fp_test_{uuid.uuid4().hex[:12]}"
    clients = [PostgresPersistence(dsn, schema=schema) for _ in range(count)]
    try:
        yield clients
    finally:
        for client in clients:
            await client.close()
        with psycopg.connect(dsn, autocommit=True) as con:
            con.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


async def test_two_postgres_clients_of_one_session_never_reuse_a_number() -> None:
    async with _postgres_clients(2) as hosts:
        await asyncio.gather(*(hosts[i % 2].append(ctx("shared"), SessionRecord("user", {"i": i})) for i in range(20)))
        records = list(await hosts[0].load(ctx("shared")))
        assert sorted(r.body["i"] for r in records) == list(range(20))
        assert [r.seq for r in records] == list(range(1, 21))


async def test_three_postgres_clients_of_many_new_sessions_never_deadlock_nor_reuse_a_number() -> None:
    # batches of many sessions at once from several clients: heads made and locked in session
    # order (no deadlock), a head another client has just made is seen and locked (no number twice)
    rng = random.Random(7)
    picks = [[f"s{rng.randrange(8)}" for _ in range(15)] for _ in range(12)]
    async with _postgres_clients(3) as hosts:

        async def client(n: int) -> None:
            for k, sid in enumerate(picks[n]):
                await hosts[n % 3].append(ctx(sid), SessionRecord("user", {"n": n, "k": k}))

        await asyncio.gather(*(client(n) for n in range(12)))
        seen = []
        for sid in sorted({sid for pick in picks for sid in pick}):
            records = list(await hosts[0].load(ctx(sid)))
            assert [r.seq for r in records] == list(range(1, len(records) + 1))
            seen += [(r.body["n"], r.body["k"]) for r in records]
        assert sorted(seen) == [(n, k) for n in range(12) for k in range(15)]


async def test_a_postgres_read_is_one_statement_and_a_batch_two(monkeypatch: pytest.MonkeyPatch) -> None:
    # the host's event loop runs every statement: a turn's reads and writes are a few round trips,
    # not one per table (head, records, values) and per step (make, lock, write)
    from hosting.sessions._stored import HeadUpdate, WriteSet

    sent: list[str] = []
    execute, transaction = psycopg.AsyncConnection.execute, psycopg.AsyncConnection.transaction

    def counting_execute(con: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(query.as_string(None) if hasattr(query, "as_string") else str(query))
        return execute(con, query, *args, **kwargs)

    def counting_transaction(con: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append("BEGIN .. COMMIT")
        return transaction(con, *args, **kwargs)

    async with _postgres_clients(1) as (store,):
        await store.append(ctx("warm"), SessionRecord("user", {"n": 0}))  # (the tables made)
        monkeypatch.setattr(psycopg.AsyncConnection, "execute", counting_execute)
        monkeypatch.setattr(psycopg.AsyncConnection, "transaction", counting_transaction)
        writes = WriteSet("s", appends=[("user", '{"n":1}'), ("assistant", '{"n":2}')], values={"host.x": '"v"'},
                          head=HeadUpdate(0, 1, 1.0, 2.0, "answered"))
        await store.commit(writes)
        assert len(sent) == 3, sent  # the transaction, the heads made and locked, the rows stored
        sent.clear()
        stored = await store.read("s", prefix="host.", after_seq=1)
        assert len(sent) == 1, sent
        assert stored.head is not None and (stored.head.next_seq, stored.head.version, stored.head.status) == \
            (3, 1, "answered")
        assert stored.records == [(2, "assistant", '{"n":2}')] and stored.values == [("host.x", '"v"')]
        assert (await store.read("s", records=False, prefix=None)).records == []
        assert (await store.read("nobody")).head is None
        monkeypatch.undo()

"""The DuckDB session store: a batch only appends, superseded revisions are pruned, old stores migrate.

DuckDB keeps ~2 KB of heap per UPDATE or ON CONFLICT upsert of a stored row until the database
closes (``bench/duckdb_retained.py``), so a save never updates: heads and values are revisions.
What the store gives back is compared, batch by batch, with the in-memory tables of the same plan.
"""

from __future__ import annotations

import asyncio
import json
import random
import tempfile
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hosting import DuckDBPersistence, DuckDBSessions, SessionStoreError, VersionConflictError
from hosting.sessions import MemoryTables
from hosting.sessions._stored import HeadUpdate, WriteSet
from tracer import Store

KEYED = Path(__file__).resolve().parents[3] / "fixtures" / "sessions" / "v2-keyed.json"


class _Counting:
    """A cursor that remembers the statements run on it."""

    def __init__(self, con: Any) -> None:
        self.con = con
        self.statements: list[str] = []

    def execute(self, sql: str, *args: Any) -> _Counting:
        self.statements.append(sql)
        self.con.execute(sql, *args)
        return self

    def __getattr__(self, name: str) -> Any:
        return getattr(self.con, name)


def _save(sid: str, version: int, text: str) -> WriteSet:
    ws = WriteSet(sid, appends=[("user", f'{{"text": "{text}"}}')], values={"host.session": '{"v": 1}'})
    ws.head = HeadUpdate(version, version + 1, 1.0, 2.0, "idle")
    return ws


def _rows(store: DuckDBPersistence, table: str) -> int:
    return int(store._con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0])


async def test_a_batch_only_inserts_heads_and_values(tmp_path: Path) -> None:
    """A save of a stored session appends a head revision and value revisions: no UPDATE, no ON
    CONFLICT upsert, no DELETE; a session dropped and written again in one batch starts again."""
    store = DuckDBPersistence(path=str(tmp_path / "s.duckdb"))
    try:
        counting = store._con = _Counting(store._con)  # type: ignore[assignment]
        await store.commit(_save("a", 0, "first"))
        counting.statements.clear()
        gone = WriteSet("a", values={"host.session": None})
        await store._write([_save("a", 1, "second"), _save("b", 0, "new"), gone])
        written = [s.split()[0] for s in counting.statements if s.split()[0] not in ("SELECT", "BEGIN", "COMMIT")]
        assert written == ["INSERT", "INSERT", "INSERT"], counting.statements  # records, values, heads
        assert not any("ON CONFLICT" in s for s in counting.statements)
        assert (await store.read("a")).values == [] and (await store.read("b")).values == [("host.session", '{"v": 1}')]
        await store._write([WriteSet("a", drop=True), _save("a", 0, "again")])
        a = await store.read("a")
        b = await store.read("b")
        assert a.head is not None and a.head.version == 1 and [r[2] for r in a.records] == ['{"text": "again"}']
        assert b.head is not None and b.head.version == 1 and b.head.next_seq == 2
        await store._write([_save("a", 1, "more")])
        a = await store.read("a")
        assert a.head is not None and (a.head.version, a.head.next_seq) == (2, 3)
        assert [r[2] for r in a.records] == ['{"text": "again"}', '{"text": "more"}']
        with pytest.raises(VersionConflictError, match="'a'"):
            await store.commit(_save("a", 1, "stale"))
    finally:
        await store.close()


async def test_superseded_revisions_are_pruned_now_and_then(tmp_path: Path) -> None:
    path = str(tmp_path / "s.duckdb")
    store = DuckDBPersistence(path=path, prune_rows=40)
    try:
        for version in range(30):
            await store.commit(_save("a", version, f"t{version}"))
            await store.commit(WriteSet("a", values={f"turn.{version}": "1", f"turn.{version - 1}": None}))
        # 60 batches of two revisions each: pruned at 40 rows, so at most 40 superseded are left
        assert _rows(store, "fp_session_head") <= 1 + 40
        assert _rows(store, "fp_session_value") <= 2 + 40
        kept = await store.read("a")
        assert kept.head is not None and kept.head.version == 30 and len(kept.records) == 30
        assert sorted(kept.values) == [("host.session", '{"v": 1}'), ("turn.29", "1")]
    finally:
        await store.close()
    reopened = DuckDBPersistence(path=path)  # opening prunes what is superseded, deletions included
    try:
        assert (_rows(reopened, "fp_session_head"), _rows(reopened, "fp_session_value")) == (1, 2)
        assert sorted((await reopened.read("a")).values) == sorted(kept.values)
    finally:
        await reopened.close()


async def test_a_batch_that_fails_is_not_acknowledged_nor_remembered(tmp_path: Path) -> None:
    """A batch whose transaction fails (here: its prune) raises for every write set in it, and the
    writer forgets the heads it planned: the next save is checked against what is stored."""
    store = DuckDBPersistence(path=str(tmp_path / "s.duckdb"), prune_rows=3)
    try:
        await store.commit(_save("a", 0, "first"))  # 2 revisions: no prune yet
        real = store._prune

        def failing() -> None:
            raise duckdb.IOException("disk gone")

        store._prune = failing  # type: ignore[method-assign]
        with pytest.raises(SessionStoreError, match="disk gone"):
            await store.commit(_save("a", 1, "lost"))
        store._prune = real  # type: ignore[method-assign]
        with pytest.raises(VersionConflictError):
            await store.commit(_save("a", 2, "after the lost one"))  # the lost save's version was never stored
        await store.commit(_save("a", 1, "second"))
        a = await store.read("a")
        assert a.head is not None and a.head.version == 2
        assert [r[2] for r in a.records] == ['{"text": "first"}', '{"text": "second"}']
    finally:
        await store.close()


async def test_big_values_are_pruned_by_their_text(tmp_path: Path) -> None:
    store = DuckDBPersistence(path=str(tmp_path / "s.duckdb"), prune_chars=10_000)
    try:
        for version in range(40):
            ws = _save("a", version, "t")
            ws.values["host.session"] = json.dumps("x" * 1000)
            await store.commit(ws)
        assert _rows(store, "fp_session_value") <= 1 + 10  # (2048 rows would not have pruned)
        assert (await store.read("a")).values == [("host.session", json.dumps("x" * 1000))]
    finally:
        await store.close()


@pytest.mark.parametrize(("rows", "chars"), [(0, 10), (10, 0)])
def test_the_prune_bounds_must_be_positive(tmp_path: Path, rows: int, chars: int) -> None:
    with pytest.raises(ValueError, match="prune_rows and prune_chars"):
        DuckDBPersistence(path=str(tmp_path / "s.duckdb"), prune_rows=rows, prune_chars=chars)


@pytest.mark.parametrize("where", ["own-file", "recordings-file"])
async def test_a_store_of_heads_and_values_updated_in_place_migrates_on_open(tmp_path: Path, where: str) -> None:
    """A file written by the version whose heads and values were keyed rows (04c6a18): every
    session, record and value reads back as that version read it, and the sessions go on."""
    data = json.loads(KEYED.read_text())
    path = tmp_path / "keyed.duckdb"
    recordings = Store.open(path) if where == "recordings-file" else None
    con = recordings.cursor() if recordings is not None else duckdb.connect(str(path))
    for ddl in data["ddl"]:
        con.execute(ddl)
    for table, rows in data["tables"].items():
        con.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    con.close()
    sessions = DuckDBSessions(recordings) if recordings is not None else DuckDBSessions(path=str(path))
    try:
        p = sessions.persistence
        for sid, expected in data["expected"].items():
            read = await p.read(sid, prefix="")
            assert read.head is not None
            h = read.head
            assert [h.session_id, h.next_seq, h.version, h.created_at, h.updated_at, h.status] == expected["head"]
            assert [list(r) for r in read.records] == expected["records"]
            assert sorted(map(list, read.values)) == expected["values"]
            if expected["loaded"] is None or "unreadable" in expected["loaded"]:
                continue
            env = await sessions.load(sid)
            assert env is not None
            assert {"version": env.version, "status": env.status, "turn": env.turn,
                    "messages": [[m.item.kind, m.item.text] for m in env.conversation_obj().messages]} == \
                expected["loaded"]
        assert [h.session_id for h in await p.heads(limit=100, offset=0)] == data["listed"]
        assert await sessions.stored_bytes() == data["stored_bytes"]
        columns = {r[0] for r in p._con.execute(  # type: ignore[attr-defined]
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'fp_session_head'").fetchall()}
        assert "rev" in columns
        alice = await sessions.load("alice")
        assert alice is not None
        with pytest.raises(VersionConflictError):
            await p.commit(_save("alice", alice.version - 1, "stale"))
        await p.commit(_save("alice", alice.version, "goes on"))
        assert (await p.read("alice", records=False)).head.version == alice.version + 1  # type: ignore[union-attr]
    finally:
        await sessions.close()
        if recordings is not None:
            recordings.close()
    if recordings is None:  # a second open finds nothing more to migrate
        again = DuckDBPersistence(path=str(path))
        try:
            assert (await again.read("alice", records=False)).head.version == alice.version + 1  # type: ignore[union-attr]
        finally:
            await again.close()


# ---------------------------------------------------------------------- against the in-memory tables

SIDS = ("a", "b", "c")


def _batch(rng: random.Random, versions: dict[str, int]) -> list[WriteSet]:
    """A random batch; ``versions`` (what the model holds) is moved on as if every guard held."""
    out = []
    for _ in range(rng.randint(1, 4)):
        sid = rng.choice(SIDS)
        ws = WriteSet(sid, drop=rng.random() < 0.08)
        if ws.drop:
            versions[sid] = 0
        ws.cleared = rng.random() < 0.1
        ws.appends = [("user", json.dumps({"t": rng.choice(["x", "ü ✓", ""]) * rng.randint(0, 3)}))
                      for _ in range(rng.randint(0, 3))]
        for _ in range(rng.randint(0, 3)):
            key = rng.choice(["host.session", "turn.1", "turn.2", "plan.p"])
            ws.values[key] = None if rng.random() < 0.3 else json.dumps(rng.randint(0, 99))
        if rng.random() < 0.7:
            stale = rng.random() < 0.2
            expected = versions.get(sid, 0) + (rng.choice([-1, 1]) if stale else 0)
            ws.head = HeadUpdate(expected, expected + 1, float(rng.randint(0, 9)), float(rng.randint(0, 9)),
                                 rng.choice([None, "idle", "answered"]))
            if not stale:
                versions[sid] = expected + 1
        out.append(ws)
    return out


async def _same(duck: DuckDBPersistence, model: MemoryTables) -> None:
    for sid in SIDS:
        for kwargs in ({"prefix": ""}, {"prefix": "turn.", "after_seq": 2}, {"records": False, "prefix": None}):
            got, want = await duck.read(sid, **kwargs), await model.read(sid, **kwargs)
            assert (got.head, got.records, sorted(got.values)) == (want.head, want.records, sorted(want.values))
    for offset in range(3):
        assert await duck.heads(limit=2, offset=offset) == await model.heads(limit=2, offset=offset)
    assert await duck.stored_bytes() == await model.stored_bytes()


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 12), st.integers(1, 60))
def test_random_batches_read_back_as_the_in_memory_tables(seed: int, prune_rows: int, prune_chars: int) -> None:
    """Random batches (drops, clears, appends, values set and deleted, guards that hold or fail,
    raw values planted), pruned every few rows: DuckDB reads back, lists, counts and refuses
    exactly as the in-memory tables do, and again after reopening the file."""

    async def play(path: str) -> None:
        rng = random.Random(seed)
        duck = DuckDBPersistence(path=path, prune_rows=prune_rows, prune_chars=prune_chars)
        model = MemoryTables()
        versions: dict[str, int] = {}
        try:
            for _ in range(12):
                if rng.random() < 0.1:
                    sid, text = rng.choice(SIDS), json.dumps(rng.random())
                    await duck.write_raw_value(sid, "host.session", text)
                    await model.write_raw_value(sid, "host.session", text)
                    versions[sid] = (await model.read(sid, records=False, prefix=None)).head.version  # type: ignore[union-attr]
                batch = _batch(rng, versions)
                conflicts = await duck._write(batch)
                want = await model._write(batch)
                assert {i: str(e) for i, e in conflicts.items()} == {i: str(e) for i, e in want.items()}
                for sid in SIDS:  # the model's versions, whatever the guards did
                    head = (await model.read(sid, records=False, prefix=None)).head
                    versions[sid] = head.version if head is not None else 0
                await _same(duck, model)
        finally:
            await duck.close()
        reopened = DuckDBPersistence(path=path)
        try:
            await _same(reopened, model)
        finally:
            await reopened.close()

    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(play(str(Path(tmp) / "s.duckdb")))

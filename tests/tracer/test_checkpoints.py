"""What a checkpoint rewrites, and items stored once without a key on fp_item (tracer._stored_items)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracer._upkeep
from tracer import ContextItem, Item, Origin, Recorder, Store
from tracer._schema import SCHEMA_VERSION
from tracer._stored_items import StoredItems

GROWING = ("fp_run", "fp_item", "fp_stage", "fp_snapshot")


def _text(rng: random.Random, n: int) -> str:
    return f"{n}: " + "".join(rng.choice("abcdefghij ") for _ in range(rng.randint(1024, 4096)))


def _record_turns(recorder: Recorder, rng: random.Random, start: int, turns: int) -> None:
    system = ContextItem(Item.of_text("system", "be brief"), Origin("config", source="persona"))
    for n in range(start, start + turns):
        message = ContextItem(Item.of_text("user", _text(rng, n)), Origin("user"))
        run = recorder.start_run(agent="a", input=message.item.text, session_id=f"s{n % 4}")
        with run.stage("inference") as stage:
            stage.inputs([system, message])
            stage.output(Item.of_text("assistant", f"answer {n}"))
        run.end("answered", output=f"answer {n}")


def _first_row_group(path: Path, table: str) -> set[tuple[Any, ...]]:
    """Where the first row group of ``table`` lies in the file: its segments' blocks and row counts."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        return set(con.execute(
            f"SELECT column_name, segment_id, block_id, block_offset, count FROM pragma_storage_info('{table}') "
            "WHERE row_group_id = 0 AND persistent").fetchall())
    finally:
        con.close()


def test_a_checkpoint_leaves_what_earlier_ones_wrote_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each checkpoint writes what came since the last one: the first row group each growing table got
    at the first checkpoint is still where it was, unchanged, nine checkpoints later. (With a key, a
    table kept appending to its first row group, rewritten whole at every checkpoint; with DuckDB's
    merges of small row groups, it was rewritten at the 2nd, 4th and 8th.)"""
    monkeypatch.setattr(tracer._upkeep, "CHECKPOINT_AT", 256 * 1024)
    path = tmp_path / "s.duckdb"
    rng = random.Random(7)
    first: dict[str, set[tuple[Any, ...]]] = {}
    for round_ in range(10):  # a store closed after each round: the next process checkpoints too
        store = Store.open(path)
        recorder = Recorder(store)
        checkpoints = 0
        for batch in range(8):
            _record_turns(recorder, rng, (round_ * 8 + batch) * 20, 20)
            store.flush()  # a commit; a checkpoint once the log holds 256 KB
            assert store._upkeep is not None
            if store._upkeep.checkpoints > checkpoints:
                checkpoints = store._upkeep.checkpoints
                break
        assert checkpoints, "no checkpoint in a round"
        store.close()
        if not first:
            first = {table: _first_row_group(path, table) for table in GROWING}
            assert all(first.values()), first
    for table in GROWING:
        assert _first_row_group(path, table) == first[table], table


def test_a_store_of_schema_3_loses_its_keys_and_reads_the_same(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    store = Store.open(path)
    _record_turns(Recorder(store), random.Random(1), 0, 12)
    store.flush()
    before = store.query("SELECT * FROM context ORDER BY run_id, stage_id, position")
    [(items,)] = store.query("SELECT count(*) FROM fp_item")
    runs = store.query("SELECT * FROM runs ORDER BY id")
    store.close()
    con = duckdb.connect(str(path))  # turn the file back into schema 3: the same tables with keys
    for table, key in (("fp_run", "id"), ("fp_item", "hash")):
        con.execute(f"CREATE TABLE {table}_keyed AS SELECT * FROM {table} LIMIT 0")
        con.execute(f"ALTER TABLE {table}_keyed ADD PRIMARY KEY ({key})")
        con.execute(f"INSERT INTO {table}_keyed SELECT * FROM {table}")
        con.execute(f"DROP TABLE {table}")
        con.execute(f"ALTER TABLE {table}_keyed RENAME TO {table}")
    con.execute("UPDATE fp_meta SET value = '3' WHERE key = 'schema_version'")
    assert len(con.execute("SELECT * FROM duckdb_constraints() WHERE constraint_type = 'PRIMARY KEY'").fetchall()) == 3
    con.close()
    with Store.open(path, read_only=True) as migrated:  # a reader migrates it too (through a writer)
        assert migrated.query("SELECT * FROM context ORDER BY run_id, stage_id, position") == before
    with Store.open(path) as migrated:
        assert migrated.query("SELECT value FROM fp_meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
        assert migrated.query("SELECT table_name FROM duckdb_constraints() WHERE constraint_type = 'PRIMARY KEY'") == [
            ("fp_meta",)]
        assert migrated.query("SELECT * FROM context ORDER BY run_id, stage_id, position") == before
        assert migrated.query("SELECT * FROM runs ORDER BY id") == runs
        recorder = Recorder(migrated)  # and goes on: the items it holds are not written again
        _record_turns(recorder, random.Random(1), 0, 12)
        migrated.flush()
        assert migrated.query("SELECT count(*), count(DISTINCT hash) FROM fp_item") == [(items, items)]


# ------------------------------------------------------------------ items once, without a key

actions = st.lists(
    st.one_of(
        st.tuples(st.just("stage"), st.lists(st.integers(0, 30), min_size=1, max_size=6)),
        st.tuples(st.just("reopen"), st.none()),  # a later process: the writer knows nothing yet
        st.tuples(st.just("forget"), st.none()),  # the recent hashes forgotten (as past RECENT)
    ),
    min_size=1, max_size=25,
)


@given(actions)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_each_item_is_stored_once_whatever_the_writer_knows(tmp_path_factory: pytest.TempPathFactory,
                                                             steps: list[tuple[str, Any]]) -> None:
    path = tmp_path_factory.mktemp("once") / "s.duckdb"
    store = Store.open(path)
    recorder = Recorder(store)
    sent: set[int] = set()
    for action, items in steps:
        if action == "stage":
            run = recorder.start_run(agent="a", input="q")
            with run.stage("inference") as stage:
                stage.inputs([ContextItem(Item.of_text("user", f"item {i}"), Origin("user")) for i in items])
            run.end("answered")
            sent.update(items)
        elif action == "reopen":
            store.close()
            store = Store.open(path)
            recorder = Recorder(store)
        else:
            store.flush()
            assert store._writer is not None
            store._writer._items._recent.clear()
    store.flush()
    stored = store.query("SELECT text, count(*) FROM items WHERE text LIKE 'item %' GROUP BY text")
    assert sorted(stored) == sorted((f"item {i}", 1) for i in sent)
    store.close()


def _items_table() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("CREATE TABLE fp_item (hash VARCHAR, kind VARCHAR, text VARCHAR, body VARCHAR)")
    return con


def test_a_hash_whose_digest_is_known_is_looked_up_and_written_when_absent() -> None:
    """A digest match is not taken for the item: two hashes may share one (or the item was written
    by an earlier process): the file is asked, and only what it holds is left out."""
    con = _items_table()
    con.execute("INSERT INTO fp_item VALUES ('h-old', 'user', 'old', NULL)")
    items = StoredItems(con)
    assert items.new([("h-old", "user", "old", None)]) == []  # in the file, not yet recent
    items._all_digests().add(hash("h-collides"))  # as if another hash had this one's digest
    assert items.new([("h-collides", "user", "new", None)]) == [("h-collides", "user", "new", None)]
    assert items.new([("h-new", "user", "x", None), ("h-new", "user", "x", None)]) == [("h-new", "user", "x", None)]


def test_the_recent_hashes_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tracer._stored_items.RECENT", 10)
    items = StoredItems(_items_table())
    for n in range(100):
        items.written([f"h{n}"])
        assert len(items._recent) <= 11
    assert len(items._all_digests()) == 100  # every hash's digest is kept

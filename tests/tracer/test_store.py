"""The DuckDB store: round trips, the schema version, bad files, read-only queries."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tracer import (
    AmbiguousIdError,
    ContextItem,
    Edge,
    Item,
    NewerSchemaError,
    NotAStoreError,
    NotFoundError,
    Origin,
    Recorder,
    RedactionPolicy,
    RunFilter,
    Store,
    StoreError,
    StoreLockedError,
)
from tracer._schema import SCHEMA_VERSION

# ------------------------------------------------------------------ round trip (hypothesis)

# Text that includes the control characters the writer uses as separators, NUL and non-ASCII.
tricky = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["", "\x1e", "\x1f", "\x1d", "\x1c", "a\x1eb", "\x00", "naïve ✓", "[REDACTED]"]),
)
maybe_text = st.one_of(st.none(), tricky)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), tricky),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(tricky, inner, max_size=3)),
    max_leaves=6,
)
items = st.one_of(
    st.builds(lambda kind, text: Item.of_text(kind, text), st.sampled_from(["user", "assistant", "system", "memory"]),
              tricky),
    st.builds(lambda name, args: Item("tool_call", {"id": "c1", "name": name, "arguments": args}), tricky, json_values),
    st.builds(lambda content: Item("tool_result", {"call_id": "c1", "name": "t", "content": content,
                                                   "is_error": False}), tricky),
)
origins = st.builds(Origin, st.sampled_from(["stage", "user", "memory", "config", "x\x1fy"]), maybe_text, maybe_text,
                    maybe_text)
entries = st.tuples(items, origins, st.booleans(), maybe_text)
stage_specs = st.lists(
    st.fixed_dictionaries({
        "kind": st.sampled_from(["input", "inference", "tool", "answer"]),
        "name": tricky,
        "inputs": st.lists(entries, max_size=6),
        "outputs": st.lists(items, max_size=3),
        "attributes": st.dictionaries(st.text(max_size=5), json_values, max_size=3),
        "status": st.sampled_from(["ok", "error"]),
        "error": maybe_text,
    }),
    max_size=5,
)
run_specs = st.lists(
    st.fixed_dictionaries({
        "input": tricky, "session": maybe_text, "labels": st.lists(tricky, max_size=3),
        "stages": stage_specs, "status": st.sampled_from(["answered", "failed", "awaiting"]), "output": maybe_text,
        "tokens": st.integers(0, 10**9), "cost": st.floats(0, 1e6, allow_nan=False),
    }),
    min_size=1, max_size=3,
)


def _record(store: Store, specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Record ``specs`` and return what each run should read back as."""
    recorder = Recorder(store, redaction=RedactionPolicy.none())
    expected = []
    for spec in specs:
        run = recorder.start_run(agent="a", input=spec["input"], session_id=spec["session"], labels=spec["labels"])
        stages = []
        previous = None
        for s in spec["stages"]:
            stage = run.stage(s["kind"], s["name"], after=[previous] if previous else [])
            stage.inputs([ContextItem(i, o) for i, o, inc, _ in s["inputs"] if inc],
                         dropped=[(ContextItem(i, o), d or "window") for i, o, inc, d in s["inputs"] if not inc])
            for item in s["outputs"]:
                stage.output(item)
            stage.set(**s["attributes"])
            stage.close(s["status"], s["error"])
            stages.append((stage, s))
            previous = stage
        run.end(spec["status"], output=spec["output"], tokens_in=spec["tokens"], cost=spec["cost"])
        expected.append({"run": run, "spec": spec, "stages": stages})
    store.flush()
    return expected


# no shrinking: each example opens a store, and shrinking one took minutes; the example is printed
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow],
          phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(run_specs)
def test_random_runs_read_back_equal(specs: list[dict[str, Any]]) -> None:
    store = Store.open(":memory:")
    try:
        for exp in _record(store, specs):
            data = store.load_run(exp["run"].id)
            spec = exp["spec"]
            assert (data.run.input, data.run.session_id, data.run.status, data.run.output) == (
                spec["input"], spec["session"], spec["status"], spec["output"])
            assert list(data.run.labels) == spec["labels"]
            assert (data.run.tokens_in, data.run.cost) == (spec["tokens"], spec["cost"])
            assert [s.id for s in data.stages] == [st_.id for st_, _ in exp["stages"]]
            for (recorded, s), stored in zip(exp["stages"], data.stages, strict=True):
                # an empty stage name defaults to the kind
                assert (stored.kind, stored.name, stored.status, stored.error) == (
                    s["kind"], s["name"] or s["kind"], s["status"], s["error"])
                assert stored.started_at == recorded.started_at
                assert stored.attributes == s["attributes"]
                sent = [(i, o, True, None) for i, o, inc, _ in s["inputs"] if inc]
                left = [(i, o, False, d or "window") for i, o, inc, d in s["inputs"] if not inc]
                got = data.inputs.get(stored.id, [])
                assert [e.position for e in got] == list(range(len(sent) + len(left)))
                for entry, (item, origin, included, dropped_by) in zip(got, sent + left, strict=True):
                    assert entry.item_hash == item.hash
                    assert data.items[entry.item_hash].body == item.body
                    assert (entry.origin, entry.included, entry.dropped_by) == (origin, included, dropped_by)
                assert data.outputs.get(stored.id, []) == [i.hash for i in s["outputs"]]
            assert set(data.edges) == {
                Edge(data.run.id, a.id, b.id, "next") for (a, _), (b, _) in zip(exp["stages"], exp["stages"][1:], strict=False)
            }
    finally:
        store.close()


def test_many_rows_in_one_batch_round_trip(tmp_path: Path) -> None:
    """More rows than one chunk of the packed encoding, with some values that force the fallback."""
    store = Store.open(tmp_path / "s.duckdb")
    recorder = Recorder(store, redaction=RedactionPolicy.none())
    run = recorder.start_run(agent="a", input="x")
    ids = []
    for n in range(1500):
        with run.stage("tool", f"t{n}" if n != 700 else "odd\x1ename") as stage:
            stage.inputs([ContextItem(Item.of_text("user", f"m{n}"), Origin("user", source=f"s{n}"))])
            stage.output(Item.of_text("assistant", "" if n % 2 else f"r{n}"))
        ids.append(stage.id)
    run.end("answered", output="")
    store.close()
    with Store.open(tmp_path / "s.duckdb", read_only=True) as reader:
        data = reader.load_run(run.id)
    assert [s.id for s in data.stages] == ids
    assert data.stages[700].name == "odd\x1ename"
    assert data.run.output == ""
    assert data.items[data.outputs[ids[1]][0]].text == ""
    assert data.inputs[ids[1499]][0].origin.source == "s1499"


def test_items_are_stored_once(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.duckdb")
    recorder = Recorder(store)
    system = ContextItem(Item.of_text("system", "be brief"), Origin("config", source="persona"))
    for _ in range(3):
        run = recorder.start_run(agent="a", input="hi")
        for _ in range(4):
            with run.stage("inference") as stage:
                stage.inputs([system])
        run.end("answered")
    # a second recorder (a later process) writes the same item again: no duplicate, no error
    run = Recorder(store).start_run(agent="a", input="hi")
    with run.stage("inference") as stage:
        stage.inputs([system])
    run.end("answered")
    store.flush()
    assert store.query("SELECT count(*) FROM items WHERE text = 'be brief'") == [(1,)]
    assert store.query("SELECT count(*) FROM context WHERE text = 'be brief'") == [(13,)]
    store.close()


# ------------------------------------------------------------------ reading API


def _small_store(path: Path) -> tuple[Store, list[str]]:
    store = Store.open(path)
    recorder = Recorder(store)
    ids = []
    for n, (session, agent, status) in enumerate([("s1", "a", "answered"), ("s1", "a", "failed"),
                                                  ("s2", "b", "answered")]):
        run = recorder.start_run(agent=agent, input=f"question {n}", session_id=session, labels=["demo"])
        run.end(status, output=f"answer {n}")
        ids.append(run.id)
    store.flush()
    return store, ids


def test_list_filter_and_resolve(tmp_path: Path) -> None:
    store, ids = _small_store(tmp_path / "s.duckdb")
    assert [r.id for r in store.list_runs()] == ids[::-1]
    assert [r.id for r in store.list_runs(RunFilter(session_id="s1"))] == ids[1::-1]
    assert store.count_runs(RunFilter(status="failed")) == 1
    assert [r.id for r in store.list_runs(RunFilter(agent="b"))] == [ids[2]]
    assert store.count_runs(RunFilter(label="demo")) == 3
    assert store.resolve_run_id("last") == ids[2]
    assert store.resolve_run_id(ids[0]) == ids[0]
    assert store.resolve_run_id(ids[0][:-3]) == ids[0]
    with pytest.raises(AmbiguousIdError, match=r"prefix 'r-' is ambiguous: 3 runs .* give more of the id") as many:
        store.resolve_run_id("r-")
    assert (many.value.ref, many.value.matches) == ("r-", 3)
    assert isinstance(many.value, NotFoundError), "callers that catch NotFoundError still catch it"
    with pytest.raises(NotFoundError, match="no run matches"):
        store.resolve_run_id("r-zzz")
    with pytest.raises(NotFoundError, match=r"no run matches 'r-z+…'") as long_ref:
        store.resolve_run_id("r-" + "z" * 5000)
    assert len(str(long_ref.value)) < 300, "an id of 5,000 characters is not echoed whole"
    assert [r.id for r in store.session_runs("s1")] == ids[:2]
    # a run a sub-agent made for another (started after it): listed unless asked not to, never "last"
    child = Recorder(store).start_run(agent="helper", input="help", attributes={"parent_run": ids[0]})
    child.end("answered", output="helped")
    store.flush()
    assert store.resolve_run_id("last") == ids[2], "a sub-agent's run is reached through its parent"
    assert store.count_runs() == 4 and store.count_runs(RunFilter(children=False)) == 3
    assert child.id not in [r.id for r in store.list_runs(RunFilter(children=False))]
    staged = Recorder(store).start_run(agent="a", input="staged")
    for name in ("one", "two", "three"):
        with staged.stage("tool", name):
            pass
    staged.end("answered", output="done")
    store.flush()
    with pytest.raises(AmbiguousIdError, match="3 stages") as many_stages:
        store.resolve_stage("s-")
    assert many_stages.value.matches == 3
    store.close()


def test_re_runs_can_be_left_out(tmp_path: Path) -> None:
    store, ids = _small_store(tmp_path / "s.duckdb")
    fork = Recorder(store).start_run(agent="a", input="question 0", session_id="s1", forked_from_run=ids[0])
    fork.end("answered", output="answer 0")
    store.flush()
    assert store.count_runs() == 4 and store.list_runs()[0].id == fork.id
    assert [r.id for r in store.list_runs(RunFilter(forks=False))] == ids[::-1]
    assert store.count_runs(RunFilter(session_id="s1", forks=False)) == 2
    store.close()


def test_read_query_refuses_writes(tmp_path: Path) -> None:
    store, ids = _small_store(tmp_path / "s.duckdb")
    columns, rows = store.read_query("SELECT id, status FROM runs ORDER BY started_at")
    assert columns == ["id", "status"] and [r[0] for r in rows] == ids
    for sql in ("DELETE FROM fp_run", "SELECT 1; SELECT 2", "ATTACH 'x.db'", "COPY fp_run TO 'x.csv'"):
        with pytest.raises(StoreError):
            store.read_query(sql)
    with pytest.raises(StoreError, match="not INSTALL"):  # DuckDB calls it a LOAD statement
        store.read_query("INSTALL httpfs")
    with pytest.raises(StoreError, match="failed"):
        store.read_query("SELECT nope FROM runs")
    assert store.count_runs() == 3
    store.close()


@pytest.mark.parametrize("sql", [
    "EXPLAIN ANALYZE DELETE FROM fp_run", "explain analyse delete from fp_run",
    "/* a comment */ EXPLAIN ANALYZE DELETE FROM fp_run", "EXPLAIN (ANALYZE) DELETE FROM fp_run",
    "EXPLAIN (ANALYZE true, FORMAT json) DELETE FROM fp_run", "EXPLAIN ANALYZE (FORMAT json) DELETE FROM fp_run",
    "EXPLAIN ANALYZE WITH a AS (SELECT 1) DELETE FROM fp_run", "EXPLAIN ANALYZE UPDATE fp_run SET status = 'x'",
    "EXPLAIN ANALYZE CREATE TABLE t AS SELECT 1", "EXPLAIN ANALYZE INSERT INTO fp_meta SELECT * FROM fp_meta",
])
def test_read_query_refuses_a_write_under_explain_analyze(tmp_path: Path, sql: str) -> None:
    """EXPLAIN ANALYZE runs the statement it explains: on a store opened for writing it deleted every run."""
    store, _ = _small_store(tmp_path / "s.duckdb")
    with pytest.raises(StoreError, match="read-only"):
        store.read_query(sql)
    assert store.count_runs() == 3
    assert [name for (name,) in store.query("SELECT table_name FROM duckdb_tables() WHERE table_name = 't'")] == []
    store.close()


def test_read_query_explains_a_select(tmp_path: Path) -> None:
    store, _ = _small_store(tmp_path / "s.duckdb")
    for sql in ("EXPLAIN SELECT * FROM runs", "EXPLAIN ANALYZE SELECT count(*) FROM runs",
                "-- the plan\nEXPLAIN (FORMAT json) SELECT 1", "EXPLAIN ANALYZE (SELECT 1)", "EXPLAIN ANALYZE FROM runs"):
        columns, rows = store.read_query(sql)
        assert columns and rows, sql
    store.close()


def test_views_are_documented_and_queryable(tmp_path: Path) -> None:
    store, _ = _small_store(tmp_path / "s.duckdb")
    for view in ("runs", "stages", "edges", "context", "outputs", "items"):
        store.query(f"SELECT * FROM {view} LIMIT 1")
    store.close()


# ------------------------------------------------------------------ the schema version


def test_a_new_store_has_a_version_table(tmp_path: Path) -> None:
    Store.open(tmp_path / "s.duckdb").close()
    con = duckdb.connect(str(tmp_path / "s.duckdb"), read_only=True)
    meta = dict(con.execute("SELECT key, value FROM fp_meta").fetchall())
    con.close()
    assert meta == {"application": "footprint", "schema_version": str(SCHEMA_VERSION)}


def test_an_older_store_is_migrated_when_opened_even_for_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tracer._schema as schema
    import tracer._store as store_module

    path = tmp_path / "s.duckdb"
    store, _ = _small_store(path)
    store.close()
    # pretend the file is at version N and this footprint knows version N+1 with one migration
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    monkeypatch.setattr(store_module, "MIGRATIONS", {
        **schema.MIGRATIONS, SCHEMA_VERSION: "ALTER TABLE fp_run ADD COLUMN IF NOT EXISTS note VARCHAR;"})
    Store.open(path, read_only=True).close()  # a reader migrates it first, as a writer would
    con = duckdb.connect(str(path), read_only=True)
    assert con.execute("SELECT value FROM fp_meta WHERE key = 'schema_version'").fetchone() == (
        str(SCHEMA_VERSION + 1),)
    assert "note" in [c[0] for c in con.execute("DESCRIBE fp_run").fetchall()]
    assert con.execute("SELECT count(*) FROM fp_run").fetchone() == (3,)
    con.close()


def test_a_version_1_store_gets_packed_snapshots_and_reads_the_same(tmp_path: Path) -> None:
    """Schema 1 kept a row per snapshot position, edge and output; opening it for writing packs them."""
    path = tmp_path / "s.duckdb"
    store = Store.open(path)
    run = Recorder(store).start_run(agent="a", input="q", session_id="s")
    system = ContextItem(Item.of_text("system", "be brief"), Origin("prompt_section", source="base"))
    odd = ContextItem(Item.of_text("user", "odd"), Origin("file", source="notes\x1fv2.txt"))  # a separator: row by row
    old = ContextItem(Item.of_text("user", "old"), Origin("user", source="input"))
    with run.stage("inference", "t1") as first:
        first.inputs([system, old], dropped=[(ContextItem(Item.of_text("user", "older"), Origin("user")), "window")])
        answer = first.output(Item.of_text("assistant", "a1"))
    with run.stage("inference", "t2", after=[first]) as second:
        second.inputs([system, odd, answer])
    run.end("answered", output="a1")
    store.flush()
    before = store.load_run(run.id)
    store.close()
    con = duckdb.connect(str(path))  # turn the file back into schema 1
    con.execute("INSERT INTO fp_entry SELECT * FROM fp_entries WHERE stage_id IN (SELECT stage_id FROM fp_snapshot)")
    con.execute("INSERT INTO fp_edge SELECT * FROM fp_edges WHERE dst IN (SELECT id FROM fp_stage WHERE edges <> '')")
    con.execute("INSERT INTO fp_output SELECT * FROM fp_outputs WHERE stage_id IN (SELECT id FROM fp_stage WHERE outputs <> '')")
    for view in ("edges", "outputs", "fp_edges", "fp_outputs"):
        con.execute(f"DROP VIEW {view}")
    con.execute("DROP INDEX IF EXISTS fp_stage_run")
    con.execute("ALTER TABLE fp_stage DROP COLUMN edges")
    con.execute("ALTER TABLE fp_stage DROP COLUMN outputs")
    con.execute("DROP VIEW context")
    con.execute("DROP VIEW fp_entries")
    con.execute("DROP TABLE fp_snapshot")
    for table in ("fp_stage", "fp_edge", "fp_entry", "fp_output"):  # schema 1 stores had these indexes
        con.execute(f"CREATE INDEX {table}_run ON {table} (run_id)")
    con.execute("UPDATE fp_meta SET value = '1' WHERE key = 'schema_version'")
    con.close()
    store = Store.open(path, read_only=True)  # migrated first
    assert store.load_run(run.id) == before
    assert store.query("SELECT count(*) FROM fp_snapshot")[0][0] == 1  # the odd one stays row by row
    assert store.query("SELECT count(DISTINCT stage_id) FROM fp_entry")[0][0] == 1
    assert store.query("SELECT count(*) FROM fp_edge")[0][0] == 0  # packed into their stages
    assert store.query("SELECT count(*) FROM fp_output")[0][0] == 0
    store.close()


# ------------------------------------------------------------------ bad files are refused, never changed


def _fingerprint(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


def _duckdb_file(path: Path, sql: str) -> None:
    con = duckdb.connect(str(path))
    con.execute(sql)
    con.close()


def _assert_refused(path: Path, error: type[Exception], match: str) -> None:
    before = _fingerprint(path)
    for read_only in (False, True):
        with pytest.raises(error, match=match) as info:
            Store.open(path, read_only=read_only)
        assert str(path) in str(info.value)
    assert _fingerprint(path) == before
    assert not Path(f"{path}.wal").exists()


def test_a_text_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.duckdb"
    path.write_text("these are my notes, not a database\n")
    _assert_refused(path, NotAStoreError, "not a footprint store")


def test_a_truncated_store_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    store, _ = _small_store(path)
    store.close()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    _assert_refused(path, StoreError, "footprint store|corrupt|DuckDB")


def test_a_corrupted_store_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    store, _ = _small_store(path)
    store.close()
    data = bytearray(path.read_bytes())
    data[4096:8192] = os.urandom(4096)  # the database headers
    path.write_bytes(bytes(data))
    _assert_refused(path, StoreError, "footprint store")


def test_a_duckdb_file_of_another_application_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "shop.duckdb"
    _duckdb_file(path, "CREATE TABLE orders (id INTEGER, total DOUBLE); INSERT INTO orders VALUES (1, 9.5)")
    _assert_refused(path, NotAStoreError, "not a footprint store.*orders")


def test_a_foreign_fp_meta_table_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.duckdb"
    _duckdb_file(path, "CREATE TABLE fp_meta (key VARCHAR, value VARCHAR); INSERT INTO fp_meta VALUES ('x', 'y')")
    _assert_refused(path, NotAStoreError, "not written by footprint")


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    store, _ = _small_store(path)
    store.close()
    _duckdb_file(path, f"UPDATE fp_meta SET value = '{SCHEMA_VERSION + 1}' WHERE key = 'schema_version'")
    _assert_refused(path, NewerSchemaError, "newer than this footprint")


def test_an_empty_duckdb_file_is_not_read_as_a_store(tmp_path: Path) -> None:
    path = tmp_path / "empty.duckdb"
    _duckdb_file(path, "SELECT 1")
    with pytest.raises(NotAStoreError, match="empty DuckDB"):
        Store.open(path, read_only=True)


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NotAStoreError, match="directory"):
        Store.open(tmp_path)


def test_a_store_on_a_read_only_file_system_is_not_called_unreadable(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening for writing on a read-only mount (EROFS: even root cannot write) says so, for an existing
    store and for a new one; it used to say the file 'is not a footprint store'."""
    existing = tmp_path / "fp.duckdb"
    Store.open(existing).close()
    real_connect = duckdb.connect

    def read_only_mount(path: str, read_only: bool = False, config: object = None) -> duckdb.DuckDBPyConnection:
        if not read_only:
            raise duckdb.IOException(f'IO Error: Cannot open file "{path}": Read-only file system')
        return real_connect(path, read_only=True)

    monkeypatch.setattr("tracer._lock.duckdb.connect", read_only_mount)
    for path in (existing, tmp_path / "new.duckdb"):
        with pytest.raises(StoreError) as caught:
            Store.open(path)
        assert "read-only file system" in str(caught.value) and "not a footprint store" not in str(caught.value)
    with Store.open(existing, read_only=True) as reader:  # reading it still works
        assert reader.list_runs() == []


def test_a_missing_file_is_not_created_for_reading(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no footprint store"):
        Store.open(tmp_path / "missing.duckdb", read_only=True)
    assert not (tmp_path / "missing.duckdb").exists()


def test_a_store_held_by_another_process_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    store, _ = _small_store(path)
    store.close()
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from tracer import Store
            store = Store.open({str(path)!r})
            print("open", flush=True)
            sys.stdin.readline()
            store.close()
        """)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        before = _fingerprint(path)
        for read_only in (False, True):
            with pytest.raises(StoreLockedError, match="another process") as info:
                Store.open(path, read_only=read_only)
            assert str(path) in str(info.value)
        assert _fingerprint(path) == before
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=30)
    assert holder.returncode == 0
    Store.open(path, read_only=True).close()  # readable again once the writer is gone


def test_load_runs_reads_several_runs_at_once(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.duckdb")
    recorder = Recorder(store)
    ids = []
    for n in range(3):
        run = recorder.start_run(agent="a", input=f"q{n}")
        with run.stage("inference") as stage:
            stage.inputs([ContextItem(Item.of_text("user", f"q{n}"), Origin("user"))])
            stage.output(Item.of_text("assistant", f"a{n}"))
        run.end("answered")
        ids.append(run.id)
    store.flush()
    together = store.load_runs(ids[:2])
    assert list(together) == ids[:2]
    for run_id, data in together.items():
        alone = store.load_run(run_id)
        assert (data.run, data.stages, data.inputs, data.outputs, data.items) == (
            alone.run, alone.stages, alone.inputs, alone.outputs, alone.items)
    with pytest.raises(NotFoundError, match="no run r-missing"):
        store.load_runs([ids[0], "r-missing"])
    store.close()


def test_memory_limit_is_applied_and_checked(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.duckdb", memory_limit="96MB") as store:
        (limit,) = store.query("SELECT current_setting('memory_limit')")[0]
        assert str(limit).startswith(("91", "96", "100"))  # DuckDB reports it in MiB
    with pytest.raises(StoreError, match="not a size"):
        Store.open(tmp_path / "s.duckdb", memory_limit="lots; DROP TABLE fp_run")
    Store.open(tmp_path / "s.duckdb", read_only=True).close()  # the refused open changed nothing


def test_the_run_indexes_of_an_older_store_are_dropped_when_it_is_opened_for_writing(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    store, ids = _small_store(path)
    store.close()
    _duckdb_file(path, "CREATE INDEX fp_stage_run ON fp_stage (run_id); CREATE INDEX fp_snapshot_run ON fp_snapshot (run_id)")

    def indexes() -> set[str]:
        con = duckdb.connect(str(path), read_only=True)
        names = {r[0] for r in con.execute("SELECT index_name FROM duckdb_indexes()").fetchall()}
        con.close()
        return names

    Store.open(path, read_only=True).close()  # reading never changes the file
    assert {"fp_stage_run", "fp_snapshot_run"} <= indexes()
    with Store.open(path) as writable:
        assert writable.load_run(ids[0]).run.id == ids[0]
    assert not {"fp_stage_run", "fp_snapshot_run"} & indexes()


def test_a_new_store_file_is_written_in_a_storage_version_older_duckdb_reads(tmp_path: Path) -> None:
    import duckdb

    from tracer._lock import STORAGE_VERSION

    Store.open(tmp_path / "new.duckdb").close()
    con = duckdb.connect(str(tmp_path / "new.duckdb"), read_only=True)
    try:
        [(tags,)] = con.execute("SELECT tags FROM duckdb_databases() WHERE database_name = 'new'").fetchall()
    finally:
        con.close()
    assert tags["storage_version"] == f"{STORAGE_VERSION}+" and STORAGE_VERSION.startswith("v1.")


def test_a_read_only_store_writes_for_a_moment_and_lets_other_readers_in_again(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    with Store.open(path) as store:
        Recorder(store).start_run(agent="a", input="first").end("answered", output="one")
    reader = Store.open(path, read_only=True)
    try:
        with reader.writing() as writable:
            assert not writable.read_only
            Recorder(writable).start_run(agent="a", input="second").end("answered", output="two")
            writable.flush()
            assert reader.count_runs() == 2  # reads go through the writable connection meanwhile
        assert reader.read_only and reader.count_runs() == 2
        other = subprocess.run(
            [sys.executable, "-c", f"from tracer import Store; print(Store.open({str(path)!r}, read_only=True).count_runs())"],
            capture_output=True, text=True, timeout=60)
        assert other.stdout.strip() == "2", other.stderr
    finally:
        reader.close()


@pytest.mark.parametrize("existed", [False, True], ids=["new file", "existing file"])
def test_a_file_open_for_writing_in_this_process_is_not_opened_again_saying_so(tmp_path: Path, existed: bool) -> None:
    path = tmp_path / "s.duckdb"
    if existed:
        Store.open(path).close()
    writer = Store.open(path)
    try:
        for read_only in (False, True):  # (a new file: DuckDB's "different configuration"; an existing
            # one: a second writer thread on the same database)
            with pytest.raises(StoreError, match=r"s\.duckdb is already open for writing in this process: use "
                                                 r"that Store .* or close it first") as again:
                Store.open(path, read_only=read_only)
            assert not isinstance(again.value, NotAStoreError | StoreLockedError), "the file is fine; no process waits"
    finally:
        writer.close()
    reader = Store.open(path, read_only=True)
    try:
        Store.open(path, read_only=True).close()  # readers share the file
        with pytest.raises(StoreError, match="open read-only in this process, so it cannot be opened for writing"):
            Store.open(path)
    finally:
        reader.close()
    Store.open(path).close()  # once closed, it opens as before


def test_a_locked_store_names_the_process_holding_it_and_what_to_do(tmp_path: Path) -> None:
    from tracer._lock import locked_message

    duckdb_says = ('IO Error: Could not set lock on file "s.duckdb": Conflicting lock is held in '
                   f"/usr/bin/python3.11 (PID {os.getpid()}). See also https://duckdb.org/docs")
    said = locked_message("s.duckdb", duckdb_says, read_only=True)
    assert f"process {os.getpid()}" in said and "cannot read s.duckdb" in said
    host = "footprint serve --port 9123 --db s.duckdb"
    assert "footprint explore --host http://127.0.0.1:9123" in _advice_for(host, read_only=True)
    assert "close it (q)" in _advice_for("footprint explore --db s.duckdb", read_only=False)
    assert "another process" in locked_message("s.duckdb", "Could not set lock on file", read_only=False)


def _advice_for(command: str, *, read_only: bool) -> str:
    from tracer._lock import _advice

    return _advice(command, read_only=read_only)


def test_the_lock_message_never_shows_the_holders_secrets(tmp_path: Path) -> None:
    """A host started with --token (or a DSN with a password) holds the file: the error shown to
    whoever runs another command names the process but masks its secrets."""
    from tracer._lock import connect
    from tracer.errors import StoreLockedError

    path = str(tmp_path / "held.duckdb")
    script = tmp_path / "fp"
    script.write_text("import duckdb, os, time\nc = duckdb.connect(os.environ['HELD'])\n"
                      "print('held', flush=True)\ntime.sleep(60)\n")
    holder = subprocess.Popen(
        [sys.executable, str(script), "serve", "--port", "0", "--token", "s3cret-token",
         "--api-key=k3y-value", "--sessions", "postgresql://user:pa55word@h/t"],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "HELD": path})
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(StoreLockedError) as caught:
            connect(path, read_only=True, wait=0.2)
        said = str(caught.value)
        assert f"process {holder.pid}" in said
        for secret in ("s3cret-token", "k3y-value", "pa55word"):
            assert secret not in said
        assert "--token [REDACTED]" in said and "user:[REDACTED]@" in said
        assert "--token TOKEN" in said and "the port it printed" in said
    finally:
        holder.kill()
        holder.wait()


def test_search_finds_the_text_itself_any_case_never_a_like_pattern() -> None:
    """A run matches ``search`` when its input, output or id holds the text, in any case; % and _ are characters."""
    with Store.open(":memory:") as store:
        recorder = Recorder(store)
        examples = iter(range(10**6))

        @settings(max_examples=60, deadline=None)
        @given(st.lists(st.text(alphabet="xy%_\\'Ü ü", max_size=6), min_size=1, max_size=6),
               st.text(alphabet="xy%_\\'Üü", min_size=1, max_size=3))
        def check(inputs: list[str], needle: str) -> None:
            agent = f"agent-{next(examples)}"  # one store; each example's runs apart by agent
            for text in inputs:
                recorder.start_run(agent=agent, input=text).end("answered", output="done")
            store.flush()
            where = RunFilter(agent=agent, search=needle)
            found = sorted(r.input or "" for r in store.list_runs(where, limit=100))
            assert found == sorted(t for t in inputs if needle.lower() in t.lower())
            assert store.count_runs(where) == len(found)

        check()

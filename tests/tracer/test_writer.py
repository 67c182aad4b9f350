"""The writer: the packed column encoding, its fallbacks, batching, failures and backpressure."""

from __future__ import annotations

import functools
import threading
from pathlib import Path

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracer import Store, StoreError
from tracer._writer import CHUNK, Bundle, select_rows


def _roundtrip(columns: list[tuple[str, str]], rows: list[tuple[object, ...]]) -> list[tuple[object, ...]]:
    con = duckdb.connect()
    select, params = select_rows(columns, rows)
    return con.execute(select, params).fetchall()


@pytest.mark.parametrize("count", [1, 5, 199, 200, CHUNK, CHUNK + 1, 3 * CHUNK + 7])
def test_select_rows_returns_the_rows(count: int) -> None:
    columns = [("s", "VARCHAR"), ("i", "BIGINT"), ("f", "DOUBLE"), ("b", "BOOLEAN"), ("l", "VARCHAR[]")]
    rows = [
        (None if n % 7 == 0 else f"v{n}" if n % 5 else "", n * 10**9, n / 3 if n % 4 else None, n % 2 == 0,
         [] if n % 3 == 0 else [f"a{n}", "b"])
        for n in range(count)
    ]
    assert _roundtrip(columns, rows) == rows


@pytest.mark.parametrize("odd", ["\x1e", "\x1c", "\x1d", "a\x1db", "x\x1fy", "\x00", "", "ünï ✓"])
def test_values_holding_separators_fall_back_intact(odd: str) -> None:
    columns = [("s", "VARCHAR"), ("l", "VARCHAR[]")]
    rows = [(f"{odd}{n}" if n % 2 else odd, [odd or "x", "y"]) for n in range(300)]
    rows.append((None, []))
    assert _roundtrip(columns, rows) == rows


def test_a_failed_batch_is_reported_on_the_next_submit_and_flush(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.duckdb")
    bad = Bundle()
    bad.add("fp_stage", ("s1", "r1", "not a number", "tool", "t", "ok", 1.0, 2.0, None, None, None))
    store.submit(bad)
    with pytest.raises(StoreError, match=r"writing to .* failed"):
        store.flush()
    with pytest.raises(StoreError, match="failed earlier"):
        store.submit(Bundle())
    store.close()


def test_a_full_queue_blocks_the_producer(tmp_path: Path) -> None:
    """Backpressure: with the writer stuck, submit() waits instead of queueing without bound."""
    from tracer._writer import Writer

    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    release = threading.Event()
    writer = Writer(con, "w", max_queue=2, max_batch=1, linger=0)
    original = writer._write

    def slow_write(bundles: list[Bundle]) -> None:
        release.wait(10)
        original(bundles)

    writer._write = slow_write  # type: ignore[method-assign]
    submitted = []

    def produce() -> None:
        for n in range(6):
            writer.submit(Bundle())
            submitted.append(n)

    producer = threading.Thread(target=produce)
    producer.start()
    producer.join(0.5)
    assert producer.is_alive() and len(submitted) <= 4  # one in the writer's hands, two queued, one waiting
    release.set()
    producer.join(10)
    assert submitted == list(range(6))
    writer.close()
    con.close()


def test_stats_count_batches_and_rows(tmp_path: Path) -> None:
    from tracer import Item, Recorder

    store = Store.open(tmp_path / "s.duckdb")
    run = Recorder(store).start_run(agent="a", input="x")
    for _ in range(3):
        with run.stage("tool") as stage:
            stage.output(Item.of_text("text", "same"))
    run.end("answered")
    store.flush()
    stats = store.writer_stats
    assert stats["fp_stage"] == 3 and stats["fp_item"] == 1 and stats["batches"] >= 1
    assert "fp_output" not in stats  # outputs travel packed in their stage's row
    assert store.query("SELECT count(*) FROM outputs")[0][0] == 3
    store.close()


def test_edges_and_outputs_holding_separators_go_row_by_row(tmp_path: Path) -> None:
    """Edges and outputs travel packed in their stage's row unless a value holds a separator."""
    from tracer import Item, Recorder

    store = Store.open(tmp_path / "s.duckdb")
    run = Recorder(store).start_run(agent="a", input="x")
    with run.stage("input") as first:
        plain = first.output(Item.of_text("user", "hello"))
    odd_item = Item("text", {"text": "odd"}, hash="h\x1fh")  # a caller-made hash with a separator in it
    with run.stage("tool", after=[first, "s-elsewhere\x1bodd"], edge="next") as second:
        second.inputs([plain])
        second.output(plain.item)
        second.output(odd_item)
    run.end("answered")
    store.flush()
    data = store.load_run(run.id)
    assert [(e.src, e.dst, e.kind) for e in data.edges] == [
        (first.id, second.id, "next"), ("s-elsewhere\x1bodd", second.id, "next")]
    assert data.outputs == {first.id: [plain.item.hash], second.id: [plain.item.hash, "h\x1fh"]}
    assert store.query("SELECT count(*) FROM fp_edge")[0][0] == 2 and store.query("SELECT count(*) FROM fp_output")[0][0] == 2
    assert store.query("SELECT count(*) FROM edges")[0][0] == 2 and store.query("SELECT count(*) FROM outputs")[0][0] == 3
    store.close()


def test_a_batchs_worth_is_written_without_waiting_out_the_linger(tmp_path: Path) -> None:
    """Big batches cost DuckDB far less, so the writer lingers; a full batch's worth goes at once."""
    import time

    from tracer._writer import Writer

    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    con.execute("CREATE TABLE fp_edge (run_id VARCHAR, src VARCHAR, dst VARCHAR, kind VARCHAR)")
    writer = Writer(con, "w", batch=8, linger=60)
    for n in range(7):
        bundle = Bundle()
        bundle.add("fp_edge", ("r", f"s{n}", f"s{n + 1}", "next"))
        writer.submit(bundle)
    time.sleep(0.3)
    assert writer.stats["batches"] == 0  # fewer than a batch: lingering
    bundle = Bundle()
    bundle.add("fp_edge", ("r", "s7", "s8", "next"))
    writer.submit(bundle)
    deadline = time.monotonic() + 20
    while writer.stats["batches"] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert writer.stats["batches"] == 1 and writer.stats["fp_edge"] == 8
    writer.close()
    assert con.execute("SELECT count(*) FROM fp_edge").fetchall() == [(8,)]


_RUN_IDS = st.sampled_from(["r1", "r2", "r3"])
_MAYBE_TEXT = st.none() | st.text("abcé ", max_size=5)
# a run's end as the recorder sends it, or a continuation (status back to running, the rest NULL)
_END = st.tuples(
    _RUN_IDS, st.sampled_from(["answered", "failed", "running"]), _MAYBE_TEXT, _MAYBE_TEXT,
    st.none() | st.floats(1.0, 2.0), st.none() | st.integers(0, 9), st.none() | st.integers(0, 9),
    st.none() | st.floats(0.0, 1.0), _MAYBE_TEXT, st.none() | st.sampled_from(['{"a":1}', '{"b":2}']),
)


@settings(max_examples=30, deadline=None)
@given(script=st.lists(st.tuples(st.booleans(), _END), max_size=8), split=st.integers(0, 8))
def test_ends_in_the_batch_of_their_run_write_what_updates_would(
    script: list[tuple[bool, tuple[object, ...]]], split: int
) -> None:
    """A run's ends in the batch of its start are folded into the inserted row, and several ends of
    one run in a batch into one UPDATE: the table holds what one bundle per batch (an INSERT, then
    an UPDATE per end) writes, whatever the order and the split."""
    from tracer._writer import Writer

    bundles: list[Bundle] = []
    started: set[str] = set()
    for start_first, end in script:
        if start_first and end[0] not in started:
            started.add(end[0])
            start = Bundle()
            start.add("fp_run", (end[0], None, "a", "running", "in", None, None, 0.5, None, 0, 0, 0.0, None, None,
                                 None, ["x"], '{"s":0}', None, None))
            bundles.append(start)
        if end[0] in started:
            bundle = Bundle()
            bundle.run_ends.append(end)
            bundles.append(bundle)
    tables = []
    for con, batches in zip(_stores(), ([bundles], [[b] for b in bundles], [bundles[:split], bundles[split:]]), strict=True):
        con.execute("DELETE FROM fp_run")
        writer = Writer(con, "w", linger=0)
        for batch in batches:
            if batch:
                writer._write(batch)
        writer.close()
        tables.append(con.execute("SELECT * FROM fp_run ORDER BY id").fetchall())
    assert tables[0] == tables[1] == tables[2]


@functools.cache
def _stores() -> tuple[duckdb.DuckDBPyConnection, ...]:
    """Three in-memory stores for the batching property (made once: a schema costs a second)."""
    cons = tuple(duckdb.connect() for _ in range(3))
    for con in cons:
        Store._prepare(con, "w", read_only=False)
    return cons


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(allow_nan=False),
            st.integers(min_value=-(2**63), max_value=2**63 - 1),
            st.one_of(st.none(), st.floats(allow_nan=False)),
            st.one_of(st.none(), st.integers(min_value=-(2**31), max_value=2**31 - 1)),
        ),
        min_size=200,
        max_size=260,
    )
)
def test_number_columns_keep_every_value_exactly(rows: list[tuple[object, ...]]) -> None:
    """Columns of numbers only go as lists, those with NULLs as packed text: both give back each value."""
    columns = [("f", "DOUBLE"), ("i", "BIGINT"), ("fn", "DOUBLE"), ("n", "INTEGER")]
    assert _roundtrip(columns, rows) == rows

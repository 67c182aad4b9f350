"""Checkpoints and cache trims (tracer._upkeep): the cache shrinks after a checkpoint, and no
interleaving of recorder writes, other connections' commits, reads and trims fails a checkpoint."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracer import Store, _upkeep
from tracer._upkeep import SharedLock
from tracer._writer import Bundle


def _items(rng: random.Random, start: int, count: int, size: int) -> Bundle:
    bundle = Bundle()
    for n in range(start, start + count):
        text = "".join(rng.choices("abcdefghijklmnopqrstuvwxyz ", k=size))
        bundle.add("fp_item", (f"h{n:012d}", "user", text, None))
    return bundle


def _cached(store: Store) -> int:
    """Bytes of table blocks DuckDB keeps cached."""
    rows = store.query("SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory() "
                       "WHERE tag IN ('BASE_TABLE', 'IN_MEMORY_TABLE', 'OVERFLOW_STRINGS')")
    return int(rows[0][0])


def test_the_exclusive_side_waits_for_the_shared_and_goes_before_later_shared() -> None:
    lock = SharedLock()
    order: list[str] = []
    held = threading.Event()
    release = threading.Event()

    def reader(name: str) -> None:
        with lock.shared():
            order.append(f"{name} in")
            held.set()
            release.wait(5)
        order.append(f"{name} out")

    def writer() -> None:
        with lock.exclusive():
            order.append("exclusive")

    first = threading.Thread(target=reader, args=("first",))
    first.start()
    held.wait(5)
    excl = threading.Thread(target=writer)
    excl.start()
    while not lock._waiting:  # the exclusive side is asked for
        time.sleep(0.001)
    held.clear()
    late = threading.Thread(target=reader, args=("late",))
    late.start()
    time.sleep(0.05)
    assert order == ["first in"]  # the exclusive side waits for the first; the late one waits behind it
    release.set()
    for t in (first, excl, late):
        t.join(5)
    assert order == ["first in", "first out", "exclusive", "late in", "late out"]


# a thread's steps: hold the shared side (once, or nested twice) or the exclusive side (waiting
# for ever, or at most a few ms), for a few ms
_STEPS = st.lists(st.tuples(st.sampled_from(["shared", "nested", "exclusive", "try"]),
                            st.floats(0, 0.002)), min_size=1, max_size=8)


@settings(max_examples=40, deadline=None)
@given(st.lists(_STEPS, min_size=2, max_size=5))
def test_the_exclusive_side_never_overlaps_another_holder(threads: list[list[tuple[str, float]]]) -> None:
    lock = SharedLock()
    state = {"shared": 0, "exclusive": 0}
    seen: list[str] = []
    guard = threading.Lock()

    def enter(side: str) -> None:
        with guard:
            state[side] += 1
            if state["exclusive"] > 1 or (state["exclusive"] and state["shared"]):
                seen.append(f"{side} overlapped: {state}")

    def leave(side: str) -> None:
        with guard:
            state[side] -= 1

    def run(steps: list[tuple[str, float]]) -> None:
        for kind, pause in steps:
            if kind in ("shared", "nested"):
                with lock.shared():
                    enter("shared")
                    if kind == "nested":
                        with lock.shared():  # re-entrant, even with an exclusive waiter
                            time.sleep(pause)
                    time.sleep(pause)
                    leave("shared")
            else:
                with lock.exclusive(0.003 if kind == "try" else None) as held:
                    if held:
                        enter("exclusive")
                        time.sleep(pause)
                        leave("exclusive")

    workers = [threading.Thread(target=run, args=(steps,)) for steps in threads]
    for t in workers:
        t.start()
    for t in workers:
        t.join(30)
    assert not any(t.is_alive() for t in workers)  # nobody left waiting
    assert seen == []
    assert lock._shared == 0 and not lock._exclusive and not lock._waiting


def test_a_checkpoint_is_followed_by_a_trim_that_empties_the_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_upkeep, "CHECKPOINT_AT", 4 * 2**20)
    rng = random.Random(7)
    with Store.open(tmp_path / "s.duckdb") as store:
        assert store.query("SELECT current_setting('checkpoint_threshold')")[0][0] != "16.0 MiB"
        for n in range(40):  # ~40 MB of text
            store.submit(_items(rng, n * 500, 500, 2000))
            store.flush()
        stats = store.writer_stats
        assert stats["checkpoints"] >= 5 and stats["trims"] == stats["checkpoints"], stats
        # what the last trim left (8 MB) and what was written since (at most 4 MB of log)
        assert _cached(store) < 20 * 2**20
        assert store.query("SELECT count(*) FROM fp_item")[0][0] == 20_000
        (limit,) = store.query("SELECT current_setting('memory_limit')")[0]
        assert limit.startswith(("488", "512"))  # restored after each trim


def test_no_interleaving_of_commits_checkpoints_reads_and_trims_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorder's writer, two other connections committing through Store.committing (as the
    session store and the agents repository do) and a reader, at random sizes and pauses, with a
    checkpoint every 256 KB of log and a trim to 4 MB after each: nothing fails, all is there.
    (The store's own cap stays the default: under 64 MB a checkpoint alone can fail fatally.)"""
    monkeypatch.setattr(_upkeep, "CHECKPOINT_AT", 256 * 2**10)
    monkeypatch.setattr(_upkeep, "TRIM_TO", "4MB")
    path = tmp_path / "s.duckdb"
    store = Store.open(path)
    store.query("CREATE TABLE side (who INTEGER, n INTEGER, body VARCHAR)")
    errors: list[BaseException] = []
    stop = threading.Event()
    rounds = 150

    def guarded(fn: object) -> object:
        def run(*args: object) -> None:
            try:
                fn(*args)  # type: ignore[operator]
            except BaseException as exc:
                errors.append(exc)
                stop.set()
        return run

    @guarded
    def record(seed: int) -> None:
        rng = random.Random(seed)
        for n in range(rounds):
            store.submit(_items(rng, n * 100, rng.randint(1, 100), rng.randint(100, 4000)))
            if rng.random() < 0.3:
                store.flush()
            if stop.is_set():
                return

    @guarded
    def commit(who: int) -> None:
        rng = random.Random(who)
        cur = store.cursor()
        try:
            for n in range(rounds):
                rows = rng.randint(1, 300)
                with store.committing():
                    cur.execute("BEGIN TRANSACTION")
                    cur.execute("INSERT INTO side SELECT ?, ?, repeat(chr(97 + (range % 26)::INTEGER), ?) "
                                "FROM range(?)", [who, n, rng.randint(100, 3000), rows])
                    cur.execute("COMMIT")
                sizes[who] += rows
                time.sleep(rng.random() * 0.003)
                if stop.is_set():
                    return
        finally:
            cur.close()

    @guarded
    def read() -> None:
        while not stop.is_set():
            store.query("SELECT count(*), sum(strlen(body)) FROM side")
            store.query("SELECT count(*) FROM fp_item WHERE text LIKE '%zzz%'")

    sizes = {1: 0, 2: 0}
    workers = [threading.Thread(target=record, args=(11,)), threading.Thread(target=commit, args=(1,)),
               threading.Thread(target=commit, args=(2,))]
    reader = threading.Thread(target=read)
    for t in (*workers, reader):
        t.start()
    for t in workers:
        t.join(300)
    stop.set()
    reader.join(60)
    store.flush()
    stats = store.writer_stats
    assert errors == [], errors[:3]
    assert store.write_failure is None
    assert stats["checkpoints"] >= 10 and stats["trims"] >= 10, stats
    for who, rows in sizes.items():
        assert store.query("SELECT count(*) FROM side WHERE who = ?", [who])[0][0] == rows
    items = store.query("SELECT count(*) FROM fp_item")[0][0]
    store.close()
    with Store.open(path, read_only=True) as again:  # the file is whole
        assert again.query("SELECT count(*) FROM fp_item")[0][0] == items
        assert again.query("SELECT count(*) FROM side")[0][0] == sum(sizes.values())


def test_a_read_only_store_held_for_writing_commits_under_its_writers_lock(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """store.writing() (the explorer's re-runs and sandbox) takes over a fresh writer: commits made
    through store.committing() meanwhile share its lock and checkpoint and trim as its own do."""
    monkeypatch.setattr(_upkeep, "CHECKPOINT_AT", 256 * 2**10)
    path = tmp_path / "s.duckdb"
    Store.open(path).close()
    store = Store.open(path, read_only=True)
    try:
        with store.writing():
            cur = store.cursor()
            with store.committing():
                cur.execute("CREATE TABLE side AS SELECT range AS n, repeat('x', 500) AS body FROM range(3000)")
            cur.close()
            stats = store.writer_stats
            assert stats["checkpoints"] == 1 and stats["trims"] == 1
            # what they took is counted too (bench/soak.py reports it by tenth)
            assert stats["checkpoint_ms"] >= 0 and stats["trim_ms"] >= 0
    finally:
        store.close()

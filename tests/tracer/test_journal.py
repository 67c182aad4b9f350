"""The sync journal: records round-trip, a torn or reused file reads back as what was synced, a
crashed store is completed when opened, and concurrent syncs share one fdatasync."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracer._journal as journal_module
from tracer import Item, Recorder, Store
from tracer._journal import (
    Journal,
    decode_bundle,
    encode_bundle,
    journal_files,
    journal_path,
    read_journal,
    read_records,
    segment_paths,
)
from tracer._writer import Bundle, StageRows

ROOT = Path(__file__).resolve().parents[2]

_values = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats() | st.text(max_size=40)
_row = st.tuples(_values, _values, _values, st.lists(st.text(max_size=5), max_size=3))
_rows = st.lists(_row, max_size=4)
_tables = st.dictionaries(st.sampled_from(["fp_run", "fp_edge", "fp_output", "fp_entry"]), _rows.filter(bool), max_size=3)


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN included (a journaled NaN must come back as NaN)."""
    return repr(a) == repr(b)


@settings(max_examples=150, deadline=None)
@given(_row, st.none() | _row, st.none() | _rows, st.none() | _tables)
def test_stage_rows_come_back_as_they_went_in(stage: Any, snapshot: Any, items: Any, other: Any) -> None:
    rows = StageRows()
    rows.stage, rows.snapshot, rows.items, rows.other = stage, snapshot, items, other
    back = decode_bundle(encode_bundle(rows))
    assert isinstance(back, StageRows)
    assert _same((back.stage, back.snapshot, back.items, back.other), (stage, snapshot, items, other))
    assert type(back.stage) is tuple and all(type(r) is tuple for r in back.items or ())


@settings(max_examples=100, deadline=None)
@given(_tables, _rows)
def test_bundles_come_back_as_they_went_in(tables: dict[str, list[Any]], run_ends: list[Any]) -> None:
    bundle = Bundle({t: list(rs) for t, rs in tables.items()})
    bundle.run_ends = list(run_ends)
    back = decode_bundle(encode_bundle(bundle))
    assert isinstance(back, Bundle)
    assert _same((back.rows, back.run_ends), (bundle.rows, bundle.run_ends))


# ------------------------------------------------------------------ the file


@settings(max_examples=150, deadline=None)
@given(
    ops=st.lists(st.tuples(st.sampled_from(["append", "sync", "apply"]), st.integers(1, 400)), min_size=10, max_size=80),
    cut=st.integers(0, 10_000),
)
def test_what_was_synced_and_not_applied_is_always_read_back(ops: list[tuple[str, int]], cut: int) -> None:
    """Random appends, syncs and applies (of any prefix of what was synced) over two small reused
    segments, then a crash that leaves an arbitrary torn tail where the next sync would have
    written: every synced record not yet applied is read back, once, and nothing unsynced is."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "j")
        old = journal_module.REUSE_AFTER
        journal_module.REUSE_AFTER = 512  # switch segments often
        try:
            j = Journal(path, last=0)
            synced = applied = 0
            for op, size in ops:
                if op == "append":
                    with j.lock:
                        j.append(os.urandom(size))
                elif op == "sync" and j._appended > synced:
                    j.sync(j._appended)
                    synced = j._appended
                elif op == "apply" and synced > applied:
                    applied = min(synced, applied + 1 + size % 3)  # the writer lags by any amount
                    j.mark_applied(applied)
            # a crash mid-write: unsynced records may be partly on disk; garbage past the end too
            with j.lock:
                n = j.append(b"never synced")
            segment, offset = j._next_write()
            tail = b"\x07" * (cut % 97)
            torn = b"".join(j._buffer)[: cut % (40 + 4 * len(j._buffer[0]))] + tail
            Path(segment_paths(path)[segment]).touch()  # (created if it is not yet)
            with open(segment_paths(path)[segment], "r+b") as f:
                f.seek(offset)
                f.write(torn)
            j.close(remove=False)
            got = [number for number, _ in read_journal(path, applied)]
        finally:
            journal_module.REUSE_AFTER = old
        assert got[: synced - applied] == list(range(applied + 1, synced + 1))
        unsynced = got[synced - applied:]  # what a torn write left whole: a prefix of the unsynced records
        assert unsynced == list(range(synced + 1, n + 1))[: len(unsynced)]
        assert n not in got or len(torn) >= len(b"never synced") + 16


def test_under_a_steady_load_the_journal_stays_small(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stages keep closing while the writer lags behind by a batch: the journal never has a moment
    when everything in it is applied, yet its files stay within two segments (one file written over
    only at such a moment grew to 99 MB in the soak)."""
    monkeypatch.setattr(journal_module, "REUSE_AFTER", 64 << 10)
    monkeypatch.setattr(journal_module, "_GROW", 16 << 10)
    store = Store.open(tmp_path / "s.duckdb")
    store._writer._linger = 0.02  # type: ignore[union-attr]  # batches of many stages: always behind
    run = Recorder(store, durability="sync").start_run(agent="a", input="job")
    biggest = 0
    for n in range(2500):  # ~3.5 MB through the journal
        with run.stage("tool", f"step {n}") as stage:
            stage.output(Item.of_text("text", f"output {n} " + "x" * 1200))
        if n % 50 == 0:
            biggest = max(biggest, sum(os.path.getsize(p) for p in journal_files(str(store.path))))
    run.end("answered")
    assert store._journal is not None and store._journal._last_in[1] > 0  # both segments were written
    store.close()
    assert biggest <= 1 << 20  # under a third of what went through; bounded by how far the writer lags
    with Store.open(tmp_path / "s.duckdb") as again:
        assert again.query("SELECT count(*) FROM stages")[0][0] == 2500


def test_concurrent_syncs_share_one_fdatasync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(journal_module.os, "fdatasync", lambda fd: (calls.append(fd), real(fd)))
    j = Journal(str(tmp_path / "j"), last=0)
    numbers = []
    for _ in range(8):
        with j.lock:
            numbers.append(j.append(b"x" * 100))
    # eight stages closed meanwhile by other threads wait for their own numbers: one sync covers them
    threads = [threading.Thread(target=j.sync, args=(n,)) for n in numbers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [calls[0]]
    assert [n for n, _ in read_records(j.path)] == numbers
    j.close(remove=True)
    assert not os.path.exists(j.path)


# ------------------------------------------------------------------ the store


def _record_sync_until_killed(path: Path, *, commit: bool) -> tuple[list[str], str]:
    """A child records stages under sync, printing each id once its close returned, until killed.
    ``commit=False``: its writer never commits, so the journal alone keeps the stages."""
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        from tracer import Item, Recorder, Store
        store = Store.open({str(path)!r})
        if not {commit}:
            store._writer._linger = 3600  # the first bundle wakes it, then it lingers: nothing commits
        run = Recorder(store, durability="sync").start_run(agent="a", input="job")
        print(run.id, flush=True)
        n = 0
        while True:
            with run.stage("tool", f"step {{n}}") as stage:
                stage.output(Item.of_text("text", f"output {{n}}"))
            print(stage.id, flush=True)
            n += 1
    """)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert child.stdout is not None
    run_id = child.stdout.readline().strip()
    closed = [child.stdout.readline().strip() for _ in range(40)]
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    closed += [line.strip() for line in child.stdout if line.strip()]
    return closed, run_id


@pytest.mark.parametrize("commit", [False, True])
def test_a_killed_sync_recording_is_completed_when_the_store_is_opened(tmp_path: Path, commit: bool) -> None:
    path = tmp_path / "s.duckdb"
    closed, run_id = _record_sync_until_killed(path, commit=commit)
    assert os.path.exists(journal_path(str(path)))
    with Store.open(path, read_only=True) as store:  # a reader's open completes it first
        data = store.load_run(run_id)
    stored = {s.id: s for s in data.stages}
    assert set(closed) <= set(stored)
    for stage_id in closed:
        assert data.items[data.outputs[stage_id][0]].text == f"output {stored[stage_id].name.split()[1]}"
    assert not os.path.exists(journal_path(str(path)))
    with Store.open(path) as store:  # opened again: nothing is applied twice
        assert store.query("SELECT count(*) FROM stages")[0][0] == len(stored)


def test_a_clean_close_leaves_no_journal_and_the_store_reopens_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    store = Store.open(path)
    run = Recorder(store, durability="sync").start_run(agent="a", input="job")
    for n in range(30):
        with run.stage("tool", f"step {n}") as stage:
            stage.output(Item.of_text("text", f"output {n}"))
    run.end("answered", output="done")
    assert os.path.exists(journal_path(str(path)))
    store.close()
    assert not os.path.exists(journal_path(str(path)))
    with Store.open(path) as again:
        assert again.get_run(run.id).output == "done"
        assert again.query("SELECT count(*) FROM stages")[0][0] == 30
        assert again.query("SELECT value FROM fp_meta WHERE key = 'journal_applied'")[0][0] == "32"  # start, 30 stages, end


def test_a_journal_beside_a_new_store_is_not_applied_to_it(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    _record_sync_until_killed(path, commit=False)
    path.unlink()  # the store file is gone; its journal is left
    with Store.open(path) as store:
        assert store.query("SELECT count(*) FROM stages")[0][0] == 0
    assert not os.path.exists(journal_path(str(path)))


def test_a_deferred_run_settles_before_its_next_stage_and_at_its_end(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.duckdb")
    recorder = Recorder(store, durability="sync")
    run = recorder.start_run(agent="a", input="job", deferred_sync=True)
    first = run.stage("input")
    first.close()
    assert run._unsettled  # closed, not yet synced
    second = run.stage("inference", after=[first])  # opening the next one synced the first
    assert not run._unsettled
    assert store._journal is not None and store._journal._synced >= store._journal._appended
    second.close()
    run.end("answered")
    assert store._journal._synced == store._journal._appended
    store.close()


def test_reads_see_sync_stages_at_once_and_still_work_after_the_writer_failed(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.duckdb")
    store._writer._linger = 3600  # type: ignore[union-attr]  # nothing commits unless a read asks
    run = Recorder(store, durability="sync").start_run(agent="a", input="job")
    with run.stage("tool", "step") as stage:
        stage.output(Item.of_text("text", "output"))
    assert store.query("SELECT count(*) FROM stages")[0][0] == 1  # the read waited for the commit
    writer = store._writer
    assert writer is not None
    writer._failure = RuntimeError("disk gone")  # as a failed batch leaves it
    with pytest.raises(Exception, match="failed earlier"):
        with run.stage("tool", "next") as stage:
            stage.output(Item.of_text("text", "lost"))
    assert store.query("SELECT count(*) FROM stages")[0][0] == 1  # reads still answer
    writer._failure = None
    store.close()


_KILLED_LOADER = """
import sys, threading
import tracer._journal as journal
from tracer import Item, Recorder, Store
journal.REUSE_AFTER, journal._GROW = 8 << 10, 8 << 10  # segments switch every few stages
store = Store.open(sys.argv[1])
store._writer._linger = 0.005  # the writer lags by a batch, as under load
recorder, life, out = Recorder(store, durability="sync"), sys.argv[2], threading.Lock()

def record(thread):
    run = recorder.start_run(agent="a", input="job")
    n = 0
    while True:
        name = f"{life}-{thread}-{n}"
        with run.stage("tool", name) as stage:
            stage.output(Item.of_text("text", "output " + name + " " + "x" * (n % 7 * 150)))
        with out:  # acknowledged: its close returned
            print(name, flush=True)
        n += 1

for t in range(3):
    threading.Thread(target=record, args=(t,), daemon=True).start()
threading.Event().wait()
"""


def test_sigkill_at_random_points_of_a_steady_load_loses_and_doubles_no_synced_stage(tmp_path: Path) -> None:
    """Three threads record under sync into small segments until SIGKILL, at a random moment, again
    and again on one store: each life first completes the store from the journal the last one left,
    every stage a close acknowledged is stored exactly once. (How far the journal grows depends on how
    far the writer lags, which a loaded machine stretches at random: its bound is tested with a
    writer made to lag, in test_under_a_steady_load_the_journal_stays_small.)"""
    import random
    import time

    path = tmp_path / "s.duckdb"
    rng = random.Random(int.from_bytes(os.urandom(4), "little"))
    acknowledged: list[str] = []
    for life in range(14):
        child = subprocess.Popen(
            [sys.executable, "-c", _KILLED_LOADER, str(path), str(life)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        )
        assert child.stdout is not None
        first = child.stdout.readline().strip()
        assert first, child.stderr.read() if child.stderr else ""
        time.sleep(rng.uniform(0, 0.3))
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        acknowledged += [first] + [line.strip() for line in child.stdout if line.strip()]
        child.stdout.close()
        if child.stderr:
            child.stderr.close()
    with Store.open(path, read_only=True) as store:
        names = [r[0] for r in store.query("SELECT name FROM stages")]
        texts = {r[0] for r in store.query("SELECT text FROM fp_item WHERE text LIKE 'output %'")}
    assert len(names) == len(set(names)), "a stage was stored twice"
    missing = set(acknowledged) - set(names)
    assert not missing, f"acknowledged stages lost: {sorted(missing)[:5]}"
    assert {t.split()[1] for t in texts} >= set(acknowledged)
    assert len(acknowledged) > 14 * 3

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
from tracer._journal import Journal, decode_bundle, encode_bundle, journal_path, read_records
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


@settings(max_examples=60, deadline=None)
@given(
    ops=st.lists(st.tuples(st.sampled_from(["append", "sync", "apply"]), st.integers(1, 400)), max_size=60),
    cut=st.integers(0, 10_000),
)
def test_what_was_synced_and_not_applied_is_always_read_back(ops: list[tuple[str, int]], cut: int) -> None:
    """Random appends, syncs and applies over a small reused file, then a crash that leaves an
    arbitrary torn tail past the last sync: every synced record not yet applied is read back."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "j")
        old = journal_module.REUSE_AFTER
        journal_module.REUSE_AFTER = 2048  # reuse the file's start often
        try:
            j = Journal(path, last=0)
            payloads: dict[int, bytes] = {}
            synced = applied = 0
            for op, size in ops:
                if op == "append":
                    with j.lock:
                        n = j.append(os.urandom(size))
                    payloads[n] = b""
                elif op == "sync" and payloads:
                    j.sync(max(payloads))
                    synced = max(payloads)
                elif op == "apply" and synced:
                    applied = synced
                    j.mark_applied(applied)
            # a crash mid-write: unsynced records may be partly on disk; garbage past the end too
            with j.lock:
                n = j.append(b"never synced")
            tail = b"\x07" * (cut % 97)
            with open(path, "r+b") as f:
                f.seek(j._synced_offset)
                f.write(j._buffer[0][: cut % 40] + tail)
            j.close(remove=False)
            got = {number for number, _ in read_records(path)}
        finally:
            journal_module.REUSE_AFTER = old
        assert set(range(applied + 1, synced + 1)) <= got
        assert n not in got or cut % 40 >= len(b"never synced") + 16


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

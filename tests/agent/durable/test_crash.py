"""The crash test: a durable session SIGKILLed at 30 random points, restarted with start() each time.

After the last restart runs to idle: no queued message lost or doubled, only durable tools ran
again, every call has exactly one result, nothing is left owed. Children are forked from a
forkserver that imported the session once, so thirty restarts cost milliseconds, not imports.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import random
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.agent.durable import crashkit
from tests.hosting.hostkit import postgres_dsn

KILLS = 30


def crash_and_recover(kind: str, store: str, log: Path, seed: int) -> list[float]:
    mp = multiprocessing.get_context("forkserver")
    mp.set_forkserver_preload(["tests.agent.durable.crashkit"])
    rng = random.Random(seed)
    kill_points = []
    for _ in range(KILLS):
        child = mp.Process(target=crashkit.child, args=(kind, store, str(log)))
        child.start()
        delay = rng.uniform(0.02, 0.35)
        child.join(delay)
        if child.is_alive():
            child.kill()  # SIGKILL
            kill_points.append(delay)
        child.join()
    last = mp.Process(target=crashkit.child, args=(kind, store, str(log)))
    last.start()
    last.join(120)
    assert last.exitcode == 0, f"the final run exited {last.exitcode}"
    return kill_points


@pytest.fixture(params=["duckdb", "postgresql"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    if request.param == "duckdb":
        yield "duckdb", str(tmp_path / "sessions.duckdb")
        return
    dsn = postgres_dsn()
    if dsn is None:
        pytest.skip("no PostgreSQL server on 127.0.0.1:5432 (CI starts one)")
    schema = f"fp_crash_{uuid.uuid4().hex[:10]}"
    yield "postgresql", f"{dsn}|{schema}"
    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_thirty_sigkills_lose_and_double_nothing(tmp_path: Path, where: tuple[str, str]) -> None:
    kind, store = where
    log = tmp_path / "log"
    started = time.perf_counter()
    killed = crash_and_recover(kind, store, log, seed=13)
    assert len(killed) >= KILLS // 2, "most children must be killed mid-work for the test to mean anything"
    records, values = asyncio.run(crashkit.stored(kind, store))
    got = crashkit.summary(records)
    planned = [text for _, text in crashkit.PLAN]
    assert sorted(got["users"]) == sorted(planned), "a message was lost or doubled"
    assert [k for k, _ in values if k != "settings"] == [], "something is still queued or owed"
    call_ids = [c["id"] for c in got["calls"]]
    result_ids = [r["call_id"] for r in got["results"]]
    assert sorted(result_ids) == sorted(call_ids), "a call has no result, or more than one"
    assert len(set(call_ids)) == len(call_ids)
    runs = crashkit.exec_counts(log)
    again = {cid for cid, n in runs.items() if n > 1}
    assert all(cid.startswith("r-") for cid in again), f"a non-durable tool ran again: {again}"
    by_id = {r["call_id"]: r for r in got["results"]}
    for cid in call_ids:  # a non-durable call that ran and was cut off is an error result, never run twice
        if cid.startswith("c-") and by_id[cid]["is_error"]:
            assert "not marked durable" in by_id[cid]["content"] or "cancelled" in by_id[cid]["content"]
    assert time.perf_counter() - started < 120

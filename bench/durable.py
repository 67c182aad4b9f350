"""Durable sessions: queue round trips, bytes appended per turn, and start() on a long session.

For each storage (in memory, DuckDB, and PostgreSQL when the server at 127.0.0.1:5432 answers):

    queue writes/s    ``send()`` calls per second (each returns once its message is durable)
    round trips/s     message queued -> answered turn, one after another (FunctionModel, no tools)
    bytes/turn        JSON bytes appended per turn at conversation lengths 10, 100 and 1,000 turns
    start()           a fresh DurableAgent's start() + wait_for_idle() on a session of 10,000 records

Targets: bytes per turn independent of conversation length; start() at 10,000 records < 200 ms.

With ``--host N``: a DurableHost serving N sessions (a message each, then a second message to the
first session, which was let go), on DuckDB, once keeping at most 1,000 idle sessions loaded and
once keeping all of them, each in its own process: the resident memory after, the sessions left
loaded, and how long the first session's next turn took (let go under the limit: loaded again
from the storage first).

    .venv/bin/python bench/durable.py [--turns 300] [--records 10000] [--only memory,duckdb,postgres]
    .venv/bin/python bench/durable.py --host 5000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.durable import (
    AgentProviders,
    DurableAgent,
    InMemoryPersistence,
    PersistenceContext,
    SessionPersistence,
    SessionRecord,
)
from agent.durable._journal import record_of
from agent.providers import FunctionModel
from tracer import ContextItem, Item, ItemKind, Origin, OriginKind


def storages(tmp: Path, schemas: list[tuple[str, str]]) -> dict[str, Callable[[], SessionPersistence]]:
    """The storages to measure; each call makes a fresh one (a new file, a new PostgreSQL schema)."""
    from hosting.sessions import DuckDBPersistence, PostgresPersistence
    from tests.hosting.hostkit import postgres_dsn

    found: dict[str, Callable[[], SessionPersistence]] = {
        "memory": InMemoryPersistence,
        "duckdb": lambda: DuckDBPersistence(path=str(tmp / f"{uuid.uuid4().hex}.duckdb")),
    }
    dsn = postgres_dsn()
    if dsn is None:
        print("(no PostgreSQL server on 127.0.0.1:5432: skipped)")
    else:
        def postgres() -> SessionPersistence:
            schema = f"fp_bench_{uuid.uuid4().hex[:10]}"
            schemas.append((dsn, schema))
            return PostgresPersistence(dsn, schema=schema)

        found["postgres"] = postgres
    return found


def drop_schemas(schemas: list[tuple[str, str]]) -> None:
    import psycopg

    for dsn, schema in schemas:
        with psycopg.connect(dsn, autocommit=True) as con:
            con.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def agent_on(persistence: SessionPersistence, session_id: str) -> DurableAgent:
    providers = AgentProviders().add("m", FunctionModel(lambda r: "the same short answer", keep_requests=0), "test")
    return DurableAgent(session_id, providers=providers, provider="m", persistence=persistence)


async def queue_writes(persistence: SessionPersistence, n: int) -> float:
    agent = agent_on(persistence, f"w-{uuid.uuid4().hex[:6]}")
    agent._kick = lambda: None  # type: ignore[method-assign]  # measure the durable write alone
    started = time.perf_counter()
    for i in range(n):
        await agent.send(f"message {i}")
    return n / (time.perf_counter() - started)


async def round_trips(persistence: SessionPersistence, n: int) -> tuple[float, list[int]]:
    agent = agent_on(persistence, f"r-{uuid.uuid4().hex[:6]}")
    ctx = PersistenceContext(agent.id)
    sizes: list[int] = []
    seen = 0
    started = time.perf_counter()
    for i in range(n):
        await agent.send("the same question, asked again")
        await agent.wait_for_idle()
        if i + 1 in (10, 100, 1000) or i == n - 1:
            stored = await persistence.load(ctx)
            sizes.append(sum(len(json.dumps(r.body)) for r in stored[seen:]))
        seen = len(agent.history)
        del i
    elapsed = time.perf_counter() - started
    return n / elapsed, sizes


async def bytes_per_turn(make: Callable[[], SessionPersistence], lengths: list[int]) -> dict[int, int]:
    persistence = make()
    agent = agent_on(persistence, f"b-{uuid.uuid4().hex[:6]}")
    ctx = PersistenceContext(agent.id)
    out: dict[int, int] = {}
    for turn in range(1, max(lengths) + 1):
        before = len(await persistence.load(ctx)) if turn in lengths else 0
        await agent.send("the same question, asked again")
        await agent.wait_for_idle()
        if turn in lengths:
            new = (await persistence.load(ctx))[before:]
            out[turn] = sum(len(r.kind) + len(json.dumps(r.body)) for r in new)
    return out


async def long_session(persistence: SessionPersistence, records: int) -> tuple[str, float]:
    session_id = f"l-{uuid.uuid4().hex[:6]}"
    ctx = PersistenceContext(session_id)
    origin = Origin(OriginKind.STAGE, "r-bench", "s-bench")
    built: list[SessionRecord] = []
    for i in range(records // 2):
        built.append(record_of(ContextItem(Item.of_text(ItemKind.USER, f"question {i} " + "x" * 80),
                                           Origin(OriginKind.USER, "r-bench", "s-in", "send@bench"))))
        built.append(record_of(ContextItem(Item.of_text(ItemKind.ASSISTANT, f"answer {i} " + "y" * 200), origin)))

    async def fill(tx: PersistenceContext) -> None:
        for record in built:
            await persistence.append(tx, record)

    for start in range(0, len(built), 2000):
        chunk = built[start:start + 2000]

        async def fill_chunk(tx: PersistenceContext, chunk: list[SessionRecord] = chunk) -> None:
            for record in chunk:
                await persistence.append(tx, record)

        await persistence.transaction(ctx, fill_chunk)
    del fill
    best = float("inf")
    for _ in range(3):
        agent = agent_on(persistence, session_id)
        started = time.perf_counter()
        agent.start()
        await agent.wait_for_idle()
        best = min(best, time.perf_counter() - started)
        assert len(agent.history) == records, (len(agent.history), records)
    return session_id, best * 1000


async def many_sessions(count: int, max_loaded: int, path: str) -> dict[str, float]:
    """A host serving ``count`` sessions of one message each, then the first one again."""
    from agent.durable import InferenceSettings
    from hosting import DurableHost
    from hosting.sessions import DuckDBPersistence

    def make(session_id: str, persistence: SessionPersistence) -> DurableAgent:
        return agent_on(persistence, session_id)

    durable = DurableHost(make, DuckDBPersistence(path=path), max_loaded=max_loaded)
    began = time.perf_counter()
    for n in range(count):
        await durable.queue(f"chat-{n}", "send", f"hello {n}", InferenceSettings())
        await durable.sessions[f"chat-{n}"].wait_for_idle()
        if n % 1000 == 999:
            print(f"  ... {n + 1:,} sessions", file=sys.stderr, flush=True)
    await asyncio.gather(*list(durable._tasks))
    per_session = (time.perf_counter() - began) / count
    loaded = len(durable.sessions)
    again = time.perf_counter()
    await durable.queue("chat-0", "send", "and again", InferenceSettings())
    await durable.sessions["chat-0"].wait_for_idle()
    again_ms = (time.perf_counter() - again) * 1000
    assert len(durable.sessions["chat-0"].history) == 4
    with open("/proc/self/status") as status:
        rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))
    await durable.close()
    return {"per_session_ms": per_session * 1000, "loaded": loaded, "again_ms": again_ms, "rss_mb": rss / 1024}


def host_sessions(count: int) -> None:
    print(f"{'kept loaded':<12} {'sessions':>9} {'ms/session':>11} {'loaded':>7} {'RSS MB':>7} "
          f"{'first session next turn':>24}")
    for max_loaded in (1000, 10**9):
        with tempfile.TemporaryDirectory() as tmp:
            code = (f"import asyncio, json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
                    f"import durable as d; print(json.dumps(asyncio.run(d.many_sessions({count}, {max_loaded}, "
                    f"{str(Path(tmp) / 'd.duckdb')!r}))))")
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                  cwd=Path(__file__).resolve().parent.parent)
            figures = json.loads(done.stdout.strip().splitlines()[-1])
        kept = "1,000" if max_loaded == 1000 else "all"
        print(f"{kept:<12} {count:>9,} {figures['per_session_ms']:>11.2f} {figures['loaded']:>7,} "
              f"{figures['rss_mb']:>7.0f} {figures['again_ms']:>13.1f} ms ({'let go' if max_loaded == 1000 else 'kept'})",
              flush=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=300, help="round trips timed per storage")
    parser.add_argument("--records", type=int, default=10_000, help="records of the long session start() loads")
    parser.add_argument("--only", default="", help="comma-separated storages (memory,duckdb,postgres)")
    parser.add_argument("--host", type=int, default=0, metavar="N",
                        help="instead: a host serving N durable sessions, with and without the loaded limit")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    if args.host:
        host_sessions(args.host)
        print(f"Load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after.")
        return
    schemas: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        found = storages(Path(tmp), schemas)
        wanted = [s for s in args.only.split(",") if s] or list(found)
        print(f"{'storage':<10} {'writes/s':>9} {'trips/s':>8} {'bytes/turn @10 @100 @1000':>28} "
              f"{'start() ms':>10}")
        for name in wanted:
            make = found[name]
            writes = await queue_writes(make(), max(args.turns, 200))
            trips, _ = await round_trips(make(), args.turns)
            sizes = await bytes_per_turn(make, [10, 100, 1000])
            _, start_ms = await long_session(make(), args.records)
            flat = "flat" if max(sizes.values()) - min(sizes.values()) <= 4 else "GROWS"
            print(f"{name:<10} {writes:>9.0f} {trips:>8.0f} "
                  f"{sizes[10]:>8} {sizes[100]:>6} {sizes[1000]:>6} {flat:>5} {start_ms:>10.1f}", flush=True)
    drop_schemas(schemas)
    print(f"Targets: bytes per turn flat; start() at {args.records:,} records < 200 ms. "
          f"Load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after.")


if __name__ == "__main__":
    asyncio.run(main())

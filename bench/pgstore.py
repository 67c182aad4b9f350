"""The PostgreSQL session store alone under the soak's workload: what each statement costs per tenth.

    .venv/bin/python bench/pgstore.py                        # 8 sessions x 1,000 turns, sync
    .venv/bin/python bench/pgstore.py --turns 300 --profile  # and the top functions, first/last tenth

The host in this process (``standing_agent``, no HTTP, no recordings) runs the soak agent
(tests/hosting/soakkit.py, recording into a DuckDB file as ``footprint serve`` does) on a PostgreSQL session store in a schema of its own (dropped
afterwards); ``--sessions`` sessions send ``--turns`` turns each, all at once, as ``bench/soak.py``
does. Each psycopg statement is timed (from sent to its rows fetched, on the event loop) and
counted by its first words; per tenth of the turns it prints the main thread's CPU per turn,
statements per turn, and each statement's milliseconds (wall) per call. With ``--profile`` it
also prints the functions that spent the most CPU (``cProfile`` with the thread's CPU clock) in
the second and the last tenth (the first is the memory window filling). The table's dead rows and the server's buffer hits per turn come
from ``pg_stat_user_tables`` and ``pg_stat_database``. Figures are ratios within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import os
import pstats
import re
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

from hosting import PostgresSessions, standing_agent  # noqa: E402
from tests.hosting.hostkit import postgres_dsn  # noqa: E402
from tests.hosting.soakkit import message, soak_agent  # noqa: E402
from tracer import Durability, Recorder, Store  # noqa: E402

_WORDS = re.compile(r"\s+")


def _name(query: Any) -> str:
    text = query.as_string(None) if hasattr(query, "as_string") else str(query)
    words = _WORDS.sub(" ", text).split(" ")
    table = next((w for w in words if "fp_session" in w), "")
    table = table.rsplit("_", 1)[-1].strip('"')
    head = " ".join(words[:2]) if words[0] != "SET" else "SET"
    if "FOR UPDATE" in text:
        head += " .. FOR UPDATE"
    elif "ON CONFLICT DO NOTHING" in text:
        head += " .. DO NOTHING"
    elif "ON CONFLICT" in text:
        head += " .. DO UPDATE"
    return f"{head} {table}".strip()


class Timing:
    """Statement timings by tenth."""

    def __init__(self) -> None:
        self.tenth = 0
        self.calls: list[dict[str, list[float]]] = [defaultdict(list) for _ in range(10)]

    def install(self) -> None:
        original = psycopg.AsyncConnection.execute
        timing = self

        async def execute(con: Any, query: Any, params: Any = None, **kw: Any) -> Any:
            started = time.perf_counter()
            cur = await original(con, query, params, **kw)
            timing.calls[min(timing.tenth, 9)][_name(query)].append(time.perf_counter() - started)
            return cur

        psycopg.AsyncConnection.execute = execute  # type: ignore[method-assign,assignment]


def _server(dsn: str, schema: str) -> tuple[int, int, int]:
    with psycopg.connect(dsn, autocommit=True) as con:
        dead = con.execute("SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables WHERE schemaname = %s",
                           [schema]).fetchone()
        blocks = con.execute("SELECT blks_hit + blks_read, tup_returned FROM pg_stat_database "
                             "WHERE datname = current_database()").fetchone()
    assert dead is not None and blocks is not None
    return int(dead[0]), int(blocks[0]), int(blocks[1])


async def run(dsn: str, schema: str, sessions: int, turns: int, durability: str, profile: bool,
              recordings: Path | None) -> None:
    timing = Timing()
    timing.install()
    store = PostgresSessions(dsn, schema=schema)
    recorded = Store.open(str(recordings)) if recordings is not None else None
    recorder = Recorder(recorded, durability=Durability(durability)) if recorded is not None else None
    host = standing_agent(agent_factory=lambda: soak_agent(recorder), sessions=store, durability=durability,
                          max_active_sessions=16, recordings=recorded)
    texts = [[message(n, t) for t in range(turns)] for n in range(sessions)]  # (not on the clock)
    total = sessions * turns
    tenth = max(1, total // 10)
    done = 0
    cpu_marks = [time.thread_time()]
    wall_marks = [time.perf_counter()]
    server_marks = [_server(dsn, schema)]
    profiles: dict[int, cProfile.Profile] = {}
    prefix = f"pgstore-{uuid.uuid4().hex[:6]}-"

    def start_profile(t: int) -> None:
        if profile and t in (1, 9):
            profiles[t] = cProfile.Profile(time.thread_time)
            profiles[t].enable()

    start_profile(0)

    async def session(n: int) -> None:
        nonlocal done
        for t in range(turns):
            reply = await host.handle(texts[n][t], session_id=f"{prefix}{n}")
            if reply.status != "answered":
                raise RuntimeError(f"session {n} turn {t}: {reply.status}")
            done += 1
            if done % tenth == 0 and done <= total:
                if timing.tenth in profiles:
                    profiles[timing.tenth].disable()
                cpu_marks.append(time.thread_time())
                wall_marks.append(time.perf_counter())
                server_marks.append(await asyncio.to_thread(_server, dsn, schema))
                timing.tenth += 1
                start_profile(timing.tenth)

    await asyncio.gather(*(session(n) for n in range(sessions)))
    await host.close()
    await store.close()
    if recorded is not None:
        recorded.close()

    print(f"{sessions} sessions x {turns} turns, {durability}, {'recorded' if recorded else 'unrecorded'}, "
          f"load average {os.getloadavg()}")
    cpu = [(cpu_marks[i + 1] - cpu_marks[i]) * 1000 / tenth for i in range(len(cpu_marks) - 1)]
    rate = [tenth / (wall_marks[i + 1] - wall_marks[i]) for i in range(len(wall_marks) - 1)]
    dead = [s[0] for s in server_marks[1:]]
    blocks = [(server_marks[i + 1][1] - server_marks[i][1]) / tenth for i in range(len(server_marks) - 1)]
    print("main-thread CPU ms/turn by tenth:", " ".join(f"{x:.2f}" for x in cpu))
    print("turns/s by tenth:               ", " ".join(f"{x:.0f}" for x in rate))
    print("dead rows at each tenth:        ", " ".join(str(x) for x in dead))
    print("server blocks touched per turn: ", " ".join(f"{x:.0f}" for x in blocks))
    names = sorted({n for c in timing.calls for n in c})
    print(f"{'statement':38} {'calls/turn':>10}  ms per call by tenth (wall, on the loop)")
    for name in names:
        per_turn = len(timing.calls[0].get(name, [])) / tenth
        ms = " ".join(f"{1000 * sum(c[name]) / max(1, len(c[name])):.3f}" for c in timing.calls)
        print(f"{name:38} {per_turn:10.2f}  {ms}")
    for t, prof in profiles.items():
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(40)
        print(f"--- tenth {t + 1}: top functions by own CPU ---")
        print("\n".join(out.getvalue().splitlines()[6:49]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--durability", choices=("sync", "exit"), default="sync")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--unrecorded", action="store_true", help="the agent records nothing (as the soak does not)")
    args = parser.parse_args()
    dsn = postgres_dsn()
    if dsn is None:
        print("no PostgreSQL server on 127.0.0.1:5432")
        return 1
    schema = f"fp_pgstore_{uuid.uuid4().hex[:10]}"
    workdir = tempfile.TemporaryDirectory()
    recordings = None if args.unrecorded else Path(workdir.name) / "recordings.duckdb"
    try:
        asyncio.run(run(dsn, schema, args.sessions, args.turns, args.durability, args.profile, recordings))
    finally:
        workdir.cleanup()
        with psycopg.connect(dsn, autocommit=True) as con:
            con.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

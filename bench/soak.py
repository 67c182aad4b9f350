"""Soak: long sessions of big turns on the host, as a new user runs it (`footprint serve`).

    .venv/bin/python bench/soak.py                          # 8 sessions x 1,000 turns, each store
    .venv/bin/python bench/soak.py --sessions 4 --turns 300 # smaller, on a busy machine
    .venv/bin/python bench/soak.py --stores duckdb-sync     # one store only

For each store — DuckDB in the recordings file under ``--durability sync``, the same under
``exit``, then PostgreSQL (127.0.0.1:5432, a schema of its own, dropped afterwards) — it starts
`footprint serve` with the soak agent (tests/hosting/soakkit.py: a test model, a tool call in a
third of the turns, messages of 1-4 KB) and has ``--sessions`` clients each send ``--turns``
turns one after another, all sessions at once. It prints, per store:

* turns per second over the first and the last 10% of the turns (target: last >= 0.8 x first);
* the host's RSS at 10% of the turns and at the end (target: end <= 1.2 x at 10%);
* stored bytes per turn in the first and the last 10% of each session's turns, read back from
  the session records after the host stopped (target: flat, not growing with the session);
* failed requests (target: 0), and whether every answered turn was stored, once;
* the host's CPU milliseconds per turn over the first and the last 10%, and in each tenth of the
  turns, of all its threads and of its main thread (the event loop: the host's Python side of a
  turn): on a shared machine it moves with the load far less than turns per second do, and the
  tenths tell work that grows with the session from the memory window filling up (about the
  first 150 turns of a session);
* a turn's median milliseconds (sent to answered) in each tenth, and the CPU this process (the
  clients) spent per turn: a turn waits far longer than the host's CPU for it, and the clients
  share the machine's cores with the host;
* the store's checkpoints and cache trims in each tenth and their milliseconds, and the KB the
  host wrote to storage per turn in each tenth (``/proc/<pid>/io``: the write-ahead log, and what
  the checkpoints write into the file), which does not move with the machine's load at all;
* with ``--memory``, where the host's memory is at the end: DuckDB's (``duckdb_memory()`` by tag),
  the Python heap by package (tracemalloc, which slows the host: compare throughput without it)
  and what glibc's malloc holds free (see tests/hosting/soakkit.py ``memory_breakdown``).

Figures are ratios within one run (the machine may be shared); the load average is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx2 as httpx  # noqa: E402

from tests.hosting.hostkit import postgres_dsn  # noqa: E402
from tests.hosting.soakkit import MEMORY_ENV, PROBE_ENV, message  # noqa: E402

FOOTPRINT = Path(sys.executable).parent / "footprint"
STORES = ("duckdb-sync", "duckdb-exit", "postgresql")


@dataclass
class Outcome:
    """What one store's soak measured."""

    store: str
    turns: int = 0
    failed: list[str] = field(default_factory=list)
    done_at: list[float] = field(default_factory=list)  # when each answered turn came back
    rss_at_10: int = 0
    rss_end: int = 0
    # the host's CPU seconds at the start, at every tenth of the turns and at the end, of all its
    # threads and of its main thread (the event loop: the Python side of a turn): CPU per turn
    # moves with the machine's load much less than turns per second do
    cpu_marks: list[tuple[float, float]] = field(default_factory=list)
    # at the same marks, each thread's CPU seconds by native id, and the host's probe (its Python
    # threads' names, the recordings store's checkpoints and trims: tests/hosting/soakkit.py probe)
    thread_marks: list[dict[int, float]] = field(default_factory=list)
    probes: list[dict[str, Any]] = field(default_factory=list)
    # at the same marks, the bytes the host had written to storage (/proc/<pid>/io write_bytes):
    # the write-ahead log, and what each checkpoint writes into the file
    written_marks: list[int] = field(default_factory=list)
    # at the same marks, this process's CPU seconds (the clients': they share the machine's cores)
    client_marks: list[float] = field(default_factory=list)
    latency: list[float] = field(default_factory=list)  # each answered turn's seconds, in answer order
    # /proc/<pid>/smaps_rollup at 10% and at the end: anonymous and file-backed RSS
    smaps_at_10: dict[str, int] = field(default_factory=dict)
    smaps_end: dict[str, int] = field(default_factory=dict)
    journal_end: int = 0  # the sync journal's bytes at the end, the host still running
    bytes_first: float = 0.0
    bytes_last: float = 0.0
    stored_ok: bool = False
    stored_note: str = ""
    seconds: float = 0.0
    pid: int = 0
    # the host's memory_breakdown at 10% and at the end (--memory)
    memory_at_10: dict[str, Any] = field(default_factory=dict)
    memory: dict[str, Any] = field(default_factory=dict)


def _cpu(pid: int) -> tuple[float, float]:
    """The process's user + system CPU seconds (all its threads), and its main thread's."""
    return _cpu_of(f"/proc/{pid}/stat"), _cpu_of(f"/proc/{pid}/task/{pid}/stat")


def _cpu_of(path: str) -> float:
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _written(pid: int) -> int:
    """The bytes the process caused to be written to storage (0 where /proc does not say)."""
    try:
        with open(f"/proc/{pid}/io") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("write_bytes:")), 0)
    except OSError:
        return 0


def _threads_cpu(pid: int) -> dict[int, float]:
    """Each thread's user + system CPU seconds, by native thread id."""
    cpu = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            cpu[int(task)] = _cpu_of(f"/proc/{pid}/task/{task}/stat")
        except OSError:
            pass  # (ended meanwhile)
    return cpu


def _smaps(pid: int) -> dict[str, int]:
    """The process's RSS split (smaps_rollup): anonymous, file-backed, in bytes."""
    sizes = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[2] == "kB":
                sizes[parts[0].rstrip(":")] = int(parts[1]) * 1024
    return {"rss": sizes.get("Rss", 0), "anonymous": sizes.get("Anonymous", 0),
            "file": sizes.get("Rss", 0) - sizes.get("Anonymous", 0)}


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _start(db: Path, durability: str, sessions: str, schema: str, agent: str,
           memory: Path | None = None, probe: Path | None = None) -> tuple[subprocess.Popen[str], str]:
    """Start the host; its URL. Its stderr goes to ``<db>.log``, read from the start for the URL: a
    pipe nobody drains after the start would stall a host that logs a lot once the pipe is full."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if memory is not None:
        env[MEMORY_ENV] = str(memory)
    if probe is not None:
        env[PROBE_ENV] = str(probe)
    env.pop("OPENAI_API_KEY", None)
    log = Path(f"{db}.log")
    with open(log, "w") as stderr:
        proc = subprocess.Popen(
            [str(FOOTPRINT), "serve", "--db", str(db), "--port", "0", "--durability", durability,
             "--sessions", sessions, *(["--sessions-schema", schema] if schema else []),
             "--agent", agent, "--max-active-sessions", "16"],
            stderr=stderr, stdout=subprocess.DEVNULL, text=True, env=env, cwd=ROOT,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(r"http://127\.0\.0\.1:(\d+)", log.read_text(errors="replace"))
        if found:
            return proc, f"http://127.0.0.1:{found.group(1)}"
        if proc.poll() is not None:
            raise RuntimeError(f"footprint serve exited with {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("footprint serve did not start")


async def _drive(url: str, pid: int, sessions: int, turns: int, outcome: Outcome, prefix: str,
                 breakdown: Callable[[], dict[str, Any]] | None = None,
                 probe: Callable[[], dict[str, Any]] | None = None) -> None:
    total = sessions * turns
    tenth = max(1, total // 10)
    limits = httpx.Limits(max_connections=sessions + 2, max_keepalive_connections=sessions + 2)
    async def mark() -> None:
        outcome.cpu_marks.append(_cpu(pid))
        outcome.thread_marks.append(_threads_cpu(pid))
        outcome.written_marks.append(_written(pid))
        outcome.client_marks.append(time.process_time())
        if probe is not None:
            outcome.probes.append(await asyncio.to_thread(probe))

    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        async def session(n: int) -> None:
            for t in range(turns):
                sent = time.perf_counter()
                try:
                    reply = await client.post("/v1/turns", json={"message": message(n, t),
                                                                 "session_id": f"{prefix}{n}"})
                    body = reply.json()
                    if reply.status_code != 200 or body.get("status") != "answered":
                        outcome.failed.append(f"session {n} turn {t}: {reply.status_code} {reply.text[:200]}")
                        continue
                except (httpx.HTTPError, ValueError) as exc:
                    outcome.failed.append(f"session {n} turn {t}: {type(exc).__name__}: {exc}")
                    continue
                outcome.done_at.append(time.perf_counter())
                outcome.latency.append(outcome.done_at[-1] - sent)
                done = len(outcome.done_at) - 1  # (done_at starts with the clock's start)
                if done % tenth == 0 and done < total:  # at every tenth of the turns (the end follows)
                    await mark()
                    if done == tenth:
                        outcome.rss_at_10 = _rss(pid)
                        outcome.smaps_at_10 = _smaps(pid)
                        if breakdown is not None:
                            outcome.memory_at_10 = await asyncio.to_thread(breakdown)

        started = time.perf_counter()
        outcome.done_at.append(started)  # the clock's start (removed below)
        await mark()
        await asyncio.gather(*(session(n) for n in range(sessions)))
        outcome.seconds = time.perf_counter() - started
        outcome.rss_end = _rss(pid)
        outcome.smaps_end = _smaps(pid)
        if breakdown is not None:
            outcome.memory = breakdown()
        await mark()
        outcome.done_at.pop(0)
        outcome.turns = len(outcome.done_at)


def _records_duckdb(db: Path) -> list[tuple[str, int, str, int]]:
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        return [(r[0], int(r[1]), r[2], int(r[3])) for r in con.execute(
            "SELECT session_id, seq, kind, strlen(body) FROM fp_session_record ORDER BY session_id, seq").fetchall()]
    finally:
        con.close()


def _records_postgres(dsn: str, schema: str) -> list[tuple[str, int, str, int]]:
    import psycopg

    with psycopg.connect(dsn) as con:
        rows = con.execute(f"SELECT session_id, seq, kind, octet_length(body) FROM {schema}.fp_session_record "
                           f"ORDER BY session_id, seq").fetchall()
    return [(r[0], int(r[1]), r[2], int(r[3])) for r in rows]


def _per_turn_bytes(records: list[tuple[str, int, str, int]], sessions: int, turns: int,
                    prefix: str, outcome: Outcome) -> None:
    """Bytes each turn added to its session's records (a turn starts at its user message)."""
    by_session: dict[str, list[int]] = {}
    users: dict[str, int] = {}
    for sid, _, kind, size in records:
        turns_of = by_session.setdefault(sid, [])
        if kind == "user" or not turns_of:
            turns_of.append(0)
            users[sid] = users.get(sid, 0) + (kind == "user")
        turns_of[-1] += size
    tenth = max(1, turns // 10)
    first = [b for t in by_session.values() for b in t[:tenth]]
    last = [b for t in by_session.values() for b in t[-tenth:]]
    outcome.bytes_first = sum(first) / max(1, len(first))
    outcome.bytes_last = sum(last) / max(1, len(last))
    expected = {f"{prefix}{n}" for n in range(sessions)}
    answered = outcome.turns
    stored = sum(users.get(s, 0) for s in expected)
    outcome.stored_ok = stored == answered and set(by_session) == expected
    outcome.stored_note = f"{stored} user messages stored for {answered} answered turns"


def _memory_breakdown(proc: subprocess.Popen[str], path: Path) -> dict[str, Any]:
    """Ask the host (SIGUSR1) where its memory is, and wait for its answer."""
    return _ask(proc, path, signal.SIGUSR1)


def _ask(proc: subprocess.Popen[str], path: Path, signum: int) -> dict[str, Any]:
    """Signal the host and wait for what it writes to ``path`` (tests/hosting/soakkit.py)."""
    path.unlink(missing_ok=True)
    proc.send_signal(signum)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if path.exists():
            try:
                return dict(json.loads(path.read_text()))
            except ValueError:
                pass  # still being written
        time.sleep(0.2)
    return {}


async def soak(store: str, sessions: int, turns: int, workdir: Path, *, recorded: bool = True,
               memory: bool = False) -> Outcome:
    """Run the soak against one store; its figures."""
    outcome = Outcome(store)
    db = workdir / f"{store}.duckdb"
    prefix = f"soak-{uuid.uuid4().hex[:6]}-"
    schema = ""
    dsn = None
    if store == "postgresql":
        dsn = postgres_dsn()
        if dsn is None:
            outcome.stored_note = "skipped: no PostgreSQL server on 127.0.0.1:5432"
            return outcome
        schema = f"fp_soak_{uuid.uuid4().hex[:10]}"
        sessions_spec = dsn
    else:
        sessions_spec = "duckdb"
    durability = "exit" if store == "duckdb-exit" else "sync"
    agent = "tests.hosting.soakkit:" + ("soak_agent" if recorded else "soak_agent_unrecorded")
    breakdown = workdir / f"{store}.memory.json" if memory else None
    probe = workdir / f"{store}.probe.json"
    proc, url = _start(db, durability, sessions_spec, schema, agent, breakdown, probe)
    outcome.pid = proc.pid
    try:
        ask = None if breakdown is None else lambda: _memory_breakdown(proc, breakdown)
        await _drive(url, proc.pid, sessions, turns, outcome, prefix, ask,
                     lambda: _ask(proc, probe, signal.SIGUSR2))
        outcome.journal_end = sum(p.stat().st_size for p in workdir.glob(f"{db.name}.journal*"))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
    if dsn is not None:
        records = _records_postgres(dsn, schema)
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as con:
            con.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    else:
        records = _records_duckdb(db)
    _per_turn_bytes(records, sessions, turns, prefix, outcome)
    return outcome


def _rate(times: list[float], part: slice) -> float:
    window = sorted(times)[part]
    if len(window) < 2:
        return 0.0
    return (len(window) - 1) / max(1e-9, window[-1] - window[0])


def _median_by_tenth(values: list[float]) -> list[float]:
    """The median of each tenth of ``values``, in milliseconds."""
    size = max(1, len(values) // 10)
    parts = [sorted(values[i * size:(i + 1) * size]) for i in range(10)]
    return [round(1000 * part[len(part) // 2], 1) for part in parts if part]


def report(o: Outcome) -> dict[str, Any]:
    """One store's line of figures, and whether each target was met."""
    n = len(o.done_at)
    tenth = max(2, n // 10)
    first, last = _rate(o.done_at, slice(0, tenth)), _rate(o.done_at, slice(n - tenth, n))
    # the host's CPU ms per turn in each tenth of the turns, all threads and the main thread
    pairs = list(itertools.pairwise(o.cpu_marks)) if n else []
    cpu = [round(1000 * (b[0] - a[0]) / max(1, n // 10), 2) for a, b in pairs]
    main = [round(1000 * (b[1] - a[1]) / max(1, n // 10), 2) for a, b in pairs]
    cpu_first, cpu_last = (cpu[0], cpu[-1]) if len(cpu) == 10 else (None, None)
    main_first, main_last = (main[0], main[-1]) if len(main) == 10 else (None, None)
    return {
        "store": o.store, "answered": o.turns, "failed": len(o.failed), "seconds": round(o.seconds, 1),
        "turns_per_s_first_10pct": round(first, 1), "turns_per_s_last_10pct": round(last, 1),
        "throughput_ratio": round(last / first, 2) if first else None,
        "host_cpu_ms_per_turn_first_10pct": cpu_first, "host_cpu_ms_per_turn_last_10pct": cpu_last,
        "main_thread_cpu_ms_per_turn_first_10pct": main_first, "main_thread_cpu_ms_per_turn_last_10pct": main_last,
        "host_cpu_ms_per_turn_by_tenth": cpu, "main_thread_cpu_ms_per_turn_by_tenth": main,
        "rss_mb_at_10pct": round(o.rss_at_10 / 2**20, 1), "rss_mb_end": round(o.rss_end / 2**20, 1),
        "rss_ratio": round(o.rss_end / o.rss_at_10, 2) if o.rss_at_10 else None,
        "journal_mb_end": round(o.journal_end / 2**20, 1),
        "stored_bytes_per_turn_first_10pct": round(o.bytes_first), "stored_bytes_per_turn_last_10pct": round(o.bytes_last),
        "bytes_ratio": round(o.bytes_last / o.bytes_first, 2) if o.bytes_first else None,
        "every_answered_turn_stored_once": o.stored_ok, "stored": o.stored_note,
        "first_failures": o.failed[:3],
        "cpu_ms_per_turn_by_thread_by_tenth": _by_thread(o, o.pid, n // 10),
        "upkeep_by_tenth": _upkeep_by_tenth(o),
        "client_cpu_ms_per_turn_by_tenth": [round(1000 * (b - a) / max(1, n // 10), 2)
                                            for a, b in itertools.pairwise(o.client_marks)],
        "median_turn_ms_by_tenth": _median_by_tenth(o.latency),
        "written_kb_per_turn_by_tenth": [round((b - a) / 1024 / max(1, n // 10), 1)
                                         for a, b in itertools.pairwise(o.written_marks)],
        "smaps_mb_at_10pct": {k: round(v / 2**20, 1) for k, v in o.smaps_at_10.items()},
        "smaps_mb_end": {k: round(v / 2**20, 1) for k, v in o.smaps_end.items()},
        **({"memory_mb_at_10pct": _memory_mb(o.memory_at_10)} if o.memory_at_10 else {}),
        **({"memory_mb_end": _memory_mb(o.memory)} if o.memory else {}),
    }


def _thread_group(tid: int, pid: int, names: dict[str, str]) -> str:
    """A thread's group: the main thread, a Python thread's name without its number (a pool's
    threads together), or "other" (DuckDB's own threads, and any other library's)."""
    if tid == pid:
        return "main"
    name = names.get(str(tid))
    if name is None:
        return "other (DuckDB)"
    return re.sub(r"[_-]?\d+$", "", re.sub(r" \(.*\)$", "", name)) or name


def _by_thread(o: Outcome, pid: int, turns_per_tenth: int) -> dict[str, list[float]]:
    """CPU ms per turn in each tenth, by thread group."""
    names: dict[str, str] = {}
    for p in o.probes:
        names.update(p.get("threads", {}))
    groups: dict[str, list[float]] = {}
    for i, (a, b) in enumerate(itertools.pairwise(o.thread_marks)):
        for tid, cpu in b.items():
            group = _thread_group(tid, pid, names)
            row = groups.setdefault(group, [0.0] * (len(o.thread_marks) - 1))
            row[i] += 1000 * (cpu - a.get(tid, 0.0)) / max(1, turns_per_tenth)
    return {g: [round(x, 2) for x in row] for g, row in sorted(groups.items())}


def _upkeep_by_tenth(o: Outcome) -> dict[str, list[int]]:
    """Checkpoints and trims in each tenth, and the milliseconds they took."""
    stats = [p.get("stats", {}) for p in o.probes]
    keys = ("checkpoints", "checkpoint_ms", "trims", "trim_ms")
    return {k: [int(b.get(k, 0)) - int(a.get(k, 0)) for a, b in itertools.pairwise(stats)] for k in keys
            if any(k in s for s in stats)}


def _memory_mb(m: dict[str, Any]) -> dict[str, Any]:
    """The host's memory breakdown in MB: RSS, DuckDB's by tag, the Python heap by package, malloc's free."""
    mb = lambda n: round(n / 2**20, 1)  # noqa: E731
    duckdb, heap = m.get("duckdb", {}), m.get("python_heap", {})
    free = m.get("malloc_free")
    rest = m["rss"] - sum(duckdb.values()) - sum(heap.values()) - (free or 0)
    return {"rss": mb(m["rss"]), "duckdb": mb(sum(duckdb.values())), "duckdb_by_tag": {k: mb(v) for k, v in duckdb.items()},
            "python_heap": mb(sum(heap.values())), "python_heap_by_package": {k: mb(v) for k, v in heap.items()},
            "malloc_free": None if free is None else mb(free), "rest": mb(rest)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=8, help="sessions at once (default 8)")
    parser.add_argument("--turns", type=int, default=1000, help="turns per session (default 1000)")
    parser.add_argument("--stores", default=",".join(STORES), help=f"comma-separated, of {', '.join(STORES)}")
    parser.add_argument("--unrecorded", action="store_true",
                        help="the agent records no runs (what the session store costs without the recorder)")
    parser.add_argument("--memory", action="store_true",
                        help="print where the host's memory is at the end (traces the Python heap: slower)")
    parser.add_argument("--json", action="store_true", help="print JSON only")
    args = parser.parse_args()
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    unknown = set(stores) - set(STORES)
    if unknown:
        parser.error(f"unknown store(s) {', '.join(sorted(unknown))}; choose from {', '.join(STORES)}")
    load_before = os.getloadavg()
    results = []
    with tempfile.TemporaryDirectory(prefix="footprint-soak-") as tmp:
        for store in stores:
            outcome = asyncio.run(soak(store, args.sessions, args.turns, Path(tmp), recorded=not args.unrecorded,
                                     memory=args.memory))
            results.append(report(outcome))
            if not args.json:
                r = results[-1]
                print(f"{store}: {r['answered']} answered, {r['failed']} failed in {r['seconds']} s; "
                      f"turns/s first 10% {r['turns_per_s_first_10pct']}, last 10% {r['turns_per_s_last_10pct']} "
                      f"(ratio {r['throughput_ratio']}, target >= 0.8); host CPU ms/turn first 10% "
                      f"{r['host_cpu_ms_per_turn_first_10pct']}, last 10% {r['host_cpu_ms_per_turn_last_10pct']} "
                      f"(its main thread {r['main_thread_cpu_ms_per_turn_first_10pct']} -> "
                      f"{r['main_thread_cpu_ms_per_turn_last_10pct']}; by tenth, all threads "
                      f"{r['host_cpu_ms_per_turn_by_tenth']}, the main thread {r['main_thread_cpu_ms_per_turn_by_tenth']}); "
                      f"RSS {r['rss_mb_at_10pct']} MB at 10%, "
                      f"{r['rss_mb_end']} MB at the end (ratio {r['rss_ratio']}, target <= 1.2); journal "
                      f"{r['journal_mb_end']} MB at the end; stored bytes/turn "
                      f"{r['stored_bytes_per_turn_first_10pct']} first 10%, {r['stored_bytes_per_turn_last_10pct']} "
                      f"last 10% (ratio {r['bytes_ratio']}, target flat); {r['stored']}", flush=True)
                print(f"  host CPU ms/turn by thread, by tenth: {r['cpu_ms_per_turn_by_thread_by_tenth']}", flush=True)
                print(f"  a turn's median ms, by tenth: {r['median_turn_ms_by_tenth']}; the clients' CPU ms/turn "
                      f"(this process), by tenth: {r['client_cpu_ms_per_turn_by_tenth']}", flush=True)
                print(f"  checkpoints and trims by tenth: {r['upkeep_by_tenth']}; KB written to storage per turn "
                      f"by tenth {r['written_kb_per_turn_by_tenth']}; smaps at 10% "
                      f"{r['smaps_mb_at_10pct']}, at the end {r['smaps_mb_end']} (MB)", flush=True)
                for when in ("at_10pct", "end"):
                    if f"memory_mb_{when}" in r:
                        print(f"  memory {when} (MB): {r[f'memory_mb_{when}']}", flush=True)
                for failure in r["first_failures"]:
                    print(f"  failed: {failure}", flush=True)
    summary = {"sessions": args.sessions, "turns": args.turns, "recorded": not args.unrecorded,
               "load_average_before": load_before,
               "load_average_after": os.getloadavg(), "results": results}
    print(json.dumps(summary, indent=None if not args.json else 2))
    return 0 if all(r["failed"] == 0 and r["every_answered_turn_stored_once"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())

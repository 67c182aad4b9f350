"""Benchmark of the standing-agent host over HTTP on loopback.

    .venv/bin/python bench/host.py

For each shape (``pooled``: an agent factory, one instance per session; ``shared``: one agent,
runs serialized globally) it starts a host in a subprocess — the `footprint serve` defaults:
sessions and recordings in one DuckDB file, ``exit`` durability, a FunctionModel agent — and
drives it from a separate load-generator process (keep-alive HTTP/1.1 connections over asyncio
streams, loopback only, a bounded number of requests; each phase opens its connections before its
clock starts):

1. ``bare``: 100 concurrent clients x 10 requests to a bare ASGI endpoint on the same server
   (no FastAPI, no agent): the ceiling of this server and this load generator;
2. ``turns``: 100 concurrent sessions x 10 turns each, closed loop (a session sends its next turn
   when the reply arrives): the host's capacity in requests/s, judged against the bare endpoint.
   Its latency is not a latency figure: with 100 requests always in flight, Little's law makes
   the mean latency 100 / (requests/s) whatever the host does — printed as "Little" beside it;
3. ``paced``: 100 more sessions x 10 turns offered at PACED_SHARE (half) of the capacity phase 2
   just measured, open loop: each session's turns are scheduled think = 100 / rate seconds
   apart on average (uniformly 0.5-1.5x, first ones spread over one think time) and a turn's
   latency counts from its scheduled time, so a host that falls behind is charged for the wait
   (a session never has two turns in flight; a late reply delays its next send). This is the
   latency a turn sees at a substantial load that does not saturate the host; the p99 target is
   judged here. "offered" is the schedule's rate, "req/s" the rate the host achieved;
4. memory: the host's RSS after 100 sessions, then after 1,000 distinct sessions
   (``max_active_sessions=100``).

"host CPU" is the host process's CPU time (every thread: event loop, DuckDB, recorder writer)
per request in that phase, the figure least disturbed by other load on a shared machine.
Targets (issue 6): paced p99 < 50 ms; closed-loop turns >= 0.3x the bare endpoint's
requests/s; RSS at 1,000 sessions <= 2x RSS at 100.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _child import print_figures, run_child

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SESSIONS, TURNS = 100, 10
PACED_SHARE = 0.5  # the paced phase offers this share of the capacity the closed loop measured
TARGET_P99_MS, TARGET_VS_BARE, TARGET_MEMORY_GROWTH = 50.0, 0.3, 2.0


# ---------------------------------------------------------------------------- the host process


def serve(shape: str, db: str) -> None:
    """Run the host (and a bare endpoint beside it) on 127.0.0.1, port 0; print the port."""
    import socket

    import uvicorn

    from agent import Agent
    from agent.providers import FunctionModel, ModelRequest
    from hosting import DuckDBSessions, create_app, standing_agent
    from hosting._serve import _Server  # what `footprint serve` runs: graceful stop, startup heap frozen
    from tracer import Recorder, Store

    store = Store.open(db)
    recorder = Recorder(store)

    def answer(request: ModelRequest) -> str:
        return f"echo: {request.last_user_text()}"

    model = FunctionModel(answer, name="echo", keep_requests=0)  # a long-running host keeps no request history

    def build() -> Agent:
        return Agent("bench", provider=model, recorder=recorder)

    sessions = DuckDBSessions(store)
    if shape == "shared":
        host = standing_agent(agent=build(), sessions=sessions, recordings=store)
    else:
        host = standing_agent(agent_factory=build, sessions=sessions, recordings=store, max_active_sessions=100)
    app = create_app(host)
    body = b'{"ok":true}'

    async def with_bare(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/bare":
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1], flush=True)
    server = _Server(uvicorn.Config(with_bare, log_level="warning", access_log=False, lifespan="on"), host, 10.0)
    if os.environ.get("BENCH_PROFILE"):
        import cProfile

        cProfile.runctx("server.run(sockets=[sock])", globals(), locals(), os.environ["BENCH_PROFILE"])
    else:
        server.run(sockets=[sock])
    store.close()


# ---------------------------------------------------------------------------- the load generator


class Connection:
    """One keep-alive HTTP/1.1 connection (a minimal client: the load generator must not be the bottleneck)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        assert self.reader is not None and self.writer is not None
        head = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        self.writer.write(head + body)
        raw = await self.reader.readuntil(b"\r\n\r\n")
        status = int(raw[9:12])
        match = re.search(rb"content-length: *(\d+)", raw, re.IGNORECASE)
        length = int(match.group(1)) if match else 0
        return status, await self.reader.readexactly(length)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def _drive(port: int, phase: str, sessions: int, turns: int, think: float, prefix: str) -> dict[str, Any]:
    """Closed loop when ``think`` is 0; otherwise each session's turns are scheduled ``think`` s apart (mean)."""
    latencies: list[float] = []
    scheduled: list[float] = []
    failures = 0
    rng = random.Random(7)
    loop = asyncio.get_running_loop()
    connections = [Connection(port) for _ in range(sessions)]
    await asyncio.gather(*(c.connect() for c in connections))  # before the clock starts: turns, not handshakes
    started = loop.time()

    async def session(n: int) -> None:
        nonlocal failures
        con = connections[n]
        due = started + rng.uniform(0, think)  # paced sessions start spread over one think time
        try:
            for t in range(turns):
                if phase == "bare":
                    method, path, body = "GET", "/bare", b""
                else:
                    method, path = "POST", "/v1/turns"
                    body = json.dumps({"message": f"turn {t}", "session_id": f"{prefix}{n}"}).encode()
                if think:
                    if due > loop.time():
                        await asyncio.sleep(due - loop.time())
                    sent_at = due  # open loop: the latency counts from the scheduled time
                    scheduled.append(due)
                    due += rng.uniform(0.5, 1.5) * think
                else:
                    sent_at = loop.time()
                status, payload = await con.request(method, path, body)
                latencies.append(loop.time() - sent_at)
                if status != 200 or (phase != "bare" and b'"answered"' not in payload):
                    failures += 1
        finally:
            con.close()

    await asyncio.gather(*(session(n) for n in range(sessions)))
    elapsed = loop.time() - (min(scheduled) if scheduled else started)
    latencies.sort()
    offered = (len(scheduled) - 1) / (max(scheduled) - min(scheduled)) if len(scheduled) > 1 else None
    return {
        "requests": len(latencies), "failures": failures, "seconds": elapsed, "rps": len(latencies) / elapsed,
        "offered_rps": offered, "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
    }


def load(port: int, phase: str, sessions: int, turns: int, think: float, prefix: str) -> None:
    """Drive one phase and print its figures as JSON (runs in its own process)."""
    print_figures(asyncio.run(_drive(port, phase, sessions, turns, think, prefix)))


# ---------------------------------------------------------------------------- the driver


def _phase(port: int, phase: str, sessions: int, turns: int, think: float = 0.0, prefix: str = "s") -> dict[str, Any]:
    return run_child(__file__, "--load", str(port), phase, str(sessions), str(turns), str(think), prefix, timeout=600)


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _cpu_seconds(pid: int) -> float:
    """The process's CPU time so far, every thread (user + system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_shape(shape: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen([sys.executable, __file__, "--serve", shape, os.path.join(tmp, "bench.duckdb")],
                                stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            port = int(proc.stdout.readline())
            time.sleep(0.5)

            def measured(phase: str, turns: int, think: float = 0.0, prefix: str = "s") -> dict[str, Any]:
                cpu = _cpu_seconds(proc.pid)
                figures = _phase(port, phase, SESSIONS, turns, think, prefix)
                figures["cpu_ms"] = (_cpu_seconds(proc.pid) - cpu) * 1000 / figures["requests"]
                return figures

            _phase(port, "turns", 20, 5, prefix="warm")
            _phase(port, "bare", 20, 20)
            results = {"bare": measured("bare", TURNS)}
            results["turns"] = measured("turns", TURNS, prefix="s")
            results["rss_100_mb"] = _rss_mb(proc.pid)
            rate = PACED_SHARE * results["turns"]["rps"]
            results["paced"] = measured("turns", TURNS, think=SESSIONS / rate, prefix="p")
            results["paced"]["target_rps"] = rate
            for batch in range(9):  # 900 more distinct sessions: 1,000 in all, at most 100 instances kept
                _phase(port, "turns", SESSIONS, 2, prefix=f"m{batch}-")
            results["rss_1000_mb"] = _rss_mb(proc.pid)
            return results
        finally:
            proc.terminate()
            proc.wait(timeout=60)


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def main() -> None:
    load_before = os.getloadavg()
    print(f"footprint host benchmark: {SESSIONS} sessions x {TURNS} turns per phase, FunctionModel agent, "
          f"DuckDB sessions + recordings (exit durability), loopback; load generator in its own process; "
          f"{os.cpu_count()} cores, load average {load_before[0]:.2f} before")
    print(f"{'shape':<7} {'phase':<6} {'offered':>8} {'req/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'Little':>7} "
          f"{'vs bare':>7} {'host CPU':>9} {'fail':>4}  {'target':<20} result")
    for shape in ("pooled", "shared"):
        r = run_shape(shape)
        bare = r["bare"]["rps"]
        for phase in ("bare", "turns", "paced"):
            f = r[phase]
            offered = f"{f['offered_rps']:8.0f}" if phase == "paced" else f"{'closed':>8}"
            little = f"{SESSIONS / f['rps'] * 1000:7.1f}" if phase != "paced" else f"{'-':>7}"
            ratio = f"{f['rps'] / bare:7.2f}" if phase != "paced" else f"{'-':>7}"
            if phase == "turns":
                target, result = f">= {TARGET_VS_BARE:.2f}x bare req/s", _verdict(f["rps"] / bare >= TARGET_VS_BARE)
            elif phase == "paced":
                target, result = f"p99 < {TARGET_P99_MS:.0f} ms", _verdict(f["p99_ms"] < TARGET_P99_MS)
                if f["rps"] < 0.95 * f["offered_rps"]:
                    result += " (the host fell behind the offered rate)"
            else:
                target, result = "(the ceiling)", ""
            print(f"{shape:<7} {phase:<6} {offered} {f['rps']:7.0f} {f['p50_ms']:7.1f} {f['p99_ms']:7.1f} {little} "
                  f"{ratio} {f['cpu_ms']:6.2f} ms {f['failures']:4d}  {target:<20} {result}")
        growth = r["rss_1000_mb"] / r["rss_100_mb"]
        memory = (f"RSS {r['rss_100_mb']:.0f} MB after 100 sessions, {r['rss_1000_mb']:.0f} MB after 1,000 "
                  f"({growth:.2f}x)")
        print(f"{shape:<7} {'memory':<6} {memory:<66}  {'<= ' + format(TARGET_MEMORY_GROWTH, '.2f') + 'x':<20} "
              f"{_verdict(growth <= TARGET_MEMORY_GROWTH)}")
    print(f"Little = {SESSIONS} in flight / req/s: the mean latency a closed loop of {SESSIONS} must show, so its "
          f"p99 is no latency figure; paced offers {PACED_SHARE:.0%} of the turns phase's req/s, open loop. "
          f"Load average {os.getloadavg()[0]:.2f} after.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", nargs=2, metavar=("SHAPE", "DB"), help=argparse.SUPPRESS)
    parser.add_argument("--load", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(*args.serve)
    elif args.load:
        port, phase, sessions, turns, think, prefix = args.load
        load(int(port), phase, int(sessions), int(turns), float(think), prefix)
    else:
        main()

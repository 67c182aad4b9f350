"""Benchmark of the standing-agent host over HTTP on loopback.

    .venv/bin/python bench/host.py

For each shape (``pooled``: an agent factory, one instance per session; ``shared``: one agent,
runs serialized globally) it starts a host in a subprocess — the `footprint serve` defaults:
sessions and recordings in one DuckDB file, ``exit`` durability, a FunctionModel agent — and
drives it from a separate load-generator process (keep-alive HTTP/1.1 connections over asyncio
streams, loopback only, a bounded number of requests):

1. ``bare``: 100 concurrent clients x 10 requests to a bare ASGI endpoint on the same server
   (no FastAPI, no agent): the ceiling of this server and this load generator;
2. ``turns``: 100 concurrent sessions x 10 turns each (closed loop: a session sends its next turn
   when the reply arrives), requests/s and p50/p99 latency;
3. ``paced``: 100 more sessions x 10 turns, each session thinking 1 s between turns (about 100
   turns/s offered) — the latency a turn sees when the host is not saturated. In the closed loop
   of phase 2, 100 requests are always in flight, so by Little's law its latency is just
   100 / (requests/s);
4. memory: the host's RSS after 100 sessions, then after 1,000 distinct sessions
   (``max_active_sessions=100``).
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SESSIONS, TURNS = 100, 10
PACED_THINK = 1.0  # seconds a paced session waits between turns: ~100 turns/s offered in all


# ---------------------------------------------------------------------------- the host process


def serve(shape: str, db: str) -> None:
    """Run the host (and a bare endpoint beside it) on 127.0.0.1, port 0; print the port."""
    import socket

    import uvicorn

    from agent import Agent
    from agent.providers import FunctionModel, ModelRequest
    from hosting import DuckDBSessions, create_app, standing_agent
    from tracer import Recorder, Store

    store = Store.open(db)
    recorder = Recorder(store)

    def answer(request: ModelRequest) -> str:
        return f"echo: {request.last_user_text()}"

    model = FunctionModel(answer, name="echo")

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
    server = uvicorn.Server(uvicorn.Config(with_bare, log_level="warning", access_log=False, lifespan="on"))
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

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        assert self.reader is not None
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
    latencies: list[float] = []
    failures = 0

    rng = random.Random(7)

    async def session(n: int) -> None:
        nonlocal failures
        con = Connection(port)
        if think:  # paced sessions start spread over one think time, so they do not arrive in lockstep
            await asyncio.sleep(rng.uniform(0, think))
        try:
            for t in range(turns):
                if phase == "bare":
                    method, path, body = "GET", "/bare", b""
                else:
                    method, path = "POST", "/v1/turns"
                    body = json.dumps({"message": f"turn {t}", "session_id": f"{prefix}{n}"}).encode()
                started = time.perf_counter()
                status, payload = await con.request(method, path, body)
                latencies.append(time.perf_counter() - started)
                if status != 200 or (phase != "bare" and b'"answered"' not in payload):
                    failures += 1
                if think:
                    await asyncio.sleep(rng.uniform(0.5, 1.5) * think)
        finally:
            con.close()

    started = time.perf_counter()
    await asyncio.gather(*(session(n) for n in range(sessions)))
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "requests": len(latencies), "failures": failures, "seconds": elapsed, "rps": len(latencies) / elapsed,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
    }


def load(port: int, phase: str, sessions: int, turns: int, think: float, prefix: str) -> None:
    """Drive one phase and print its figures as JSON (runs in its own process)."""
    print(json.dumps(asyncio.run(_drive(port, phase, sessions, turns, think, prefix))), flush=True)


# ---------------------------------------------------------------------------- the driver


def _phase(port: int, phase: str, sessions: int, turns: int, think: float = 0.0, prefix: str = "s") -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--load", str(port), phase, str(sessions), str(turns), str(think), prefix],
        check=True, capture_output=True, text=True, timeout=600,
    ).stdout
    return dict(json.loads(out))


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_shape(shape: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen([sys.executable, __file__, "--serve", shape, os.path.join(tmp, "bench.duckdb")],
                                stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            port = int(proc.stdout.readline())
            time.sleep(0.5)
            _phase(port, "turns", 20, 5, prefix="warm")
            _phase(port, "bare", 20, 20)
            results = {"bare": _phase(port, "bare", SESSIONS, TURNS)}
            results["turns"] = _phase(port, "turns", SESSIONS, TURNS, prefix="s")
            results["rss_100_mb"] = _rss_mb(proc.pid)
            results["paced"] = _phase(port, "turns", SESSIONS, TURNS, think=PACED_THINK, prefix="p")
            for batch in range(9):  # 900 more distinct sessions: 1,000 in all, at most 100 instances kept
                _phase(port, "turns", SESSIONS, 2, prefix=f"m{batch}-")
            results["rss_1000_mb"] = _rss_mb(proc.pid)
            return results
        finally:
            proc.terminate()
            proc.wait(timeout=60)


def main() -> None:
    print(f"footprint host benchmark: {SESSIONS} concurrent sessions x {TURNS} turns, FunctionModel agent, "
          f"DuckDB sessions + recordings (exit durability), loopback; load generator in its own process")
    print(f"{'shape':<8} {'phase':<7} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'vs bare':>8} {'failures':>8}")
    for shape in ("pooled", "shared"):
        r = run_shape(shape)
        bare = r["bare"]["rps"]
        for phase in ("bare", "turns", "paced"):
            f = r[phase]
            ratio = f"{f['rps'] / bare:.2f}" if phase != "paced" else "-"
            print(f"{shape:<8} {phase:<7} {f['rps']:8.0f} {f['p50_ms']:8.1f} {f['p99_ms']:8.1f} {ratio:>8} "
                  f"{f['failures']:8d}")
        growth = r["rss_1000_mb"] / r["rss_100_mb"]
        print(f"{shape:<8} memory  RSS after 100 sessions {r['rss_100_mb']:.0f} MB, after 1,000 sessions "
              f"{r['rss_1000_mb']:.0f} MB ({growth:.2f}x; max_active_sessions=100)")


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

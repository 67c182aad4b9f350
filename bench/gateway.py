"""Benchmark of the agents gateway: a stored agent's turn, cold (first use) and warm (cached), against a
code-defined agent's turn on the same host.

    .venv/bin/python bench/gateway.py [--sessions 20] [--turns 10] [--cold 30]

One host process (a subprocess on 127.0.0.1, port 0) serves both: a code-defined agent on
``POST /v1/turns`` and a stored agent of the same prompt and model on
``POST /api/agents/{id}/chat`` — the `footprint serve --gateway` setup: sessions, agents and
recordings in one DuckDB file, ``exit`` durability, a FunctionModel. One client process sends
turns one at a time over a keep-alive HTTP/1.1 connection, alternating code-defined and stored
turns so both see the same machine load and the same conversation growth (``--sessions``
sessions of ``--turns`` turns each, per kind).

* ``warm``: a stored agent's turn once its instance is cached, beside a code-defined agent's turn.
  Target (issue 16): the warm median within 10% of the code-defined median.
* ``cold``: a stored agent's first use — its definition read from DuckDB, provider, model and tools
  resolved, its standing host built — and its turn: ``--cold`` times, each after the bench drops
  the cached instance (a bench-only endpoint calls ``gateway.invalidate``); and the build alone,
  timed in the host.
* the repository at ``--agents`` agents (DuckDB): create, list all, get by name.

"host CPU" is the host process's CPU time per turn (all threads), the figure least disturbed by
other load on a shared machine. The load average is printed with the figures: compare ratios
measured within one run.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROMPT = "You are a helpful assistant. Answer briefly."
TARGET_WARM_RATIO = 1.10


def serve(db: str) -> None:
    """Run the host with a code-defined agent and the gateway; print the port and the stored agent's id."""
    import asyncio
    import socket

    import uvicorn

    from agent import Agent
    from agent.providers import FunctionModel, ModelRequest
    from hosting import DuckDBSessions, create_app, standing_agent
    from hosting._serve import _Server
    from hosting.gateway import DuckDBAgents, Gateway, GatewaySettings
    from tracer import Recorder, Store

    store = Store.open(db)
    recorder = Recorder(store)

    def answer(request: ModelRequest) -> str:
        return f"echo: {request.last_user_text()}"

    model = FunctionModel(answer, name="echo", keep_requests=0)
    sessions = DuckDBSessions(store)
    host = standing_agent(agent_factory=lambda: Agent("code-defined", provider=model, persona=PROMPT,
                                                      recorder=recorder),
                          sessions=sessions, recordings=store, max_active_sessions=100)
    gateway = Gateway(DuckDBAgents(store), settings=GatewaySettings({"echo": model}, "echo"), sessions=sessions,
                      recorder=recorder)
    stored = asyncio.run(gateway.create({"name": "stored", "systemPrompt": PROMPT}))
    app = create_app(host, gateway=gateway)

    async def with_controls(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/bench/"):
            agent_id = scope["path"].rsplit("/", 1)[1]
            gateway.invalidate(agent_id)
            built = 0.0
            if scope["path"].startswith("/bench/build/"):  # the first use's build alone, without a turn
                started = time.perf_counter()
                await gateway.instance(agent_id)
                built = time.perf_counter() - started
            body = json.dumps({"built": built}).encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1], stored.id, flush=True)
    server = _Server(uvicorn.Config(with_controls, log_level="warning", access_log=False, lifespan="on"), host, 10.0)
    server.run(sockets=[sock])
    store.close()


class Client:
    """Sequential JSON requests over one keep-alive connection."""

    def __init__(self, port: int) -> None:
        self.con = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def post(self, path: str, body: dict[str, Any] | None = None) -> tuple[float, dict[str, Any]]:
        payload = json.dumps(body or {}).encode()
        started = time.perf_counter()
        self.con.request("POST", path, body=payload, headers={"Content-Type": "application/json"})
        response = self.con.getresponse()
        data = json.loads(response.read())
        elapsed = time.perf_counter() - started
        if response.status != 200 or (isinstance(data, dict) and data.get("status") not in (None, "answered")):
            raise RuntimeError(f"{path}: HTTP {response.status}: {data}")
        return elapsed, data


def host_cpu(pid: int) -> float:
    """CPU seconds (user + system, every thread) the host process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def summary(samples: list[float]) -> str:
    ordered = sorted(samples)
    p90 = ordered[int(0.9 * (len(ordered) - 1))]
    return f"median {statistics.median(ordered) * 1000:7.2f} ms   p90 {p90 * 1000:7.2f} ms   (n={len(ordered)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=20, help="sessions per kind (default 20)")
    parser.add_argument("--turns", type=int, default=10, help="turns per session (default 10)")
    parser.add_argument("--cold", type=int, default=30, help="cold first uses (default 30)")
    parser.add_argument("--agents", type=int, default=1000, help="agents for the repository figures (default 1000)")
    parser.add_argument("--serve", metavar="DB", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen([sys.executable, __file__, "--serve", str(Path(tmp) / "fp.duckdb")],
                                stdout=subprocess.PIPE, text=True, cwd=ROOT)
        try:
            assert proc.stdout is not None
            port_text, agent_id = proc.stdout.readline().split()
            client = Client(int(port_text))
            deadline = time.monotonic() + 60
            while True:  # the port is printed before uvicorn listens
                try:
                    client.con.connect()
                    break
                except ConnectionRefusedError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            for index in range(5):  # warm both paths up: imports, first builds, caches
                client.post("/v1/turns", {"message": "warm up", "session_id": f"warm-code-{index}"})
                client.post(f"/api/agents/{agent_id}/chat", {"message": "warm up", "session_id": f"warm-{index}"})
            code: list[float] = []
            stored: list[float] = []
            cpu = {"code": 0.0, "stored": 0.0}
            for turn in range(args.turns):
                for session in range(args.sessions):
                    before = host_cpu(proc.pid)
                    code.append(client.post("/v1/turns", {"message": f"turn {turn}",
                                                          "session_id": f"code-{session}"})[0])
                    middle = host_cpu(proc.pid)
                    stored.append(client.post(f"/api/agents/{agent_id}/chat",
                                              {"message": f"turn {turn}", "session_id": f"s-{session}"})[0])
                    cpu["code"] += middle - before
                    cpu["stored"] += host_cpu(proc.pid) - middle
            cold: list[float] = []
            builds: list[float] = []
            for index in range(args.cold):
                client.post(f"/bench/invalidate/{agent_id}")
                cold.append(client.post(f"/api/agents/{agent_id}/chat",
                                        {"message": "first", "session_id": f"cold-{index}"})[0])
                builds.append(client.post(f"/bench/build/{agent_id}")[1]["built"])
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    n = len(code)
    ratio = statistics.median(stored) / statistics.median(code)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}   (2 cores shared)")
    print(f"code-defined turn   {summary(code)}   host CPU {cpu['code'] / n * 1000:.2f} ms/turn")
    print(f"stored, warm        {summary(stored)}   host CPU {cpu['stored'] / n * 1000:.2f} ms/turn")
    print(f"stored, cold        {summary(cold)}   (first use after the cached instance was dropped)")
    print(f"  of which the build {summary(builds)}   (definition read from DuckDB, resolved, host built)")
    print(f"warm / code-defined median: {ratio:.3f} (target <= {TARGET_WARM_RATIO:.2f}: "
          f"{'met' if ratio <= TARGET_WARM_RATIO else 'NOT met'});  "
          f"host CPU ratio {cpu['stored'] / max(cpu['code'], 1e-9):.3f}")
    repository_at_size(args.agents)


def repository_at_size(count: int) -> None:
    """Create ``count`` agents in a DuckDB repository, then list, look up and count them."""
    import asyncio

    from hosting.gateway import DuckDBAgents
    from hosting.gateway._definition import record_from, validated

    async def run(path: str) -> None:
        repository = DuckDBAgents(path=path)
        started = time.perf_counter()
        for index in range(count):
            await repository.create(record_from(validated({"name": f"agent {index}", "systemPrompt": "x" * 2000,
                                                           "tools": ["a", "b"], "triggers": ["kw"]})))
        created = time.perf_counter() - started
        started = time.perf_counter()
        listed = await repository.list(limit=100_000)
        list_time = time.perf_counter() - started
        started = time.perf_counter()
        for index in range(0, count, max(1, count // 100)):
            await repository.get_by_name(f"AGENT {index}")
        lookups = min(count, 100)
        by_name = (time.perf_counter() - started) / lookups
        assert len(listed) == count == await repository.count()
        await repository.close()
        print(f"repository at {count} agents (DuckDB): create {created / count * 1000:.2f} ms each, "
              f"list all {list_time * 1000:.1f} ms, get by name {by_name * 1000:.2f} ms")

    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(str(Path(tmp) / "agents.duckdb")))


if __name__ == "__main__":
    main()

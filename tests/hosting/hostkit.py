"""Helpers for the host tests: agents on test models and a loopback server in a thread."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

from agent import Agent, PauseRun, Tool
from agent.providers import FunctionModel, ModelRequest
from tracer import Recorder

ROOT = Path(__file__).resolve().parents[2]
FOOTPRINT = Path(sys.executable).parent / "footprint"


@contextmanager
def host_process(db: Path, crash_dir: Path, *extra: str, open_files: tuple[int, int] | None = None,
                 agent: str = "tests.hosting.crashkit:make_agent") -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`footprint serve --durability sync` with the crashkit agent (or ``agent``) on 127.0.0.1, port 0;
    yields the process and URL (its stderr lines gather in ``proc.stderr_lines``).

    ``open_files``: the (soft, hard) limit on open files the process starts with.
    """
    env = {**os.environ, "FOOTPRINT_CRASH_DIR": str(crash_dir), "PYTHONPATH": str(ROOT)}
    env.pop("OPENAI_API_KEY", None)

    def limit() -> None:
        import resource

        if open_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, open_files)

    proc = subprocess.Popen(
        [str(FOOTPRINT), "serve", "--db", str(db), "--port", "0", "--durability", "sync",
         "--agent", agent, "--host-id", "crash-test-host", *extra],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env, cwd=ROOT,
        preexec_fn=limit if open_files is not None else None,  # (only setrlimit, before exec)
    )
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 60
        url = None
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line and proc.poll() is not None:
                raise RuntimeError(f"footprint serve exited with {proc.returncode}")
            match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
            if match:
                url = f"http://127.0.0.1:{match.group(1)}"
        assert url is not None, "footprint serve did not start"
        lines: list[str] = []
        proc.stderr_lines = lines  # type: ignore[attr-defined]  # kept for assertion messages
        threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True).start()  # type: ignore[arg-type]
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


@contextmanager
def serve_in_thread(app: Any) -> Iterator[str]:
    """Run ``app`` with uvicorn on 127.0.0.1 on a free port in a thread; yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()


PG_DSNS = ("postgresql://postgres@127.0.0.1:5432/test", "postgresql://root@127.0.0.1:5432/test")


def postgres_dsn() -> str | None:
    """The DSN of the PostgreSQL server on 127.0.0.1:5432 (user postgres or root), or None when none answers."""
    import psycopg

    for dsn in PG_DSNS:
        try:
            with psycopg.connect(dsn, connect_timeout=3) as con:
                con.execute("SELECT 1")
            return dsn
        except psycopg.Error:
            continue
    return None


def echo_model() -> FunctionModel:
    """Answers with the count of user messages it saw and the last one: 'echo #n: text'."""

    def answer(request: ModelRequest) -> str:
        users = [ci.item.text for ci in request.context if ci.item.kind == "user"]
        return f"echo #{len(users)}: {users[-1] if users else ''}"

    return FunctionModel(answer, name="echo")


def make_agent(provider: Any = None, *, recorder: Recorder | None = None, tools: list[Tool] | None = None,
               name: str = "assistant") -> Agent:
    """An agent on the echo model (or ``provider``)."""
    return Agent(name, provider=provider or echo_model(), recorder=recorder, tools=tools or [])


def ask_tool(question: str = "Which day?") -> Tool:
    """A tool that pauses the run to ask a person."""

    async def execute(_: dict[str, Any]) -> str:
        raise PauseRun(question)

    return Tool("ask_person", "Ask the user something.", {"type": "object", "properties": {}}, execute)

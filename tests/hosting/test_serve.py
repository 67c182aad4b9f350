"""`footprint serve` and graceful shutdown: SIGTERM stores the running turn, flushes, exits 0."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from click.testing import CliRunner

from agent.providers import FunctionModel, ModelRequest
from explorer.cli import cli
from hosting import HostShuttingDownError, InMemorySessions, standing_agent
from tests.hosting.hostkit import host_process, make_agent
from tracer import Store


def test_sigterm_stores_the_running_turn_and_the_next_request_finishes_it(tmp_path: Path) -> None:
    db, crash_dir = tmp_path / "host.duckdb", tmp_path / "crash"
    crash_dir.mkdir()
    replies: list[Any] = []
    with host_process(db, crash_dir, "--grace", "0.5") as (proc, url):
        held = threading.Thread(target=lambda: replies.append(
            httpx.post(f"{url}/v1/turns", json={"message": "do it", "session_id": "alice"}, timeout=60)))
        held.start()
        deadline = time.monotonic() + 20
        while not ((crash_dir / "executions.log").exists() and "wait" in (crash_dir / "executions.log").read_text()):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        held.join(timeout=60)
        assert proc.wait(timeout=60) == 0, "".join(proc.stderr_lines)  # type: ignore[attr-defined]
    # the running turn was answered as interrupted (not failed)
    assert replies[0].status_code == 200 and replies[0].json()["status"] == "interrupted"
    # the recordings were flushed and the file is free again: the run is there, marked cancelled
    with Store.open(db, read_only=True) as store:
        assert store.get_run(replies[0].json()["run_id"]).status == "cancelled"

    (crash_dir / "go").touch()
    with host_process(db, crash_dir) as (proc, url), httpx.Client(base_url=url, timeout=30) as http:
        reply = http.post("/v1/turns", json={"message": "and?", "session_id": "alice"}).json()
        # the call the shutdown cut short is not run again (not durable): the model is told so
        assert reply["recovered"]["answer"].startswith("done: noted A, Error: wait_for_signal was interrupted")
        assert reply["answer"] == "echo #2: and?"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, "".join(proc.stderr_lines)  # type: ignore[attr-defined]
    assert sorted((crash_dir / "executions.log").read_text().splitlines()) == ["note A", "wait"]


def test_serve_help_and_bad_options() -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["serve", "--help"])
    assert result.exit_code == 0
    for option in ("--db", "--host", "--port", "--token", "--durability", "--agent", "--sessions"):
        assert option in result.output
    bad = runner.invoke(cli, ["serve", "--agent", "no_such_module:thing", "--db", os.devnull])
    assert bad.exit_code != 0 and "cannot load 'no_such_module:thing'" in bad.output
    bad = runner.invoke(cli, ["serve", "--durability", "sometimes"])
    assert bad.exit_code != 0 and "sometimes" in bad.output
    assert "--session-cache-mb" in result.output
    bad = runner.invoke(cli, ["serve", "--session-cache-mb", "-1"])
    assert bad.exit_code == 2 and "--session-cache-mb" in bad.output


def test_the_session_cache_bound_reaches_the_session_store(tmp_path: Path) -> None:
    from hosting.cli import _sessions_store

    with Store.open(tmp_path / "s.duckdb") as store:
        assert _sessions_store("duckdb", store, cache_mb=0)._cache_limit == 0  # type: ignore[attr-defined]
        assert _sessions_store("duckdb", store, cache_mb=8)._cache_limit == 8 << 20  # type: ignore[attr-defined]
        assert _sessions_store("duckdb", store)._cache_limit == 64 << 20  # type: ignore[attr-defined]


async def test_a_draining_host_refuses_new_turns_and_lets_running_ones_finish() -> None:
    release = asyncio.Event()

    async def slow(request: ModelRequest) -> str:
        await release.wait()
        return "finished in time"

    sessions = InMemorySessions()
    host = standing_agent(agent_factory=lambda: make_agent(FunctionModel(slow)), sessions=sessions)
    running = asyncio.ensure_future(host.handle("work", session_id="alice"))
    while not host.running_sessions():
        await asyncio.sleep(0.01)
    closing = asyncio.ensure_future(host.close(grace=30))
    await asyncio.sleep(0.01)
    with pytest.raises(HostShuttingDownError):
        await host.handle("late", session_id="bob")
    assert host.health()["status"] == "draining"
    release.set()
    assert (await running).answer == "finished in time"  # inside the grace period: it finishes
    await closing
    stored = await sessions.load("alice")
    assert stored is not None and stored.status == "answered"


def _not_an_agent(recorder: Any) -> str:
    return "I am a string"


def _broken_agent(recorder: Any) -> Any:
    raise RuntimeError("the config file is missing")


@pytest.mark.parametrize(("spec", "says"), [
    ("os:getcwd", "TypeError: "), (f"{__name__}:_not_an_agent", "it returned str, not an agent.Agent"),
    (f"{__name__}:_broken_agent", "RuntimeError: the config file is missing"),
])
def test_serve_refuses_an_agent_spec_that_builds_no_agent_before_it_listens(
    tmp_path: Path, spec: str, says: str
) -> None:
    """It used to start, report healthy, and answer every turn with a 500."""
    result = CliRunner().invoke(cli, ["serve", "--agent", spec, "--port", "0", "--db", str(tmp_path / "s.duckdb")])
    assert result.exit_code == 2, result.output
    assert f"Invalid value for --agent: {spec!r} cannot build an agent: " in result.output and says in result.output
    assert "footprint host on" not in result.output


def test_serve_names_a_seed_file_that_is_not_utf8_as_an_error_not_an_internal_one(tmp_path: Path) -> None:
    """`footprint serve --agents-seed latin1.json` said `footprint: internal error: UnicodeDecodeError` (exit 70)."""
    seed = tmp_path / "latin1.json"
    seed.write_bytes('[{"id": "caf\xe9", "name": "Café"}]'.encode("latin-1"))
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", "from explorer.cli import main; main()", "serve", "--port", "0", "--agent", "echo",
         "--db", str(tmp_path / "s.duckdb"), "--agents-seed", str(seed)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith(f"footprint: error: {seed} is not UTF-8 JSON: byte 0xe9"), result.stderr
    assert not (tmp_path / "s.duckdb").exists()  # refused before the store is made


def test_serve_names_an_agent_module_that_cannot_be_imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A --agent module whose file is not Python (not UTF-8, a syntax error) or fails at import was an
    internal error (SyntaxError, exit 70); it is a bad --agent, as a module that is not there is."""
    (tmp_path / "latin1_agent.py").write_bytes("NAME = 'caf\xe9'\n".encode("latin-1"))
    (tmp_path / "failing_agent.py").write_text("raise RuntimeError('no config')\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    for spec, says in (("latin1_agent:build", "SyntaxError: "), ("failing_agent:build", "RuntimeError: no config")):
        result = CliRunner().invoke(cli, ["serve", "--agent", spec, "--port", "0", "--db", str(tmp_path / "s.duckdb")])
        assert result.exit_code == 2, result.output
        assert f"cannot load {spec!r}: importing {spec.split(':')[0]} failed: {says}" in result.output, result.output


@pytest.mark.parametrize("command", ["serve", "up"])
@pytest.mark.parametrize("token", ["", "  "])
def test_an_empty_token_is_refused_not_served_as_a_host_nobody_can_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, token: str
) -> None:
    """It started saying no token was needed, and answered every request 401 (an empty FOOTPRINT_TOKEN is unset)."""
    monkeypatch.setattr("explorer._commands.has_terminal", lambda: True)
    result = CliRunner().invoke(cli, [command, "--token", token, "--port", "0", "--agent", "echo", "--db",
                                      str(tmp_path / "s.duckdb")])
    assert result.exit_code == 2, result.output
    assert "Invalid value for --token: an empty token would refuse every request" in result.output
    assert not (tmp_path / "s.duckdb").exists()


@pytest.mark.parametrize("token", ["T", "ab12"])
def test_a_token_short_enough_to_mask_ordinary_text_is_refused(tmp_path: Path, token: str) -> None:
    result = CliRunner().invoke(cli, ["serve", "--token", token, "--port", "0", "--agent", "echo", "--db",
                                      str(tmp_path / "s.duckdb")])
    assert result.exit_code == 2, result.output
    assert f"a token of {len(token)} character(s) is too easy to guess" in result.output
    assert "give at least 6 characters" in result.output and not (tmp_path / "s.duckdb").exists()


@pytest.mark.parametrize(("options", "says"), [
    (("--sessions", "postgresql://nobody:hunter2@127.0.0.1:1/x"),
     "cannot reach the PostgreSQL session store postgresql://nobody:***@127.0.0.1:1/x"),
    # a libpq keyword DSN is PostgreSQL too (it was taken for a DuckDB file of that name, and its
    # password printed in the startup line)
    (("--sessions", "host=127.0.0.1 port=1 user=nobody password=hunter2"),
     "cannot reach the PostgreSQL session store host=127.0.0.1 port=1 user=nobody password=***"),
    # the agents repository too (it started, failed in the server's startup with two tracebacks)
    (("--gateway", "--agents-store", "postgresql://nobody:hunter2@127.0.0.1:1/x"),
     "cannot reach the agents repository postgresql://nobody:***@127.0.0.1:1/x"),
])
def test_serve_refuses_an_unreachable_postgresql_store(tmp_path: Path, options: tuple[str, ...], says: str) -> None:
    """A host that could store no turn does not start (it used to start, report healthy and 503 every
    turn); the error names the store with its password masked, on one line."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", "from explorer.cli import main; main()", "serve", "--db", str(tmp_path / "s.duckdb"),
         "--port", "0", "--agent", "echo", *options],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert done.returncode == 1 and done.stdout == "", done.stderr
    assert done.stderr.startswith(f"footprint: error: {says}: ") and done.stderr.count("\n") == 1, done.stderr
    assert "hunter2" not in done.stderr and "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if "=" in p.name) == []  # no file named after the DSN
    assert not (tmp_path / "s.duckdb").exists()  # checked before --db is opened: no store is left behind


@pytest.mark.parametrize(("where", "says"), [
    ("no/such/dir/s.duckdb", "the directory {tmp}/no/such/dir does not exist"),
    ("a-file/s.duckdb", "{tmp}/a-file is a file, not a directory"),
])
def test_serve_names_a_session_store_directory_that_is_not_there(tmp_path: Path, where: str, says: str) -> None:
    """It said DuckDB's 'IO Error: Cannot open file ...'; it says what is wrong with the directory, as --db does."""
    import subprocess
    import sys

    (tmp_path / "a-file").write_text("")
    done = subprocess.run(
        [sys.executable, "-c", "from explorer.cli import main; main()", "serve", "--port", "0", "--agent", "echo",
         "--db", str(tmp_path / "r.duckdb"), "--sessions", str(tmp_path / where)],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stdout == "", done.stderr
    assert f"cannot create the session store {tmp_path / where}: {says.format(tmp=tmp_path)}" in done.stderr
    assert "IO Error" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("bind", ["in-use", "256.1.1.1"])
def test_serve_on_an_address_it_cannot_listen_on_stops_before_it_makes_a_store(tmp_path: Path, bind: str) -> None:
    """It opened (so created) --db first, and left an empty store behind for a typo in --host."""
    import socket
    import subprocess
    import sys

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    host, port = ("127.0.0.1", taken.getsockname()[1]) if bind == "in-use" else (bind, 0)
    try:
        done = subprocess.run(
            [sys.executable, "-c", "from explorer.cli import main; main()", "serve", "--agent", "echo",
             "--host", host, "--port", str(port), "--db", str(tmp_path / "s.duckdb")],
            capture_output=True, text=True, timeout=60)
    finally:
        taken.close()
    assert done.returncode == 1 and done.stderr.startswith(f"footprint: error: cannot listen on {host}:"), done.stderr
    assert not (tmp_path / "s.duckdb").exists()


@pytest.mark.parametrize("request_head", [
    b"POST /v1/turns HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: abc\r\n\r\n{}",
    b"POST /v1/turns HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
    b"GET /v1/health HTTP/1.1\r\nHost: x\r\nBad Header Without Colon\r\n\r\n",
], ids=["non-numeric-content-length", "two-content-lengths", "broken-header"])
def test_a_request_that_is_not_valid_http_gets_the_hosts_json_error(tmp_path: Path, request_head: bytes) -> None:
    """uvicorn's parser refuses these before the app sees them, and answered 'Invalid HTTP request
    received.' as text/plain: now the host's own {"error": {"code", "message"}} with a 400."""
    import json
    import socket

    crash_dir = tmp_path / "crash"
    crash_dir.mkdir()
    with host_process(tmp_path / "host.duckdb", crash_dir) as (_proc, url):
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
            conn.sendall(request_head)
            raw = b""
            while chunk := conn.recv(65536):
                raw += chunk
        head, _, body = raw.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400"), raw
        assert b"content-type: application/json" in head.lower(), raw
        error = json.loads(body)["error"]
        assert error["code"] == "bad_request" and error["message"].startswith("the request is not valid HTTP")
        assert httpx.get(f"{url}/v1/health", timeout=10).json()["status"] == "ok"  # the host goes on


_REQUEST_STARTS = [
    b"",  # a connection that sends nothing
    b"POST /v1/turns HTTP/1.1\r\n",
    b"POST /v1/turns HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n",
    b'POST /v1/turns HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n{"mess',
    b"POST /v1/turns HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n",
]


def _read_all(conn: Any) -> bytes:
    raw = b""
    while chunk := conn.recv(65536):
        raw += chunk
    return raw


def test_a_request_not_sent_whole_in_time_is_408_and_a_turn_that_runs_longer_is_not(tmp_path: Path) -> None:
    """uvicorn waited for ever for a request's headers and body: 300 connections that each sent half
    a request line held 300 sockets for as long as the clients liked (slowloris). Now a request has
    --request-timeout seconds from its first byte; the time a turn then runs is not counted."""
    import json
    import socket

    crash_dir = tmp_path / "crash"
    crash_dir.mkdir()
    with host_process(tmp_path / "host.duckdb", crash_dir, "--request-timeout", "1") as (_proc, url):
        port = int(url.rsplit(":", 1)[1])
        # a turn whose tool waits for a signal: it runs past the timeout, and is answered
        long_turn: dict[str, Any] = {}
        runner = threading.Thread(target=lambda: long_turn.update(httpx.post(
            f"{url}/v1/turns", json={"message": "do it", "session_id": "slow"}, timeout=60).json()))
        runner.start()
        conns = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in _REQUEST_STARTS]
        for conn, start in zip(conns, _REQUEST_STARTS, strict=True):
            if start:
                conn.sendall(start)
        for conn, start in zip(conns, _REQUEST_STARTS, strict=True):
            with conn:
                raw = _read_all(conn)  # the host closes it: recv returns b"" (the socket timeout is 30 s)
            if not start:
                assert raw == b"", raw  # nothing was asked: closed as an idle keep-alive connection is
                continue
            head, _, body = raw.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 408"), (start, raw)
            error = json.loads(body)["error"]
            assert error["code"] == "request_timeout" and "within 1 seconds" in error["message"], error
        assert runner.is_alive()  # the turn outlived every timeout above
        (crash_dir / "go").touch()
        runner.join(timeout=60)
        assert long_turn.get("status") == "answered", long_turn
        assert httpx.get(f"{url}/v1/health", timeout=10).json()["status"] == "ok"
        assert not [line for line in _proc.stderr_lines if "Traceback" in line or "ERROR" in line]  # type: ignore[attr-defined]


def test_out_of_descriptors_the_host_says_so_in_a_line_and_serves_once_they_are_free(tmp_path: Path) -> None:
    """At its open-files limit asyncio logged 'socket.accept() out of system resource' with a traceback
    for each of the backlog's 2,048 accept attempts per tick: 55,000 tracebacks (22 MB of stderr) in
    five seconds. Now one line says it; the connections over the limit wait and are served."""
    import socket

    crash_dir = tmp_path / "crash"
    crash_dir.mkdir()
    with host_process(tmp_path / "host.duckdb", crash_dir, "--request-timeout", "1",
                      open_files=(150, 150)) as (proc, url):
        port = int(url.rsplit(":", 1)[1])
        idle = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(200)]  # past the limit
        reply = httpx.post(f"{url}/v1/turns", json={"message": "over the limit", "session_id": "fd"}, timeout=60)
        assert reply.status_code == 200 and reply.json()["answer"] == "echo #1: over the limit", reply.text
        for conn in idle:
            with conn:
                conn.recv(1)  # each is closed by the host once its request timeout passes (b"")
        assert httpx.get(f"{url}/v1/health", timeout=10).json()["status"] == "ok"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    lines = proc.stderr_lines  # type: ignore[attr-defined]
    said = [line for line in lines if line.startswith("cannot accept connections: Too many open files")]
    assert said and len(said) <= 2, lines[:20]  # once per 10 s
    assert not [line for line in lines if "Traceback" in line or "out of system resource" in line], lines[:20]


def test_serve_raises_its_open_files_limit_to_the_hard_limit(tmp_path: Path) -> None:
    """Each connection costs a descriptor: a soft limit of 1,024 under a far higher hard one left the
    host refusing connections past about a thousand at once."""
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard < 256:
        pytest.skip("needs a finite hard limit on open files of 256 or more")
    crash_dir = tmp_path / "crash"
    crash_dir.mkdir()
    with host_process(tmp_path / "host.duckdb", crash_dir, open_files=(128, hard)) as (proc, _url):
        limits = Path(f"/proc/{proc.pid}/limits").read_text()
        soft_now = next(line.split()[3] for line in limits.splitlines() if line.startswith("Max open files"))
        assert int(soft_now) == hard, limits

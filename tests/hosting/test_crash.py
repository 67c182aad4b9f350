"""A real crash: `footprint serve --durability sync` killed with SIGKILL mid-turn, then restarted.

The session continues with no lost or duplicated message: the tool that finished before the
crash is served from the store, the one in flight runs again (the documented caveat), and the
interrupted turn's answer lands in the conversation before the next message.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path

import httpx2 as httpx

from hosting import DuckDBSessions
from tests.hosting.hostkit import host_process
from tracer import Store


def _wait_until(predicate, what: str, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_sigkill_mid_turn_then_restart_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    db, crash_dir = tmp_path / "host.duckdb", tmp_path / "crash"
    crash_dir.mkdir()
    log = crash_dir / "executions.log"

    with host_process(db, crash_dir) as (proc, url), httpx.Client(base_url=url, timeout=30) as http:
        first = http.post("/v1/turns", json={"message": "hello", "session_id": "alice"}).json()
        assert first["answer"] == "echo #1: hello"
        hanging = threading.Thread(
            target=lambda: _swallow(lambda: httpx.post(f"{url}/v1/turns", timeout=60,
                                                       json={"message": "do it", "session_id": "alice"})),
            daemon=True,
        )
        hanging.start()
        _wait_until(lambda: log.exists() and "wait" in log.read_text(), "the blocking tool to start")
        _wait_until(
            lambda: "call-note" in http.get("/v1/sessions/alice").json()["persisted_tool_results"],
            "the finished tool result to be persisted",
        )
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        hanging.join(timeout=30)

    (crash_dir / "go").touch()
    with host_process(db, crash_dir) as (proc, url), httpx.Client(base_url=url, timeout=30) as http:
        reply = http.post("/v1/turns", json={"message": "what now?", "session_id": "alice"}).json()
        assert reply["status"] == "answered", reply
        assert reply["recovered"]["status"] == "answered"
        assert reply["recovered"]["answer"] == "done: noted A, signalled"
        assert reply["answer"] == "echo #3: what now?"
        recovered_run = reply["recovered"]["run_id"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0

    # the note ran once; the call in flight at the crash ran again (the documented caveat)
    assert sorted(log.read_text().splitlines()) == ["note A", "wait", "wait"]
    store = Store.open(db)
    try:
        envelope = asyncio.run(_load(store))
        messages = [(m.item.kind, m.item.text) for m in envelope.conversation_obj().messages]
        assert [t for k, t in messages if k == "user"] == ["hello", "do it", "what now?"]
        assert [t for k, t in messages if k == "assistant"] == [
            "echo #1: hello", "done: noted A, signalled", "echo #3: what now?",
        ]
        results = [m.item.body["call_id"] for m in envelope.conversation_obj().messages if m.item.kind == "tool_result"]
        assert results == ["call-note", "call-wait"]
        assert envelope.turn is not None and envelope.turn["state"] == "done"
        run = store.load_run(recovered_run)
        assert run.run.status == "answered"
        assert [s.name for s in run.stages if s.kind == "tool" and s.attributes.get("served_from")] == ["note"]
    finally:
        store.close()


async def _load(store: Store):  # type: ignore[no-untyped-def]
    sessions = DuckDBSessions(store)
    try:
        envelope = await sessions.load("alice")
        assert envelope is not None
        return envelope
    finally:
        await sessions.close()


def _swallow(fn) -> None:  # type: ignore[no-untyped-def]
    try:
        fn()
    except httpx.HTTPError:
        pass  # the host died under this request: that is the point

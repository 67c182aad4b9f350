"""No zombie host: a store that fails fatally is reopened and the failed turn reported to its
caller; when it cannot be reopened, /health says so and the host stops (``footprint serve`` exits
non-zero) — it never answers 503 forever."""

from __future__ import annotations

from pathlib import Path

import duckdb
import httpx2 as httpx
import pytest

from hosting import DuckDBSessions, HostFailedError, SessionStoreError, create_app, standing_agent
from hosting.sessions import DuckDBPersistence
from tests.hosting.hostkit import make_agent
from tracer import Recorder, Store


def _break(sessions: DuckDBSessions) -> None:
    """What a fatal DuckDB error leaves: the connection unusable for every later statement."""
    persistence = sessions.persistence
    assert isinstance(persistence, DuckDBPersistence)
    persistence._con.close()  # the fault being injected


async def test_a_broken_session_file_is_reopened_and_only_the_failed_turn_fails(tmp_path: Path) -> None:
    sessions = DuckDBSessions(path=str(tmp_path / "sessions.duckdb"))
    host = standing_agent(agent_factory=make_agent, sessions=sessions, durability="sync", close_sessions=True)
    app = create_app(host)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://host") as client:
        assert (await client.post("/v1/turns", json={"message": "one", "session_id": "a"})).status_code == 200
        _break(sessions)
        failed = await client.post("/v1/turns", json={"message": "two", "session_id": "a"})
        assert failed.status_code == 503 and failed.json()["error"]["code"] == "store_error"
        for n in range(3):  # the store was reopened and the host goes on: never 503 forever
            reply = await client.post("/v1/turns", json={"message": f"again {n}", "session_id": "a"})
            assert reply.status_code == 200, reply.text
        assert sessions.healthy
        health = await client.get("/v1/health")
        assert health.status_code == 200 and health.json()["status"] == "ok"
    envelope = await sessions.load("a")
    assert envelope is not None
    users = [m.item.text for m in envelope.conversation_obj().messages if m.item.kind == "user"]
    assert users == ["one", "again 0", "again 1", "again 2"]  # the failed turn was not stored, nor answered
    await host.close()


async def test_a_store_that_cannot_be_reopened_fails_the_host_which_says_so(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "fp.duckdb")
    sessions = DuckDBSessions(store)  # in the recordings' database: only a new process can reopen it
    recorder = Recorder(store)
    host = standing_agent(agent_factory=lambda: make_agent(recorder=recorder), sessions=sessions,
                          recordings=store, durability="sync", close_sessions=True)
    stopped: list[bool] = []
    host.on_failed.append(lambda: stopped.append(True))
    app = create_app(host, close_host=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://host") as client:
        assert (await client.post("/v1/turns", json={"message": "one", "session_id": "a"})).status_code == 200
        _break(sessions)
        failed = await client.post("/v1/turns", json={"message": "two", "session_id": "a"})
        assert failed.status_code == 503
        health = await client.get("/v1/health")
        assert health.status_code == 503 and health.json()["status"] == "failed"
        assert "could not be reopened" in health.json()["failed"]
        refused = await client.post("/v1/turns", json={"message": "three", "session_id": "b"})
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "host_failed"
        assert "restarted" in refused.json()["error"]["message"]
    assert stopped == [True]  # footprint serve stops on this and exits non-zero
    with pytest.raises(SessionStoreError):
        await sessions.reopen()
    try:
        await host.close()
    except (SessionStoreError, duckdb.Error):
        pass
    store.close()


def test_serve_raises_when_the_host_failed() -> None:
    from hosting._serve import serve

    host = standing_agent(agent_factory=make_agent)
    host.failed = "the session store failed and could not be reopened: gone"
    host.on_failed.clear()
    with pytest.raises(HostFailedError, match="start it again"):
        serve(host, port=0, log_level="error", on_started=lambda server: setattr(server, "should_exit", True))

"""The same refusal everywhere: a store cut short is refused by every command, and left untouched;
every route that takes a session id checks it the same way."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2 as httpx
import pytest

from explorer.cli import main
from hosting import InMemorySessions, StandingAgent, create_app, standing_agent
from tests.hosting.hostkit import make_agent
from tracer import Recorder, Store


@pytest.fixture
def truncated(tmp_path: Path) -> Path:
    whole = tmp_path / "whole.duckdb"
    store = Store.open(whole)
    recorder = Recorder(store)
    import asyncio

    asyncio.run(make_agent(recorder=recorder).run("hello"))
    store.close()
    data = whole.read_bytes()
    cut = tmp_path / "cut.duckdb"
    cut.write_bytes(data[: len(data) // 2])
    return cut


@pytest.mark.parametrize("command", [
    ["runs"], ["sql", "SELECT count(*) FROM runs"], ["show", "last"], ["why", "last"],
    ["serve", "--port", "0"], ["serve", "--port", "0", "--sessions", "{db}"], ["explore"],
])
def test_every_command_refuses_a_truncated_store_the_same_way_and_leaves_it_untouched(
    truncated: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    before = hashlib.sha256(truncated.read_bytes()).hexdigest()
    args = [a.replace("{db}", str(truncated)) for a in command]
    if "{db}" not in command:
        args += ["--db", str(truncated)]
    with pytest.raises(SystemExit) as exited:
        main(args)
    out, err = capsys.readouterr()
    assert exited.value.code == 1, (out, err)
    assert err.startswith("footprint: error: ") and "is truncated or corrupt" in err and "left untouched" in err, err
    assert "Traceback" not in err
    assert hashlib.sha256(truncated.read_bytes()).hexdigest() == before
    assert not (truncated.parent / (truncated.name + ".wal")).exists()


@pytest.fixture
async def host() -> AsyncIterator[StandingAgent]:
    h = standing_agent(agent_factory=make_agent, sessions=InMemorySessions())
    yield h
    await h.close()


ROUTES = [("GET", "/v1/sessions/{}"), ("DELETE", "/v1/sessions/{}"), ("GET", "/v1/sessions/{}/runs"),
          ("POST", "/v1/sessions/{}/decision"), ("GET", "/v1/recordings/sessions/{}/runs")]


@pytest.mark.parametrize(("method", "route"), ROUTES)
@pytest.mark.parametrize("bad", ["-starts-with-dash", "x" * 201, "has space", "semi;colon", "ünï"])
async def test_every_session_route_refuses_a_bad_id_the_same_way(
    host: StandingAgent, store: Store, method: str, route: str, bad: str
) -> None:
    app = create_app(host, recordings=store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://host") as client:
        reply = await client.request(method, route.format(bad), json={"decision": "yes"})
    assert reply.status_code == 400, reply.text
    assert "must be 1-200 letters, digits or" in reply.text

"""The same refusal everywhere: a store cut short is refused by every command, and left untouched;
every route that takes a session id checks it the same way."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

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


ROUTES = [("GET", "/v1/sessions/{}", None), ("DELETE", "/v1/sessions/{}", None),
          ("GET", "/v1/sessions/{}/runs", None), ("POST", "/v1/sessions/{}/decision", {"decision": "yes"}),
          ("GET", "/v1/recordings/sessions/{}/runs", None),
          ("POST", "/v1/turns", {"message": "hi", "session_id": "{}"}),
          ("POST", "/v1/turns", {"decision": "yes", "session_id": "{}"}),
          ("POST", "/v1/turns/stream", {"message": "hi", "session_id": "{}"}),
          ("POST", "/v1/durable/{}/steer", {"text": "x"}), ("POST", "/v1/durable/{}/send", {"text": "x"}),
          ("POST", "/v1/durable/{}/abort", None), ("POST", "/v1/durable/{}/compact", None),
          ("GET", "/v1/durable/{}", None), ("GET", "/v1/durable/{}/events", None),
          ("POST", "/api/agents/echo/chat", {"message": "hi", "session_id": "{}"})]


@pytest.fixture
async def every_route(host: StandingAgent, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    from agent.durable import InMemoryPersistence
    from agent.providers import FunctionModel
    from hosting import DurableHost
    from hosting.gateway import Gateway, GatewaySettings, InMemoryAgents

    model = FunctionModel(lambda r: "ok", name="echo")
    gateway = Gateway(InMemoryAgents(), settings=GatewaySettings({"echo": model}, "echo", "echo-1"),
                      sessions=InMemorySessions())
    durable = DurableHost(lambda session_id, persistence: None, InMemoryPersistence())  # type: ignore[arg-type,return-value]
    app = create_app(host, recordings=store, durable=durable, gateway=gateway)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://host") as client:
        yield client
    await gateway.close()


@pytest.mark.parametrize("bad", ["-starts-with-dash", "x" * 201, "has space", "semi;colon", "ünï", "", "ends-with-newline\n"])
async def test_every_session_route_refuses_a_bad_id_the_same_way(every_route: httpx.AsyncClient, bad: str) -> None:
    """In a path or in a body, a bad session id is one error: 422, naming the field and the rule."""
    for method, route, body in ROUTES:
        if "{}" in route and bad == "":
            continue  # an empty path segment is another route
        json_body = None if body is None else {k: v.replace("{}", bad) for k, v in body.items()}
        reply = await every_route.request(method, route.format(quote(bad, safe="")), json=json_body)
        assert reply.status_code == 422, (method, route, reply.text)
        error = reply.json()["error"]
        assert (error["code"], error["field"]) == ("invalid_request", "session_id"), (route, error)
        assert error["message"].startswith("session_id: session id "), (route, error)
        assert "must be 1-200 ASCII letters, digits or" in error["message"], (route, error)

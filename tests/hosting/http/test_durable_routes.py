"""The durable-session routes: steer, send, abort, compact, the queues, events over SSE, and a restart."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2 as httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.durable import (
    AgentProviders,
    DurableAgent,
    InferenceSettings,
    InMemoryPersistence,
    SessionPersistence,
)
from agent.providers import FunctionModel, ModelRequest
from hosting import DurableHost, RecordingsClient, create_app
from hosting._durable import agent_factory
from tests.hosting.hostkit import serve_in_thread


def factory(model: FunctionModel) -> Any:
    providers = AgentProviders().add("m", model, "test")

    def make(session_id: str, persistence: SessionPersistence) -> DurableAgent:
        return DurableAgent(session_id, providers=providers, provider="m", persistence=persistence)

    return make


def echo(request: ModelRequest) -> str:
    if "Summarise" in request.system_text():
        return "summary"
    return f"echo: {request.last_user_text()}"


async def client_for(durable: DurableHost) -> tuple[httpx.AsyncClient, Any]:
    app = create_app(durable=durable)
    lifespan = app.router.lifespan_context(app)
    await lifespan.__aenter__()
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://host"), lifespan


async def test_steer_send_and_the_queues_over_http() -> None:
    gate = asyncio.Event()

    async def slow(request: ModelRequest) -> str:
        await gate.wait()
        return echo(request)

    durable = DurableHost(factory(FunctionModel(slow)), InMemoryPersistence())
    client, lifespan = await client_for(durable)
    try:
        first = await client.post("/v1/durable/chat-1/send", json={"text": "hello"})
        assert first.status_code == 202 and first.json()["queue"] == "send"
        steer = await client.post("/v1/durable/chat-1/steer", json={"text": "faster", "model": "big"})
        assert steer.status_code == 202 and steer.json()["key"].startswith("steering.")
        state = (await client.get("/v1/durable/chat-1")).json()
        assert state["busy"] and [m["text"] for m in state["queues"]["steering"]] == ["faster"]
        assert state["queues"]["steering"][0]["settings"] == {"model": "big"}
        assert (await client.get("/v1/durable")).json()["sessions"][0]["steering"] == 1
        gate.set()
        await durable.sessions["chat-1"].wait_for_idle()
        state = (await client.get("/v1/durable/chat-1")).json()
        assert state["queues"] == {"steering": [], "send": []} and state["messages"] == 4
        compacted = await client.post("/v1/durable/chat-1/compact")
        assert compacted.status_code == 200 and compacted.json()["messages"] == 1
        assert (await client.post("/v1/durable/chat-1/abort")).json() == {"session_id": "chat-1", "aborted": False}
    finally:
        await client.aclose()
        await lifespan.__aexit__(None, None, None)


@pytest.mark.parametrize("action", ["compact", "abort"])
async def test_compacting_or_aborting_a_session_never_stored_is_404_and_creates_nothing(action: str) -> None:
    durable = DurableHost(factory(FunctionModel(echo)), InMemoryPersistence())
    client, lifespan = await client_for(durable)
    try:
        reply = await client.post(f"/v1/durable/never-seen/{action}")
        assert reply.status_code == 404 and "never-seen" in reply.text, reply.text
        assert (await client.get("/v1/durable/never-seen")).status_code == 404  # still not there
    finally:
        await client.aclose()
        await lifespan.__aexit__(None, None, None)


@pytest.mark.parametrize("path, body, field, match", [
    ("/v1/durable/bad id/send", {"text": "x"}, "session_id",
     "session_id: session id 'bad id' must be 1-200 ASCII letters"),
    ("/v1/durable/ok/send", {"text": ""}, "text", "text: String should have at least 1 character"),
    ("/v1/durable/ok/send", {"text": "  "}, "text", "text: text must not be blank"),
    ("/v1/durable/ok/steer", {"text": "\n\t"}, "text", "text: text must not be blank"),
    ("/v1/durable/ok/send", {"text": "x", "effort": "huge"}, "effort", "effort: effort must be one of"),
    ("/v1/durable/ok/send", {"text": "x", "effort": "ultra"}, "effort", "effort: effort must be one of"),
    ("/v1/durable/ok/send", {"text": "x", "service_tier": "gold"}, "service_tier", "service_tier must be one of"),
    ("/v1/durable/ok/send", {"text": "x", "model": "  "}, "model", "the model setting must be a non-empty string"),
    ("/v1/durable/ok/send", {"text": "x", "provider": "nope"}, "provider",
     "provider: provider 'nope' is not registered in this session's providers (registered: m)"),
    ("/v1/durable/ok/steer", {"text": "x", "colour": "red"}, "colour", "colour: Extra inputs are not permitted"),
])
async def test_bad_requests_are_refused_naming_what_is_wrong(path: str, body: dict[str, Any], field: str,
                                                             match: str) -> None:
    """Every 422 is `invalid_request` naming its field, as on the rest of the API: a blank text, an
    unknown setting or provider were `http_error` with no field."""
    durable = DurableHost(factory(FunctionModel(echo)), InMemoryPersistence())
    client, lifespan = await client_for(durable)
    try:
        reply = await client.post(path, json=body)
        assert reply.status_code == 422, reply.text
        error = reply.json()["error"]
        assert (error["code"], error["field"]) == ("invalid_request", field), error
        assert match in error["message"], error
        assert durable.describe("ok")["queues"] == {"steering": [], "send": []}  # nothing was queued
    finally:
        await client.aclose()
        await lifespan.__aexit__(None, None, None)


def test_events_stream_as_server_sent_events() -> None:
    import threading

    durable = DurableHost(factory(FunctionModel(echo)), InMemoryPersistence())
    with serve_in_thread(create_app(durable=durable)) as base:
        seen: list[dict[str, Any]] = []
        subscribed = threading.Event()

        def listen() -> None:
            with httpx.Client(base_url=base, timeout=10) as client, client.stream(
                    "GET", "/v1/durable/s/events") as stream:
                for line in stream.iter_lines():
                    if line.startswith(": subscribed"):
                        subscribed.set()
                    if line.startswith("data: "):
                        seen.append(json.loads(line[6:]))
                        if seen[-1]["type"] == "TurnDone":
                            return

        listener = threading.Thread(target=listen)
        listener.start()
        assert subscribed.wait(10)
        assert httpx.post(f"{base}/v1/durable/s/send", json={"text": "stream me"}).status_code == 202
        listener.join(10)
        with RecordingsClient(base) as client:  # what the explorer's host panel reads
            assert client.durable_sessions() == [
                {"session_id": "s", "busy": False, "steering": 0, "send": 0, "pending_calls": 0}]
        types = [e["type"] for e in seen]
        assert types[0] == "MessageQueued" and "MessagesConsumed" in types and types[-1] == "TurnDone"
        assert seen[-1]["state"] == "answered" and seen[-1]["answer"] == "echo: stream me"


@settings(max_examples=10, deadline=None)
@given(ids=st.lists(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:@\-]{0,40}", fullmatch=True), min_size=1, max_size=8,
                    unique=True))
def test_listening_to_a_session_never_used_loads_nothing_and_leaves_nothing(ids: list[str]) -> None:
    """Each GET /v1/durable/{id}/events made a session and kept it loaded for the life of the process:
    every id a client listened to (a typo, a scan) was listed by GET /v1/durable, ~7 KB each."""
    durable = DurableHost(factory(FunctionModel(echo)), InMemoryPersistence())
    with serve_in_thread(create_app(durable=durable)) as base, httpx.Client(base_url=base, timeout=10) as client:
        for session_id in ids:
            with client.stream("GET", f"/v1/durable/{session_id}/events") as stream:
                assert stream.status_code == 200
                assert next(stream.iter_lines()).startswith(": subscribed")
        assert client.get("/v1/durable").json() == {"sessions": []}
        for session_id in ids:
            assert client.get(f"/v1/durable/{session_id}").status_code == 404  # still never stored
    assert durable.sessions == {}


async def test_sessions_with_unfinished_work_go_on_after_a_restart() -> None:
    persistence = InMemoryPersistence()
    never = asyncio.Event()

    async def stuck(request: ModelRequest) -> str:
        await never.wait()
        return "unreachable"

    first = DurableHost(factory(FunctionModel(stuck)), persistence)
    await first.queue("a", "send", "cut off", InferenceSettings())
    await first.queue("b", "send", "finished later", InferenceSettings())
    await asyncio.sleep(0.01)
    await first.close(grace=0)  # the shutdown aborts the turns; the messages stay owed
    second = DurableHost(factory(FunctionModel(echo)), persistence)
    client, lifespan = await client_for(second)  # its lifespan continues them
    try:
        for sid in ("a", "b"):
            await second.sessions[sid].wait_for_idle()
        assert [ci.text for ci in second.sessions["a"].history][-1] == "echo: cut off"
        assert [ci.text for ci in second.sessions["b"].history][-1] == "echo: finished later"
        await asyncio.sleep(0.05)
        assert await second.resume_unfinished() == []  # settled sessions left the index
    finally:
        await client.aclose()
        await lifespan.__aexit__(None, None, None)


async def test_describing_a_session_never_stored_is_404_naming_it() -> None:
    persistence = InMemoryPersistence()
    first = DurableHost(factory(FunctionModel(echo)), persistence)
    await first.queue("kept", "send", "hello", InferenceSettings())
    await first.sessions["kept"].wait_for_idle()
    await first.close()
    second = DurableHost(factory(FunctionModel(echo)), persistence)
    client, lifespan = await client_for(second)
    try:
        missing = await client.get("/v1/durable/kpet")
        assert missing.status_code == 404
        error = missing.json()["error"]
        assert (error["code"], error["session_id"]) == ("session_not_found", "kpet") and "'kpet'" in error["message"]
        stored = await client.get("/v1/durable/kept")  # stored by the first host, not loaded by this one
        assert stored.status_code == 200 and stored.json()["loaded"] is False
        assert "kpet" not in second.sessions  # asking did not create it
    finally:
        await client.aclose()
        await lifespan.__aexit__(None, None, None)


def test_a_client_of_a_host_without_durable_sessions_sees_none() -> None:
    from tracer import Store

    with serve_in_thread(create_app(recordings=Store.open(":memory:"))) as base, RecordingsClient(base) as client:
        assert client.durable_sessions() == []


async def test_agent_factory_shapes_sessions_like_the_served_agent() -> None:
    from agent import Agent, Tool
    from tracer import NullRecorder

    ping = Tool("ping", "Ping.", {"type": "object"}, lambda a: "pong")
    make = agent_factory(lambda recorder: Agent("helper", provider=FunctionModel(echo), persona="Be kind.",
                                                tools=[ping], recorder=recorder), NullRecorder())
    agent = make("s9", InMemoryPersistence())
    assert (agent.id, agent.state.instructions, [t.name for t in agent.state.tools]) == ("s9", "Be kind.", ["ping"])
    await agent.send("hi")
    await agent.wait_for_idle()
    assert agent.history[-1].text == "echo: hi"

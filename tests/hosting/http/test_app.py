"""The HTTP host in process: routes, auth, size limits, JSON errors for bad input, SSE, OpenAPI."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx2 as httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.providers import FunctionModel, ModelRequest, calls
from hosting import InMemorySessions, StandingAgent, create_app, standing_agent
from tests.hosting.hostkit import ask_tool, make_agent
from tracer import Recorder, Store

TOKEN = "s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _answer(request: ModelRequest) -> Any:
    text = request.last_user_text()
    if text == "ask me" and not any(ci.item.kind == "tool_result" for ci in request.context):
        return calls(("ask_person", {}))
    results = [ci.item.body["content"] for ci in request.context if ci.item.kind == "tool_result"]
    return f"you said {results[-1]}" if results and text == "ask me" else f"echo: {text}"


@pytest.fixture
async def host(store: Store) -> AsyncIterator[StandingAgent]:
    h = standing_agent(
        agent_factory=lambda: make_agent(FunctionModel(_answer), recorder=Recorder(store), tools=[ask_tool()]),
        sessions=InMemorySessions(), recordings=store,
    )
    yield h
    await h.close()


@pytest.fixture
async def client(host: StandingAgent) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(host, token=TOKEN, max_body_bytes=2048)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://host") as c:
        yield c


async def test_send_a_turn_and_list_the_sessions_runs(client: httpx.AsyncClient) -> None:
    reply = await client.post("/v1/turns", json={"message": "hello", "session_id": "alice"}, headers=AUTH)
    assert reply.status_code == 200
    body = reply.json()
    assert (body["status"], body["answer"], body["session_id"]) == ("answered", "echo: hello", "alice")
    runs = (await client.get("/v1/sessions/alice/runs", headers=AUTH)).json()["runs"]
    assert [r["id"] for r in runs] == [body["run_id"]]
    info = (await client.get("/v1/sessions/alice", headers=AUTH)).json()
    assert (info["status"], info["messages"], info["awaiting"]) == ("answered", 2, False)
    sessions = (await client.get("/v1/sessions", headers=AUTH)).json()["sessions"]
    assert [(s["session_id"], s["status"]) for s in sessions] == [("alice", "answered")]
    assert (await client.delete("/v1/sessions/alice", headers=AUTH)).json() == {"deleted": "alice"}
    assert (await client.get("/v1/sessions/alice", headers=AUTH)).status_code == 404


async def test_the_runs_of_a_session_never_seen_are_404_as_on_the_other_session_routes(
        client: httpx.AsyncClient) -> None:
    runs = await client.get("/v1/sessions/ghost/runs", headers=AUTH)
    info = await client.get("/v1/sessions/ghost", headers=AUTH)
    assert runs.status_code == info.status_code == 404, runs.text
    assert runs.json()["error"]["code"] == info.json()["error"]["code"] == "not_found"
    assert "'ghost'" in runs.json()["error"]["message"]
    # a session forgotten since still lists the runs recorded for it
    run_id = (await client.post("/v1/turns", json={"message": "hi", "session_id": "bob"}, headers=AUTH)).json()["run_id"]
    assert (await client.delete("/v1/sessions/bob", headers=AUTH)).status_code == 200
    after = await client.get("/v1/sessions/bob/runs", headers=AUTH)
    assert after.status_code == 200 and [r["id"] for r in after.json()["runs"]] == [run_id]


async def test_a_run_id_prefix_several_runs_start_with_is_409_saying_how_many(client: httpx.AsyncClient) -> None:
    for n in range(3):
        await client.post("/v1/turns", json={"message": f"m{n}", "session_id": f"s{n}"}, headers=AUTH)
    for path in ("/v1/recordings/runs/r-", "/v1/recordings/runs/r-/why", "/v1/recordings/runs/r-/snapshots?stages="):
        reply = await client.get(path, headers=AUTH)
        assert reply.status_code == 409, (path, reply.text)
        error = reply.json()["error"]
        assert (error["code"], error["id"], error["matches"]) == ("ambiguous_id", "r-", 3)
        assert "ambiguous" in error["message"] and "3 runs" in error["message"]


async def test_a_turn_id_reused_for_another_message_is_409_naming_it(client: httpx.AsyncClient) -> None:
    first = await client.post("/v1/turns", json={"message": "hello", "session_id": "eve", "turn_id": "t-7"},
                              headers=AUTH)
    reused = await client.post("/v1/turns", json={"message": "bye", "session_id": "eve", "turn_id": "t-7"},
                               headers=AUTH)
    assert reused.status_code == 409
    error = reused.json()["error"]
    assert (error["code"], error["session_id"]) == ("turn_id_reused", "eve") and "'t-7'" in error["message"]
    retry = await client.post("/v1/turns", json={"message": "hello", "session_id": "eve", "turn_id": "t-7"},
                              headers=AUTH)
    assert retry.status_code == 200 and retry.json()["replayed"] and retry.json()["run_id"] == first.json()["run_id"]


async def test_awaiting_is_a_reply_not_a_failure_and_the_decision_route_resumes(client: httpx.AsyncClient) -> None:
    paused = await client.post("/v1/turns", json={"message": "ask me", "session_id": "bob"}, headers=AUTH)
    assert paused.status_code == 200
    assert (paused.json()["status"], paused.json()["question"]) == ("awaiting", "Which day?")
    refused = await client.post("/v1/turns", json={"message": "hello?", "session_id": "bob"}, headers=AUTH)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "awaiting_decision"
    done = await client.post("/v1/sessions/bob/decision", json={"decision": "Friday"}, headers=AUTH)
    assert (done.status_code, done.json()["answer"]) == (200, "you said Friday")
    again = await client.post("/v1/sessions/bob/decision", json={"decision": "Friday"}, headers=AUTH)
    assert again.status_code == 409 and again.json()["error"]["code"] == "not_awaiting"


@pytest.mark.parametrize(("route", "body"), [
    ("/v1/sessions/ghost/decision", {"decision": "Friday"}),
    ("/v1/turns", {"session_id": "ghost", "decision": "Friday"}),
    ("/v1/turns/stream", {"session_id": "ghost", "decision": "Friday"}),
])
async def test_a_decision_for_a_session_that_is_not_stored_is_404_naming_it(
    client: httpx.AsyncClient, route: str, body: dict[str, str]
) -> None:
    reply = await client.post(route, json=body, headers=AUTH)
    assert reply.status_code == 404, reply.text
    error = reply.json()["error"]
    assert (error["code"], error["session_id"]) == ("session_not_found", "ghost")
    assert "no session 'ghost' is stored" in error["message"]
    assert (await client.get("/v1/sessions/ghost", headers=AUTH)).status_code == 404  # nothing was created


async def test_a_decision_in_the_turn_body_resumes_too(client: httpx.AsyncClient) -> None:
    await client.post("/v1/turns", json={"message": "ask me", "session_id": "carol"}, headers=AUTH)
    done = await client.post("/v1/turns", json={"session_id": "carol", "decision": "Monday"}, headers=AUTH)
    assert done.json()["answer"] == "you said Monday"


async def test_stream_sends_server_sent_events_ending_with_the_reply(client: httpx.AsyncClient) -> None:
    async with client.stream("POST", "/v1/turns/stream", json={"message": "hi", "session_id": "dan"},
                             headers=AUTH) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        raw = (await response.aread()).decode()
    events = [(block.split("\n")[0].removeprefix("event: "), json.loads(block.split("\n")[1].removeprefix("data: ")))
              for block in raw.strip().split("\n\n")]
    names = [name for name, _ in events]
    assert names[0] == "turn" and "text" in names and "inference" in names and names[-1] == "reply"
    assert events[-1][1]["answer"] == "echo: hi"
    assert "".join(data["text"] for name, data in events if name == "text") == "echo: hi"


async def test_a_refused_stream_is_a_plain_json_error(client: httpx.AsyncClient, host: StandingAgent) -> None:
    await client.post("/v1/turns", json={"message": "ask me", "session_id": "erin"}, headers=AUTH)
    refused = await client.post("/v1/turns/stream", json={"message": "x", "session_id": "erin"}, headers=AUTH)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "awaiting_decision"


@pytest.mark.parametrize(
    ("body", "code", "needle"),
    [
        ('{"message": "hi"', "invalid_json", "not valid JSON"),
        (b'{"message": "caf\xe9"}', "invalid_json", "not UTF-8 (byte 0xe9 at position 16)"),
        pytest.param('{"message": "hi", "decision": ' + "[" * 1_000 + "]" * 1_000 + "}", "invalid_json",
                     "nested too deeply", id="nested-1000-deep"),
        ("[1, 2]", "invalid_request", "the body must be a JSON object, not an array"),
        ("null", "invalid_request", "the body must be a JSON object, not null"),
        ("", "invalid_request", "the request needs a JSON object body"),
        ('{"message": ""}', "invalid_request", "non-empty `message`"),
        ('{"message": 5}', "invalid_request", "message"),
        ('{"message": "hi", "session_id": "has spaces"}', "invalid_request", "session_id"),
        ('{"message": "hi", "session_id": "日本"}', "invalid_request", "'日本' must be 1-200 ASCII letters"),
        pytest.param('{"message": "hi", "session_id": "' + "a" * 1500 + '"}', "invalid_request",
                     "session id '" + "a" * 79 + "…' must be", id="long-session-id"),  # cut, and saying so
        ('{"message": "hi", "colour": "red"}', "invalid_request", "colour"),
        ('{"decision": "yes"}', "invalid_request", "session_id"),
    ],
)
async def test_bad_input_gets_a_clear_4xx_json_error(client: httpx.AsyncClient, body: str | bytes, code: str,
                                                    needle: str) -> None:
    response = await client.post("/v1/turns", content=body, headers={**AUTH, "Content-Type": "application/json"})
    assert 400 <= response.status_code < 500
    error = response.json()["error"]
    assert error["code"] == code and needle in error["message"]
    assert "Traceback" not in response.text


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(digits=st.integers(4_301, 20_000), field=st.sampled_from(["message", "session_id", "decision", "turn_id"]),
       route=st.sampled_from(["/v1/turns", "/v1/turns/stream", "/v1/sessions/bob/decision"]))
async def test_an_integer_too_long_to_read_is_invalid_json_saying_so(host: StandingAgent, digits: int, field: str,
                                                                    route: str) -> None:
    """Python reads at most 4,300 digits of an integer: a longer one was 400 `bad_request`, "There
    was an error parsing the body", which said neither what nor where."""
    app = create_app(host, close_host=False)
    body = '{"' + field + '": ' + "7" * digits + "}"
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://host") as client:
        response = await client.post(route, content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_json" and "an integer of more than 4300 digits" in error["message"], error


_control = st.characters(categories=["Cc"])
_printable = st.text(st.characters(exclude_categories=["Cc", "Cs"]), min_size=1, max_size=20)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(before=_printable | st.just(""), control=_control, after=_printable | st.just(""),
       route=st.sampled_from(["/v1/turns", "/v1/sessions/bob/decision"]))
async def test_a_turn_id_with_a_control_character_is_refused_before_anything_runs(
        client: httpx.AsyncClient, before: str, control: str, after: str, route: str) -> None:
    """A NUL in a turn_id cannot be stored in PostgreSQL: the turn ran and its save failed with a 503
    store_error. Every body that takes a turn_id refuses any control character in it as a 422."""
    body = {"turn_id": before + control + after, "decision": "yes"}
    if route == "/v1/turns":
        body = {"message": "hi", "session_id": "bob", "turn_id": body["turn_id"]}
    response = await client.post(route, json=body, headers=AUTH)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request" and error["message"].startswith("turn_id: turn id ")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turn_id=_printable)
async def test_any_printable_turn_id_names_a_turn(client: httpx.AsyncClient, turn_id: str) -> None:
    first = await client.post("/v1/turns", json={"message": "hi", "session_id": "pat", "turn_id": turn_id},
                              headers=AUTH)
    again = await client.post("/v1/turns", json={"message": "hi", "session_id": "pat", "turn_id": turn_id},
                              headers=AUTH)
    assert first.status_code == again.status_code == 200, first.text
    assert again.json()["run_id"] == first.json()["run_id"]


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
@pytest.mark.parametrize("route", ["/v1/turns", "/v1/turns/stream", "/v1/sessions/s/decision"])
async def test_a_body_not_sent_as_json_is_415_saying_so(client: httpx.AsyncClient, content_type: str | None,
                                                       route: str) -> None:
    headers = {**AUTH, **({"Content-Type": content_type} if content_type else {})}
    response = await client.post(route, content=b'{"message": "hi", "decision": "yes"}', headers=headers)
    assert response.status_code == 415, response.text
    error = response.json()["error"]
    assert error["code"] == "unsupported_media_type"
    assert error["message"].startswith("send the body as a JSON object with Content-Type: application/json (")
    assert (repr(content_type) if content_type else "it had none") in error["message"]
    fine = await client.post("/v1/turns", content=b'{"message": "hi"}',
                             headers={**AUTH, "Content-Type": "application/json; charset=utf-8"})
    assert fine.status_code == 200


@pytest.mark.parametrize("charset", ["latin-1", "ISO-8859-1", '"utf-16"', "koi8-r"])
@pytest.mark.parametrize("route", ["/v1/turns", "/v1/turns/stream", "/v1/sessions/s/decision"])
async def test_a_json_body_declared_in_a_charset_other_than_utf8_is_415_naming_it(
        client: httpx.AsyncClient, charset: str, route: str) -> None:
    """`application/json; charset=latin-1` was accepted and the body read as UTF-8 (what it said it
    was not): the host reads UTF-8 JSON only, and says so."""
    body = b'{"message": "hi", "session_id": "lat", "decision": "yes"}'
    declared = {**AUTH, "Content-Type": f"application/json; charset={charset}"}
    response = await client.post(route, content=body, headers=declared)
    assert response.status_code == 415, response.text
    error = response.json()["error"]
    assert error["code"] == "unsupported_media_type"
    assert f"declared charset={charset.strip(chr(34))}: send it as UTF-8" in error["message"], error
    for fine in ("application/json; charset=UTF-8", "application/json;charset=utf8", "application/json"):
        answered = await client.post("/v1/turns", content=b'{"message": "hi"}', headers={**AUTH, "Content-Type": fine})
        assert answered.status_code == 200, (fine, answered.text)


@pytest.mark.parametrize("route", ["/v1/turns", "/v1/sessions/bob/decision"])
async def test_an_empty_turn_id_is_refused_in_words(client: httpx.AsyncClient, route: str) -> None:
    """It said "Value should have at least 1 item after validation, not 0"."""
    body = {"message": "hi", "session_id": "bob", "turn_id": ""} if route == "/v1/turns" else {"decision": "y",
                                                                                                "turn_id": ""}
    response = await client.post(route, json=body, headers=AUTH)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("invalid_request", "turn_id")
    assert error["message"] == ("turn_id: turn id must not be empty (give 1-200 characters naming the turn, or leave "
                                "turn_id out)")
    long = await client.post(route, json={**body, "turn_id": "t" * 201}, headers=AUTH)
    assert long.status_code == 422
    assert "turn_id: turn id is 201 characters; it must be 1-200" in long.json()["error"]["message"]


def test_no_error_status_is_answered_with_the_code_http_error() -> None:
    """A 422 a route raised itself (the durable routes' blank text, unknown setting) was `http_error`
    while pydantic's were `invalid_request`; every status now has a code a client can act on."""
    from http import HTTPStatus

    from hosting.http._errors import http_code

    codes = {status.value: http_code(status.value) for status in HTTPStatus if status.value >= 400}
    assert "http_error" not in codes.values()
    assert all(re.fullmatch(r"[a-z0-9_]+", code) for code in codes.values()), codes
    assert (codes[422], codes[408], codes[409], codes[502], codes[503]) == (
        "invalid_request", "request_timeout", "conflict", "bad_gateway", "service_unavailable")


async def test_the_openapi_spec_lists_every_end_a_reply_has(client: httpx.AsyncClient) -> None:
    """A reply may be `interrupted` (SIGTERM with --grace 0 mid-turn answers 200 with it)."""
    spec = (await client.get("/openapi.json")).json()
    reply = spec["components"]["schemas"]["TurnReplyModel"]["properties"]["status"]
    assert reply["enum"] == ["answered", "awaiting", "failed", "cancelled", "interrupted"]
    turn_id = spec["components"]["schemas"]["TurnRequest"]["properties"]["turn_id"]["anyOf"][0]
    assert (turn_id["minLength"], turn_id["maxLength"]) == (1, 200)


async def test_an_unknown_run_status_is_422_naming_the_ones_there_are(client: httpx.AsyncClient) -> None:
    """A typo (status=answerd) listed no runs, as if none had ended so."""
    await client.post("/v1/turns", json={"message": "hi", "session_id": "sam"}, headers=AUTH)
    response = await client.get("/v1/recordings/runs?status=answerd", headers=AUTH)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["field"] == "status" and "'answered'" in error["message"] and "'failed'" in error["message"]
    fine = await client.get("/v1/recordings/runs?status=answered", headers=AUTH)
    assert fine.status_code == 200 and fine.json()["total"] >= 1


@pytest.mark.parametrize(("query", "field"), [
    ("/v1/sessions?limit=-5", "limit"), ("/v1/sessions?limit=0", "limit"), ("/v1/sessions?limit=10001", "limit"),
    ("/v1/recordings/runs?offset=99999999999999999999", "offset"), ("/v1/recordings/runs?offset=-1", "offset"),
])
async def test_a_page_out_of_range_is_422_naming_it_never_clamped_or_500(client: httpx.AsyncClient, query: str,
                                                                        field: str) -> None:
    response = await client.get(query, headers=AUTH)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field


async def test_oversized_bodies_are_refused_with_413(client: httpx.AsyncClient) -> None:
    big = await client.post("/v1/turns", json={"message": "x" * 5000, "session_id": "f"}, headers=AUTH)
    assert big.status_code == 413 and big.json()["error"]["code"] == "too_large"

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted while it streams
        yield b'{"message": "'
        for _ in range(10):
            yield b"x" * 500
        yield b'"}'

    streamed = await client.post("/v1/turns", content=chunks(), headers={**AUTH, "Content-Type": "application/json"})
    assert streamed.status_code == 413


async def test_a_body_declared_over_the_limit_is_413_before_it_is_sent(host: StandingAgent) -> None:
    """A Content-Length over the limit is answered at once, on the turn's fast path too: it waited
    for bytes the client may never send."""
    app = create_app(host, token=TOKEN, max_body_bytes=2048)
    sent: list[dict[str, Any]] = []

    async def never() -> dict[str, Any]:
        await asyncio.Event().wait()
        return {}

    async def send(message: Any) -> None:
        sent.append(message)

    for route in ("/v1/turns", "/v1/turns/stream"):
        sent.clear()

        scope = {"type": "http", "method": "POST", "path": route, "raw_path": route.encode(), "query_string": b"",
                 "root_path": "", "scheme": "http", "server": ("host", 80), "client": ("c", 1), "http_version": "1.1",
                 "headers": [(b"authorization", AUTH["Authorization"].encode()),
                             (b"content-type", b"application/json"), (b"content-length", b"99999999999")]}
        await asyncio.wait_for(app(scope, never, send), timeout=10)
        assert sent[0]["status"] == 413, route
        assert json.loads(sent[1]["body"])["error"]["code"] == "too_large"


async def test_the_token_is_required_except_for_health(client: httpx.AsyncClient) -> None:
    assert (await client.get("/v1/health")).json()["status"] == "ok"
    for method, path in (("GET", "/v1/sessions"), ("GET", "/v1/recordings/runs"), ("POST", "/v1/turns")):
        response = await client.request(method, path, json={"message": "hi"})
        assert response.status_code == 401 and response.json()["error"]["code"] == "unauthorized"
        assert response.headers["www-authenticate"] == "Bearer"
    wrong = await client.get("/v1/sessions", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401


async def test_an_unreadable_session_is_a_json_500_naming_it(client: httpx.AsyncClient, host: StandingAgent) -> None:
    await client.post("/v1/turns", json={"message": "hello", "session_id": "gus"}, headers=AUTH)
    await host.sessions.write_raw("gus", "garbage")  # type: ignore[attr-defined]
    response = await client.post("/v1/turns", json={"message": "hello", "session_id": "gus"}, headers=AUTH)
    assert response.status_code == 500
    assert response.json()["error"] == {"code": "unreadable_session", "session_id": "gus",
                                        "message": response.json()["error"]["message"]}
    assert "'gus'" in response.json()["error"]["message"]


async def test_a_second_turn_while_one_runs_is_409(store: Store) -> None:
    release = asyncio.Event()

    async def slow(request: ModelRequest) -> str:
        await release.wait()
        return "slow"

    h = standing_agent(agent_factory=lambda: make_agent(FunctionModel(slow)))
    app = create_app(h, recordings=store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://host") as c:
        first = asyncio.ensure_future(c.post("/v1/turns", json={"message": "a", "session_id": "s"}))
        while not h.running_sessions():
            await asyncio.sleep(0.01)
        busy = await c.post("/v1/turns", json={"message": "b", "session_id": "s"})
        assert busy.status_code == 409 and busy.json()["error"]["code"] == "session_busy"
        release.set()
        assert (await first).json()["answer"] == "slow"
    await h.close()


async def test_the_openapi_spec_lists_every_route(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    assert {"/v1/turns", "/v1/turns/stream", "/v1/sessions", "/v1/sessions/{session_id}/decision",
            "/v1/sessions/{session_id}/runs", "/v1/recordings/runs", "/v1/recordings/runs/{run_id}",
            "/v1/recordings/runs/{run_id}/why", "/v1/health"} <= set(spec["paths"])
    assert "TurnRequest" in spec["components"]["schemas"]


async def test_the_openapi_spec_describes_the_error_body_the_host_sends(client: httpx.AsyncClient) -> None:
    """The spec said a 422 is FastAPI's {"detail": [...]} and named no other error; every error is
    {"error": {"code", "message", ...}} (a client generated from the spec could not read one)."""
    spec = (await client.get("/openapi.json")).json()
    schemas = spec["components"]["schemas"]
    assert "HTTPValidationError" not in schemas
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            for status in ("4XX", "5XX"):
                content = operation["responses"][status]["content"]["application/json"]
                assert content["schema"] == {"$ref": "#/components/schemas/ErrorReply"}, (method, path, status)
    error = schemas[schemas["ErrorReply"]["properties"]["error"]["$ref"].rsplit("/", 1)[-1]]
    assert set(error["required"]) == {"code", "message"}
    sent = (await client.get("/v1/recordings/runs?limit=-1", headers=AUTH)).json()
    assert set(sent) == set(schemas["ErrorReply"]["properties"]) and set(sent["error"]) <= set(error["properties"])


async def test_recordings_routes_answer_404_for_unknown_runs(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/recordings/runs/r-nope", headers=AUTH)
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    bad = await client.get("/v1/recordings/runs?limit=-1", headers=AUTH)
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_request"


@pytest.mark.parametrize("traced", [False, True])
async def test_turns_take_the_fast_path_unless_fastapi_traces_requests(
    host: StandingAgent, monkeypatch: pytest.MonkeyPatch, traced: bool
) -> None:
    """The fast path skips FastAPI's middleware, telemetry included: while FastAPI's OpenTelemetry
    instrumentation is on, a turn goes through the full app instead (and gets the same reply)."""
    from fastapi.telemetry._asgi import NativeTelemetry

    monkeypatch.setattr(NativeTelemetry, "enabled", lambda self: traced)
    app = create_app(host, token=TOKEN)
    fast, seen = app.turn_fast_path, []
    assert fast is not None

    async def counting(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["path"])
        await fast(scope, receive, send)

    app.turn_fast_path = counting  # type: ignore[assignment]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://host") as c:
        reply = await c.post("/v1/turns", json={"message": "hi", "session_id": "tess"}, headers=AUTH)
        assert (reply.status_code, reply.json()["answer"]) == (200, "echo: hi")
        assert (await c.get("/v1/health")).status_code == 200
    assert seen == ([] if traced else ["/v1/turns"])


@pytest.mark.parametrize(("method", "route", "broken"), [("GET", "/v1/sessions", "sessions_overview"),
                                                       ("POST", "/v1/turns", "handle")])
async def test_an_internal_error_is_answered_and_logged_once(host: StandingAgent, client: httpx.AsyncClient,
                                                            caplog: pytest.LogCaptureFixture, monkeypatch: Any,
                                                            method: str, route: str, broken: str) -> None:
    async def fail(*_: Any, **__: Any) -> Any:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(host, broken, fail)
    with caplog.at_level(logging.ERROR):
        # the transport raises what the app raises again: what a server then logs a second time
        reply = await client.request(method, route, json={"message": "hi", "session_id": "zoe"}, headers=AUTH)
    assert reply.status_code == 500 and reply.json()["error"]["code"] == "internal_error"
    logged = [r for r in caplog.records if "kaboom" in r.getMessage() or (r.exc_info and "kaboom" in str(r.exc_info[1]))]
    assert len(logged) == 1 and f"{method} {route}" in logged[0].getMessage()


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
_bodies = st.dictionaries(
    st.sampled_from(["message", "session_id", "decision", "turn_id"]) | st.text(max_size=10),
    st.text(max_size=40) | _json_values, max_size=5,
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=_bodies | _json_values, route=st.sampled_from(["/v1/turns", "/v1/turns/stream", "/v1/sessions/{}/decision"]),
       session=st.text(max_size=20))
async def test_any_json_body_gets_an_answer_or_a_json_4xx_never_a_500(
        client: httpx.AsyncClient, body: Any, route: str, session: str) -> None:
    """Whatever JSON a client sends to a route that takes a turn, the host answers it (200) or refuses it
    with its JSON error and a 4xx: never a 500, never a traceback."""
    from urllib.parse import quote

    path = route.format(quote(session, safe="") or "x")
    response = await client.post(path, json=body, headers=AUTH)
    assert response.status_code == 200 or 400 <= response.status_code < 500, (path, body, response.text)
    if response.status_code != 200:
        error = response.json()["error"]
        assert isinstance(error["code"], str) and isinstance(error["message"], str) and error["message"]
    assert "Traceback" not in response.text


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(segment=st.text("abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=30))
async def test_an_unknown_route_or_method_is_named_in_the_error(client: httpx.AsyncClient, segment: str) -> None:
    """A path no route has answered "Not Found", a wrong method "Method Not Allowed": neither said which."""
    missing = await client.get(f"/v1/nowhere/{segment}", headers=AUTH)
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == f"no route GET /v1/nowhere/{segment}: the routes are listed in /openapi.json"
    wrong = await client.put("/v1/turns", headers=AUTH)
    assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
    assert wrong.json()["error"]["message"] == "/v1/turns does not take PUT; it takes POST"
    # a path two routes share: the Allow header (and the message) name both (Starlette's named the first)
    shared = await client.options(f"/v1/sessions/{segment}", headers=AUTH)
    assert shared.status_code == 405 and shared.headers["allow"] == "DELETE, GET", shared.headers
    assert shared.json()["error"]["message"].endswith("does not take OPTIONS; it takes DELETE, GET")

"""A credential pasted where the host keeps text as given: ids, names, and the errors that quote them.

A message's credentials are masked before anything keeps it; an id cannot be (it names the
session, the turn, the user or the agent in the store, in replies and in URLs), so one that looks
like a key is refused, naming the field, and nothing is stored under it. The texts of a stored
agent are masked like its prompt, and an error never quotes back what it refuses unmasked.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import httpx2 as httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.providers import FunctionModel
from hosting import InMemorySessions, StandingAgent, create_app, standing_agent
from hosting.gateway import Gateway, GatewaySettings, InMemoryAgents
from hosting.http._models import _HOST_TOKENS
from tests.hosting.hostkit import make_agent

_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_LOWER = "abcdefghijklmnopqrstuvwxyz0123456789"


def _token(prefix: str, alphabet: str, size: int) -> st.SearchStrategy[str]:
    return st.text(alphabet, min_size=size, max_size=size).map(lambda body: prefix + body)


# credential shapes made only of the characters an id may hold (letters, digits, . _ : @ -)
_id_credentials = st.one_of(
    _token("sk-proj-", _ALNUM + "_-", 40),
    _token("sk-", _ALNUM, 32),
    st.sampled_from(["ghp_", "gho_", "ghs_"]).flatmap(lambda p: _token(p, _ALNUM, 36)),
    _token("github_pat_", _ALNUM + "_", 82),
    st.sampled_from(["xoxb-", "xoxp-"]).flatmap(lambda p: _token(p, _ALNUM + "-", 40)),
    st.sampled_from(["AKIA", "ASIA"]).flatmap(lambda p: _token(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)),
    _token("AIza", _ALNUM + "_-", 35),
    st.tuples(_token("eyJ", _ALNUM, 20), _token("eyJ", _ALNUM, 30), st.text(_ALNUM, max_size=40)).map(".".join),
)
# lowercase ones, for the agent id ([a-z0-9_-])
_lower_credentials = st.one_of(_token("sk-", _LOWER, 24), _token("sk-proj-", _LOWER + "_-", 40),
                               _token("xoxb-", _LOWER, 30))


def _answer(request: Any) -> str:
    return f"echo: {request.last_user_text()}"


@pytest.fixture
async def host() -> AsyncIterator[StandingAgent]:
    h = standing_agent(agent_factory=lambda: make_agent(FunctionModel(_answer)), sessions=InMemorySessions())
    yield h
    await h.close()


@pytest.fixture
async def gateway() -> AsyncIterator[Gateway]:
    gw = Gateway(InMemoryAgents(), settings=GatewaySettings({"echo": FunctionModel(_answer, name="echo")}, "echo"),
                 sessions=InMemorySessions())
    await gw.start()
    yield gw
    await gw.close()


@pytest.fixture
async def client(host: StandingAgent, gateway: Gateway) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(host, gateway=gateway, close_host=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://host") as c:
        await c.post("/api/agents", json={"id": "helper", "name": "Helper"})
        yield c


def _requests(key: str) -> list[tuple[str, str, dict[str, Any] | None, str]]:
    """Every place an id is taken: (method, path, body, the field the refusal names)."""
    k = quote(key, safe="")
    return [
        ("POST", "/v1/turns", {"message": "hi", "session_id": key}, "session_id"),
        ("POST", "/v1/turns", {"message": "hi", "session_id": "s1", "turn_id": key}, "turn_id"),
        ("POST", "/v1/turns", {"message": "hi", "turn_id": f"retry of {key}"}, "turn_id"),
        ("POST", "/v1/turns/stream", {"message": "hi", "session_id": key}, "session_id"),
        ("POST", f"/v1/sessions/{k}/decision", {"decision": "yes"}, "session_id"),
        ("GET", f"/v1/sessions/{k}", None, "session_id"),
        ("DELETE", f"/v1/sessions/{k}", None, "session_id"),
        ("POST", "/api/agents/helper/chat", {"message": "hi", "session_id": key}, "session_id"),
        ("POST", "/api/agents/helper/chat", {"message": "hi", "user_id": key}, "user_id"),
        ("POST", "/api/agents/helper/chat", {"message": "hi", "turn_id": key}, "turn_id"),
        ("PUT", f"/api/memory/{k}/fact/city", {"text": "Berlin"}, "user_id"),
        ("PUT", f"/api/memory/alice/fact/{k}", {"text": "Berlin"}, "name"),
        ("POST", "/api/agents", {"name": "Model", "model": key}, "model"),
        ("POST", "/api/agents", {"name": "Provider", "provider": key}, "provider"),
        ("PATCH", "/api/agents/helper", {"model": key}, "model"),
    ]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=_id_credentials)
async def test_an_id_that_looks_like_a_credential_is_refused_naming_the_field_and_nothing_is_kept(
        client: httpx.AsyncClient, host: StandingAgent, gateway: Gateway, key: str) -> None:
    """A session id 'sk-proj-...' was accepted: the key was stored as the session's name (fp_session_head,
    fp_run) and sent back in every reply; a turn_id was stored as a value key; a memory record name too."""
    agents = [a.id for a in await gateway.repository.list()]
    for method, path, body, field in _requests(key):
        response = await client.request(method, path, json=body)
        assert response.status_code == 422, (method, path, field, response.text)
        error = response.json()["error"]
        assert error.get("field") == field or error["message"].startswith(f"{field}:"), (path, error)
        assert "looks like a credential" in error["message"], (path, error)
        assert key not in response.text, (path, response.text)
    assert await host.sessions.list() == [] and await gateway.sessions.list() == []
    assert await gateway.memory.records("alice") == []
    assert [a.id for a in await gateway.repository.list()] == agents
    assert (await gateway.repository.get("helper")).model == "default"  # type: ignore[union-attr]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=_lower_credentials)
async def test_an_agent_id_that_looks_like_a_credential_is_refused(client: httpx.AsyncClient, key: str) -> None:
    response = await client.post("/api/agents", json={"id": key, "name": "Keyed"})
    assert response.status_code == 422 and response.json()["error"]["field"] == "id", response.text
    assert key not in response.text


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(word=st.text(_ALNUM, min_size=1, max_size=12), number=st.integers(0, 10**9))
async def test_ordinary_ids_are_still_taken(client: httpx.AsyncClient, word: str, number: int) -> None:
    """The refusal is for credentials only: words, numbers, e-mail addresses, UUIDs and hex ids pass."""
    for session_id in (f"{word}-{number}", f"{word}@example.com", str(uuid.uuid4()), uuid.uuid4().hex,
                       f"user:{word}.{number}"):
        reply = await client.post("/v1/turns", json={"message": "hi", "session_id": session_id,
                                                     "turn_id": f"{word} {number}"})
        assert reply.status_code == 200 and reply.json()["session_id"] == session_id, reply.text


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=_id_credentials, junk=st.sampled_from([" x", "/", "\u00e9", "!", " and more"]))
async def test_a_refused_value_is_never_quoted_back_unmasked(client: httpx.AsyncClient, key: str, junk: str) -> None:
    """A 422's message was masked but its `details` quoted the refused value whole: a session id
    'sk-... x' (a key and a space) came back with the key in the reply."""
    bad = key + junk
    for path, body in (("/v1/turns", {"message": "hi", "session_id": bad}),
                       ("/v1/turns", {"message": "hi", "turn_id": bad + "\x01"}),
                       ("/api/agents/helper/chat", {"message": "hi", "user_id": bad})):
        response = await client.post(path, json=body)
        assert response.status_code == 422, response.text
        assert key not in response.text, response.text
        assert "[REDACTED]" in json.dumps(response.json()["error"].get("details", [])) or \
            "details" not in response.json()["error"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=_id_credentials)
async def test_the_texts_of_a_stored_agent_are_masked_like_its_prompt(client: httpx.AsyncClient, gateway: Gateway,
                                                                     key: str) -> None:
    """The name, category and trigger keywords of a stored agent kept a pasted key as given."""
    created = await client.post("/api/agents", json={"name": f"Agent {key}", "category": f"team {key}",
                                                     "triggers": [f"use {key}"]})
    assert created.status_code == 201, created.text
    agent_id = created.json()["id"]
    patched = await client.patch(f"/api/agents/{agent_id}", json={"category": key})
    listed = await client.get("/api/agents")
    for reply in (created, patched, listed):
        assert reply.status_code in (200, 201), reply.text
        assert key not in reply.text and key.lower() not in reply.text, reply.text
    stored = await gateway.repository.get(agent_id)
    assert stored is not None and key not in json.dumps(stored.definition())
    assert stored.name.startswith("Agent ") and stored.config.category == "[REDACTED]"
    await client.delete(f"/api/agents/{agent_id}")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(token=st.text(_ALNUM + "-", min_size=8, max_size=30).filter(lambda t: t[0].isalnum() and t not in "plain-session"),
       around=st.sampled_from(["{}", "user-{}", "{}.2"]))
async def test_the_hosts_own_token_is_refused_as_an_id_whatever_it_looks_like(
        host: StandingAgent, gateway: Gateway, token: str, around: str) -> None:
    """`serve --token letmein-please` and a session id 'letmein-please': the token was stored as the
    session's name, exported with every span and listed to every client. (Session and turn ids;
    a user id, a record name or a model name holding it is refused only when it looks like a key.)"""
    app = create_app(host, gateway=gateway, close_host=False, token=token)
    auth = {"Authorization": f"Bearer {token}"}
    key = around.format(token)
    try:
        await _refused_as_ids(app, auth, key, token)
    finally:
        _HOST_TOKENS.discard(token)  # the registry is the process's: later tests' ids must not hold it
    assert [s.session_id for s in await host.sessions.list()] == ["plain-session"]


async def _refused_as_ids(app: Any, auth: dict[str, str], key: str, token: str) -> None:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://host", headers=auth) as c:
        await c.post("/api/agents", json={"id": "helper", "name": "Helper"})
        for method, path, body, field in _requests(key):
            if field not in ("session_id", "turn_id"):
                continue  # the other ids are refused by the default policy's patterns only
            response = await c.request(method, path, json=body)
            assert response.status_code == 422, (method, path, field, response.text)
            assert "holds this host's bearer token" in response.json()["error"]["message"], (path, response.text)
            assert token not in response.text, (path, response.text)
        assert (await c.post("/v1/turns", json={"message": "hi", "session_id": "plain-session"})).status_code == 200

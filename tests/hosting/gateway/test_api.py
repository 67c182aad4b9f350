"""The /api/agents and /api/memory routes: good input, bad input (clear 4xx JSON errors), auth, OpenAPI."""

from __future__ import annotations

from typing import Any

import httpx2 as httpx
import pytest

from agent._personal import USER_PATTERN
from hosting.gateway import Gateway
from hosting.gateway._definition import ID_PATTERN

NEW = {"name": "Helper", "systemPrompt": "You help.", "provider": "default", "model": "default",
       "maxTokens": 1000, "temperature": 0.5, "maxTurns": 5, "maxToolCalls": 10, "tools": ["lookup"],
       "toolGroups": ["files"]}


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"} and body["error"]["message"], body
    return dict(body["error"])


async def test_create_read_list_patch_delete(client: httpx.AsyncClient, gateway: Gateway) -> None:
    created = await client.post("/api/agents", json=NEW)
    assert created.status_code == 201
    agent = created.json()
    assert agent["id"].startswith("agt-") and agent["systemPrompt"] == "You help."
    assert agent["config"]["tools"] == ["lookup"] and agent["config"]["toolGroups"] == ["files"]
    assert gateway.cached() == []  # creation stores only

    assert (await client.get(f"/api/agents/{agent['id']}")).json() == agent
    listed = (await client.get("/api/agents")).json()
    assert listed["total"] == 3 and [a["name"] for a in listed["agents"]] == ["Code Agent", "Helper", "Research Agent"]

    patched = await client.patch(f"/api/agents/{agent['id']}", json={"systemPrompt": "You help a lot.",
                                                                     "temperature": 1.5})
    assert patched.status_code == 200
    assert (patched.json()["systemPrompt"], patched.json()["config"]["temperature"]) == ("You help a lot.", 1.5)
    assert patched.json()["config"]["maxTurns"] == 5 and patched.json()["updatedAt"] > agent["updatedAt"]

    assert (await client.delete(f"/api/agents/{agent['id']}")).json() == {"deleted": agent["id"]}
    assert (await client.get(f"/api/agents/{agent['id']}")).status_code == 404


@pytest.mark.parametrize(
    ("body", "status", "code", "field", "message"),
    [
        ({**NEW, "name": ""}, 422, "invalid_agent", "name", "at least 1 character"),
        ({**NEW, "name": "   "}, 422, "invalid_agent", "name", "at least 1 character"),
        ({**NEW, "temperature": 3}, 422, "invalid_agent", "temperature", "less than or equal to 2"),
        ({**NEW, "maxTurns": 0}, 422, "invalid_agent", "maxTurns", "greater than or equal to 1"),
        ({**NEW, "maxToolCalls": "many"}, 422, "invalid_agent", "maxToolCalls", "valid integer"),
        # JSON's false read as 0 (found by schemathesis): maxToolCalls false stored an agent with no tool calls
        ({**NEW, "maxToolCalls": False}, 422, "invalid_agent", "maxToolCalls", "must be a number, not false"),
        ({**NEW, "maxTokens": True}, 422, "invalid_agent", "maxTokens", "must be a number, not true"),
        ({**NEW, "temperature": False}, 422, "invalid_agent", "temperature", "must be a number, not false"),
        ({**NEW, "tools": ["lookup", "nope"]}, 422, "invalid_agent", "tools[1]", "no tool 'nope' is registered"),
        ({**NEW, "tools": ["bad name!"]}, 422, "invalid_agent", "tools", "must be 1-64 ASCII letters"),
        ({**NEW, "toolGroups": ["web"]}, 422, "invalid_agent", "toolGroups[0]", "no tool group or category 'web'; known: files"),
        ({**NEW, "provider": "anthropic"}, 422, "invalid_agent", "provider", "not a provider of this host"),
        ({**NEW, "colour": "blue"}, 422, "invalid_agent", "colour", "not a field of an agent definition"),
        # what GET returns, sent back: its config goes at the top level, and the times are the store's
        ({**NEW, "config": {"temperature": 0.2}}, 422, "invalid_agent", "config",
         "give its fields (maxTokens, temperature, ...) at the top level"),
        ({**NEW, "createdAt": 1.0}, 422, "invalid_agent", "createdAt", "set by the store"),
        ({**NEW, "id": "Bad Id"}, 422, "invalid_agent", "id", "should match pattern"),
        ({**NEW, "name": "research agent"}, 409, "agent_conflict", None, "taken by agent 'research'"),
        ({**NEW, "id": "coder", "name": "X"}, 409, "agent_conflict", None, "id 'coder' already exists"),
        ([NEW], 422, "invalid_request", None, "the body must be a JSON object, not an array"),
    ],
)
async def test_a_bad_definition_gets_a_4xx_naming_the_field(
    client: httpx.AsyncClient, body: Any, status: int, code: str, field: str | None, message: str
) -> None:
    response = await client.post("/api/agents", json=body)

    assert response.status_code == status, response.text
    error = error_of(response)
    assert error["code"] == code and message in error["message"]
    assert error.get("field") == field


async def test_bad_requests_on_every_route(client: httpx.AsyncClient) -> None:
    not_json = await client.post("/api/agents", content=b"{nope", headers={"Content-Type": "application/json"})
    assert not_json.status_code == 400 and error_of(not_json)["code"] == "invalid_json"
    for method, path in (("GET", "/api/agents/ghost"), ("PATCH", "/api/agents/ghost"),
                         ("DELETE", "/api/agents/ghost"), ("POST", "/api/agents/ghost/chat"),
                         ("GET", "/api/agents/ghost/runs")):
        body = {"message": "hi"} if path.endswith("chat") else ({} if method == "PATCH" else None)
        response = await client.request(method, path, json=body)
        assert response.status_code == 404, (method, path, response.text)
        assert error_of(response)["code"] == "agent_not_found" and "'ghost'" in error_of(response)["message"]
    bad_id = await client.get("/api/agents/NOT%20AN%20ID")
    assert bad_id.status_code == 422 and error_of(bad_id)["field"] == "agent_id"
    rename = await client.patch("/api/agents/research", json={"id": "other"})
    assert rename.status_code == 422 and error_of(rename)["field"] == "id"
    invalid = await client.patch("/api/agents/research", json={"maxTokens": -1})
    assert invalid.status_code == 422 and error_of(invalid)["field"] == "maxTokens"
    taken = await client.patch("/api/agents/research", json={"name": "code agent"})
    assert taken.status_code == 409
    empty = await client.post("/api/agents/research/chat", json={"message": "  "})
    assert empty.status_code == 422 and error_of(empty)["field"] == "message"
    orphan = await client.post("/api/agents/research/chat", json={"decision": "yes"})
    assert orphan.status_code == 422 and error_of(orphan)["field"] == "decision"
    session = await client.post("/api/agents/research/chat", json={"message": "hi", "session_id": "a b"})
    assert session.status_code == 422 and error_of(session)["field"] == "session_id"
    assert error_of(session)["message"].startswith("session_id: session id 'a b' must be")
    ghost = await client.post("/api/agents/research/chat", json={"decision": "yes", "session_id": "ghost"})
    assert ghost.status_code == 404 and error_of(ghost)["code"] == "session_not_found"
    assert "no session 'ghost' is stored" in error_of(ghost)["message"]
    extra = await client.post("/api/agents/research/chat", json={"message": "hi", "agent": "x"})
    assert extra.status_code == 422
    assert (await client.post("/api/agents/select", json={})).status_code == 422
    for query in ("limit=-1", "limit=0", "offset=-3", "limit=many"):  # refused like the recordings' pages, not clamped
        page = await client.get(f"/api/agents?{query}")
        assert page.status_code == 422, (query, page.text)
    assert (await client.get("/api/agents/research/runs?limit=0")).status_code == 422


@pytest.mark.recorded
async def test_chat_goes_through_the_standing_host(client: httpx.AsyncClient, gateway: Gateway) -> None:
    first = await client.post("/api/agents/research/chat", json={"message": "hello", "session_id": "s1"})
    again = await client.post("/api/agents/research/chat", json={"message": "more", "session_id": "s1"})
    fresh = await client.post("/api/agents/research/chat", json={"message": "new"})

    assert first.status_code == 200, first.text
    assert first.json()["answer"] == "[You research things.] hello"
    assert (first.json()["session_id"], first.json()["agent_id"], first.json()["status"]) == ("s1", "research",
                                                                                              "answered")
    assert again.json()["session_id"] == "s1"
    assert fresh.json()["session_id"] and fresh.json()["session_id"] != "s1"
    stored = await gateway.sessions.load("research:-:s1")
    assert stored is not None and stored.message_count == 4  # two turns, kept by the host
    runs = (await client.get("/api/agents/research/runs")).json()["runs"]
    assert [r["input"] for r in runs] == ["new", "more", "hello"]
    assert all("agent:research" in r["labels"] for r in runs)


async def test_resync_and_select(client: httpx.AsyncClient) -> None:
    report = (await client.post("/api/agents/resync")).json()
    assert report == {"created": [], "updated": [], "unchanged": ["research", "coder"], "kept": []}

    chosen = (await client.post("/api/agents/select", json={"message": "Can you find papers on bees?"})).json()
    assert chosen["agent"]["id"] == "research" and chosen["matched"] == ["find papers"]
    assert (await client.post("/api/agents/select", json={"message": "hello"})).json() == {"agent": None,
                                                                                          "matched": []}


async def test_a_credential_put_in_personal_memory_is_masked_in_the_store_and_the_replies(
    client: httpx.AsyncClient,
) -> None:
    """A record's text went to the repository and back in every reply as it was sent, an API key with it."""
    key, password = "sk-proj-" + "Qw3rTy6uIo9p" * 4, "hunter2-mellon"
    put = await client.put("/api/memory/alice/fact/wifi",
                           json={"text": f"router key {key}, password={password}"})
    posted = await client.post("/api/memory/alice/memory", json={"text": f"Authorization: Bearer {key}"})
    listed = await client.get("/api/memory/alice")
    for reply in (put, posted, listed):
        assert reply.status_code in (200, 201) and key not in reply.text and password not in reply.text, reply.text
    assert "router key [REDACTED], [REDACTED]" in put.text


async def test_a_credential_in_an_agent_definition_is_masked_in_the_store_and_the_replies(
    client: httpx.AsyncClient,
) -> None:
    """A system prompt or description holding a key was kept and returned as it was sent."""
    key = "sk-proj-" + "Zx8cVb7nMl6k" * 4
    created = await client.post("/api/agents", json={"name": "Leaky", "systemPrompt": f"Use the key {key}.",
                                                     "description": f"calls with password=hunter2-{key[-6:]}"})
    patched = await client.patch(f"/api/agents/{created.json()['id']}", json={"systemPrompt": f"Key: {key}"})
    listed = await client.get("/api/agents")
    for reply in (created, patched, listed):
        assert reply.status_code in (200, 201) and key not in reply.text and "hunter2" not in reply.text, reply.text
    assert created.json()["systemPrompt"] == "Use the key [REDACTED]."


async def test_personal_memory_routes(client: httpx.AsyncClient) -> None:
    put = await client.put("/api/memory/alice/fact/home_city", json={"text": "Lives in Berlin."})
    goal = await client.post("/api/memory/alice/goal", json={"text": "Run a marathon"})
    assert put.status_code == 200 and put.json()["source"] == "personal:alice/fact/home_city"
    assert goal.status_code == 201 and goal.json()["key"].startswith("goal/")

    listed = (await client.get("/api/memory/alice")).json()
    assert [r["key"] for r in listed["records"]] == ["fact/home_city", goal.json()["key"]]
    chat = await client.post("/api/agents/research/chat", json={"message": "hi", "user_id": "alice"})
    assert "Run a marathon" in chat.json()["answer"]  # the goal comes right after the base prompt

    bad_kind = await client.put("/api/memory/alice/secret/x", json={"text": "x"})
    assert bad_kind.status_code == 422 and error_of(bad_kind) == {
        "code": "invalid_memory_record", "field": "kind",
        "message": error_of(bad_kind)["message"]} and "secret" in error_of(bad_kind)["message"]
    bad_level = await client.put("/api/memory/alice/autonomy_level/autonomy_level", json={"text": "wild"})
    assert bad_level.status_code == 422 and error_of(bad_level)["field"] == "text"
    assert (await client.put("/api/memory/bad%20user/fact/x", json={"text": "x"})).status_code == 422
    assert (await client.delete("/api/memory/alice/fact/home_city")).json() == {"deleted": "fact/home_city"}
    gone = await client.delete("/api/memory/alice/fact/home_city")
    assert gone.status_code == 404 and error_of(gone)["code"] == "not_found"


@pytest.mark.parametrize("bad", ["bad user", "-dash", "x" * 101, "ünï"])
async def test_every_route_that_takes_a_user_id_refuses_a_bad_one_the_same_way(client: httpx.AsyncClient,
                                                                               bad: str) -> None:
    """In a path or in a chat body: 422, field user_id, what a user id is (GET and DELETE answered 200/404)."""
    requests = [("GET", f"/api/memory/{bad}", None), ("DELETE", f"/api/memory/{bad}/fact/x", None),
                ("PUT", f"/api/memory/{bad}/fact/x", {"text": "x"}), ("POST", f"/api/memory/{bad}/goal", {"text": "x"}),
                ("POST", "/api/agents/research/chat", {"message": "hi", "user_id": bad})]
    for method, path, body in requests:
        reply = await client.request(method, path, json=body)
        assert reply.status_code == 422, (method, path, reply.text)
        error = error_of(reply)
        assert error["field"] == "user_id", (path, error)
        assert error["message"].startswith("user_id: user id ") and "must be 1-100 ASCII letters, digits or" in error[
            "message"], (path, error)


async def test_every_route_wants_the_token_and_is_in_the_openapi_spec(client: httpx.AsyncClient) -> None:
    for method, path in (("GET", "/api/agents"), ("POST", "/api/agents/research/chat"), ("GET", "/api/memory/a")):
        response = await client.request(method, path, headers={"Authorization": "Bearer wrong"})
        assert response.status_code == 401 and error_of(response)["code"] == "unauthorized"
    spec = (await client.get("/openapi.json")).json()
    paths = spec["paths"]
    assert {"/api/agents", "/api/agents/{agent_id}", "/api/agents/resync", "/api/agents/select",
            "/api/agents/{agent_id}/chat", "/api/agents/{agent_id}/runs", "/api/memory/{user_id}",
            "/api/memory/{user_id}/{kind}/{name}"} <= set(paths)
    create = paths["/api/agents"]["post"]
    assert "systemPrompt" in create["requestBody"]["content"]["application/json"]["schema"]["properties"]
    assert create["security"]


async def test_a_nul_character_is_refused_for_every_store(client: httpx.AsyncClient) -> None:
    response = await client.post("/api/agents", json={**NEW, "systemPrompt": "a\u0000b"})

    assert response.status_code == 422
    assert error_of(response)["field"] == "systemPrompt" and "NUL" in error_of(response)["message"]


async def test_the_schema_of_a_change_requires_no_field(client: httpx.AsyncClient) -> None:
    """PATCH takes any subset of the fields: its published body schema said `name` was required."""
    paths = (await client.get("/openapi.json")).json()["paths"]
    create = paths["/api/agents"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    change = paths["/api/agents/{agent_id}"]["patch"]["requestBody"]["content"]["application/json"]["schema"]
    assert "name" in create["required"] and "required" not in change
    assert change["properties"] == create["properties"]


async def test_a_405_lists_the_methods_of_the_concrete_path_not_of_a_template_it_also_fits(
        client: httpx.AsyncClient) -> None:
    """/api/agents/resync fits /api/agents/{agent_id} too; OpenAPI means the concrete path."""
    resync = await client.options("/api/agents/resync")
    assert resync.status_code == 405 and resync.headers["allow"] == "POST", resync.headers
    one = await client.put("/api/agents/research")
    assert one.status_code == 405 and one.headers["allow"] == "DELETE, GET, PATCH", one.headers
    assert error_of(one)["message"] == "/api/agents/research does not take PUT; it takes DELETE, GET, PATCH"


async def test_path_ids_publish_the_pattern_they_are_checked_against(client: httpx.AsyncClient) -> None:
    """A fuzzer (or a client generator) reading the schema sends ids the host takes."""
    paths = (await client.get("/openapi.json")).json()["paths"]
    [agent_id] = [p for p in paths["/api/agents/{agent_id}"]["get"]["parameters"] if p["name"] == "agent_id"]
    assert agent_id["schema"]["pattern"] == ID_PATTERN
    memory = next(ops for path, ops in paths.items() if path.startswith("/api/memory/{user_id}"))
    [user_id] = [p for op in memory.values() for p in op.get("parameters", []) if p["name"] == "user_id"][:1]
    assert user_id["schema"]["pattern"] == USER_PATTERN.pattern

"""Chatting with a persona: the agent it builds, the conversation it resumes, the runs it records."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agent.providers import FunctionModel, ModelRequest, Provider
from explorer import PersonaStore, SandboxChat, SandboxError
from explorer.sandbox import default_provider, sandbox_registry
from explorer.sandbox._personas import CONVERSATIONS
from tracer import ItemKind, RunFilter, Store


@pytest.fixture
def personas(tmp_path: Path) -> PersonaStore:
    store = Store.open(tmp_path / "c.duckdb")
    yield PersonaStore(store, known_tools=sandbox_registry().names())
    store.close()


async def test_a_chat_records_each_turn_and_resumes_where_it_stopped(
    personas: PersonaStore, echo_provider: Callable[[], Provider]
) -> None:
    ada = personas.create("Ada", "You are Ada.", tools=["check_availability"])
    chat = SandboxChat(ada, personas, provider=echo_provider())
    assert not chat.resumed
    first = await chat.send("hello")
    assert first.answer == "echo: hello (message 1)"
    runs = personas.store.list_runs(RunFilter(session_id=ada.conversation_id))
    assert [(r.agent, r.input, r.status) for r in runs] == [("Ada", "hello", "answered")]

    again = SandboxChat(personas.get(ada.id), personas, provider=echo_provider())
    assert again.resumed and [line.text for line in again.history()] == ["hello", "echo: hello (message 1)"]
    assert (await again.send("more")).answer == "echo: more (message 2)"
    assert personas.store.count_runs(RunFilter(session_id=ada.conversation_id)) == 2


async def test_the_persona_text_disclosure_and_tools_reach_the_model(personas: PersonaStore) -> None:
    seen: list[ModelRequest] = []

    def model(request: ModelRequest) -> str:
        seen.append(request)
        return "ok"

    bob = personas.create("Bob", "You are Bob the builder.", discloses_ai=False, tools=["check_availability"])
    await SandboxChat(bob, personas, provider=FunctionModel(model)).send("hi")
    system = seen[0].system_text()
    assert "You are Bob the builder." in system
    assert [d["name"] for d in seen[0].tool_definitions()] == ["check_availability"]
    edited = personas.update(bob.id, persona="You are Bob, retired.")
    await SandboxChat(edited, personas, provider=FunctionModel(model)).send("and now?")
    assert "You are Bob, retired." in seen[1].system_text(), "an edited persona applies to a resumed chat"


async def test_the_fake_calendar_tool_answers_tool_calls(personas: PersonaStore) -> None:
    def model(request: ModelRequest) -> object:
        from agent.providers import calls

        results = [ci for ci in request.context if ci.item.kind == ItemKind.TOOL_RESULT]
        if not results:
            return calls(("check_availability", {"date": "tomorrow"}, "c1"))
        return f"slots: {results[-1].item.body['content']}"

    ada = personas.create("Ada", "x", tools=["check_availability"])
    result = await SandboxChat(ada, personas, provider=FunctionModel(model)).send("free tomorrow?")
    assert result.answer == 'slots: {"date": "tomorrow", "free": ["10:00", "15:30"]}'


def test_an_unreadable_conversation_stops_the_chat(personas: PersonaStore) -> None:
    ada = personas.create("Ada", "x")
    personas.kv.put("sandbox.conversation", ada.id, {"format": "footprint.conversation/1"})
    with pytest.raises(SandboxError, match="unreadable"):
        SandboxChat(ada, personas)


def test_without_a_key_the_chat_uses_an_offline_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    provider = default_provider()
    assert "offline" in provider.name or "demo" in provider.name


async def test_a_key_pasted_into_a_message_reaches_neither_the_model_nor_the_store(
    personas: PersonaStore, tmp_path: Path
) -> None:
    key = "sk-ABCDEFGHIJKLMNOPQRSTUVWX123"
    seen: list[str] = []

    def model(request: ModelRequest) -> str:
        seen.append(request.last_user_text())
        return f"you said: {request.last_user_text()}"

    ada = personas.create("Ada", "You are Ada.")
    chat = SandboxChat(ada, personas, provider=FunctionModel(model))
    result = await chat.send(f"hello, my key is {key}")
    assert key not in result.answer and key not in seen[0] and "[REDACTED]" in seen[0]
    personas.store.flush()
    saved = personas.kv.get(CONVERSATIONS, ada.id)
    assert saved is not None and key not in str(saved)
    resumed = SandboxChat(personas.get(ada.id), personas, provider=FunctionModel(model))
    assert all(key not in line.text for line in resumed.history())
    personas.store.close()
    assert key.encode() not in (tmp_path / "c.duckdb").read_bytes()

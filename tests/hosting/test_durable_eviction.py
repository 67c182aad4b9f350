"""A host keeps at most ``max_loaded`` idle durable sessions loaded; one it let go is loaded again
from the persistence by its next message, its whole history intact.

Before, every session a host had steered or sent to stayed loaded until the host stopped (~7 KB
each before its history): a host serving many conversations grew with their number.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.durable import AgentProviders, DurableAgent, InMemoryPersistence, SessionPersistence
from agent.providers import FunctionModel, ModelRequest
from hosting import DurableHost
from hosting._durable import DEFAULT_MAX_LOADED

SESSIONS = [f"chat-{n}" for n in range(8)]


class Model:
    """Answers every request, noting the user messages each session's request held."""

    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    async def __call__(self, request: ModelRequest) -> str:
        users = [m["content"] for m in request.chat_messages() if m["role"] == "user"]
        self.seen.append(users)
        await asyncio.sleep(0)
        return f"ok {users[-1]}"


def host(model: Model, max_loaded: int) -> DurableHost:
    providers = AgentProviders().add("m", FunctionModel(model), "test")

    def make(session_id: str, persistence: SessionPersistence) -> DurableAgent:
        return DurableAgent(session_id, providers=providers, provider="m", persistence=persistence)

    return DurableHost(make, InMemoryPersistence(), max_loaded=max_loaded)


async def settle(durable: DurableHost) -> None:
    """Until every loaded session is idle and the host's own settle work is done."""
    for _ in range(100):
        await asyncio.gather(*(a.wait_for_idle() for a in list(durable.sessions.values())))
        await asyncio.gather(*list(durable._tasks), return_exceptions=True)
        if not durable._tasks and not any(a.busy for a in durable.sessions.values()):
            return
    raise AssertionError("the host did not settle")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(max_loaded=st.integers(1, 4),
       rounds=st.lists(st.lists(st.sampled_from(SESSIONS), min_size=1, max_size=4), min_size=1, max_size=8))
async def test_idle_sessions_beyond_the_limit_are_let_go_and_come_back_whole(
        max_loaded: int, rounds: list[list[str]]) -> None:
    model = Model()
    durable = host(model, max_loaded)
    sent: dict[str, list[str]] = {}
    try:
        for number, ids in enumerate(rounds):
            # several sessions at once (the same one twice: both messages join its conversation)
            keys = await asyncio.gather(*(durable.queue(sid, "send", f"{sid}/{number}.{i}", _settings())
                                          for i, sid in enumerate(ids)))
            assert all(keys)
            for i, sid in enumerate(ids):
                sent.setdefault(sid, []).append(f"{sid}/{number}.{i}")
            await settle(durable)
            assert len(durable.sessions) <= max_loaded, list(durable.sessions)
        for users in model.seen:  # a request holds one session's messages, in the order sent
            sid = users[-1].split("/")[0]
            assert all(u.startswith(sid + "/") for u in users), users
            assert users == sent[sid][:len(users)], (users, sent[sid])
        for sid, texts in sent.items():  # and the last request of each held all of them
            last = [users for users in model.seen if users[-1].startswith(sid + "/")][-1]
            assert last == texts
    finally:
        await durable.close()


async def test_a_listener_hears_a_session_that_was_let_go_and_loaded_again() -> None:
    durable = host(Model(), max_loaded=1)
    events = durable.subscribe("chat-0")
    try:
        await durable.queue("chat-0", "send", "chat-0/first", _settings())
        await settle(durable)
        await durable.queue("chat-1", "send", "chat-1/other", _settings())
        await settle(durable)
        assert list(durable.sessions) == ["chat-1"]  # chat-0 was let go
        await durable.queue("chat-0", "send", "chat-0/second", _settings())
        await settle(durable)
        kinds = []
        while not events.empty():
            event = events.get_nowait()
            assert event is not None
            kinds.append((event["type"], event.get("text")))
        assert ("MessageQueued", "chat-0/first") in kinds and ("MessageQueued", "chat-0/second") in kinds
        assert ("InferenceFinished", "ok chat-0/second") in kinds  # answered by the reloaded session
        assert list(durable.sessions) == ["chat-0"] and durable.describe("chat-1")["loaded"] is False
    finally:
        await durable.close()


def test_the_limit_is_at_least_one() -> None:
    with pytest.raises(ValueError, match="max_loaded must be at least 1"):
        host(Model(), max_loaded=0)
    assert DEFAULT_MAX_LOADED == 1000


def _settings() -> Any:
    from agent.durable import InferenceSettings

    return InferenceSettings()

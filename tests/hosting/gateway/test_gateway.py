"""The gateway's lifecycle: lazy build, the cache, each invalidation rule, and a running turn never cut."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from agent import memory_record
from agent.providers import FunctionModel, ModelRequest
from hosting import SessionBusyError
from hosting.gateway import AgentDefinitionError, AgentNotFoundError, Gateway, GatewaySettings, InMemoryAgents
from hosting.gateway._definition import patched
from tests.hosting.gateway.conftest import base_prompt, lookup_tool
from tracer import Store


@pytest.mark.recorded
async def test_creation_stores_only_and_first_use_builds_once(gateway: Gateway, store: Store) -> None:
    record = await gateway.create({"name": "Lazy", "systemPrompt": "You are lazy."})
    assert gateway.builds == 0 and gateway.cached() == []

    first = await gateway.chat(record.id, "one", session_id="s")
    second = await gateway.chat(record.id, "two", session_id="s")

    assert (first.answer, second.answer) == ("[You are lazy.] one", "[You are lazy.] two")
    assert gateway.builds == 1 and gateway.cached() == [record.id]
    store.flush()
    inference = next(s for s in store.load_run(first.run_id or "").stages if s.kind == "inference")
    assert (inference.attributes["model"], inference.attributes["provider"]) == ("echo-1", "echo")


async def test_default_and_named_providers_models_and_tools_resolve(gateway: Gateway) -> None:
    named = await gateway.create({"name": "Named", "provider": "other", "model": "big-2", "maxTokens": 77})
    coder = await gateway.instance("coder")
    research = await gateway.instance("research")
    live = await gateway.instance(named.id)

    assert (coder.provider, coder.model, coder.tools) == ("echo", "echo-1", ["read_file", "write_file"])
    assert research.tools == ["lookup"]
    assert (live.provider, live.model) == ("other", "big-2")
    reply = await gateway.chat(named.id, "hi")
    assert reply.answer == "other: hi"
    agent = live.host.pool.slots()[0].agent if live.host.pool and live.host.pool.slots() else None
    assert agent is not None and (agent.settings.model, agent.settings.max_tokens) == ("big-2", 77)


async def test_patch_and_delete_invalidate_the_agent(gateway: Gateway) -> None:
    await gateway.chat("research", "hi", session_id="s")
    await gateway.chat("coder", "hi", session_id="s")

    await gateway.update("research", {"systemPrompt": "You research carefully."})
    assert gateway.cached() == ["coder"]
    reply = await gateway.chat("research", "again", session_id="s")  # the same session: the new prompt
    assert reply.answer == "[You research carefully.] again" and gateway.builds == 3

    await gateway.delete("coder")
    assert gateway.cached() == ["research"]
    with pytest.raises(AgentNotFoundError):
        await gateway.chat("coder", "hi")


async def test_a_tool_or_tool_group_change_invalidates_every_agent(gateway: Gateway) -> None:
    await gateway.chat("research", "hi")
    await gateway.chat("coder", "hi")

    gateway.register_tool(lookup_tool("search"))
    assert gateway.cached() == []
    await gateway.chat("research", "hi")
    gateway.define_tool_group("files", ["read_file", "search"])
    assert gateway.cached() == []
    assert (await gateway.instance("coder")).tools == ["read_file", "search"]
    with pytest.raises(Exception, match="not in the registry"):
        gateway.define_tool_group("web", ["nope"])

    async def real_search(arguments: dict[str, Any]) -> str:
        return "the plugin's answer"

    gateway.replace_executor("search", real_search)  # a plugin replacing a core stub
    assert gateway.cached() == []
    gateway.unregister_tool("lookup")
    with pytest.raises(AgentDefinitionError, match="tool 'lookup' is not in the registry"):
        await gateway.instance("research")


async def test_a_running_turn_is_never_cut_by_an_invalidation() -> None:
    release = asyncio.Event()
    started = asyncio.Event()

    async def slow(request: ModelRequest) -> str:
        if request.last_user_text() == "slow":
            started.set()
            await release.wait()
        return f"[{base_prompt(request)}] {request.last_user_text()}"

    gateway = Gateway(InMemoryAgents(), settings=GatewaySettings({"m": FunctionModel(slow)}, "m"))
    record = await gateway.create({"name": "Slow", "systemPrompt": "Old prompt."})
    running = asyncio.ensure_future(gateway.chat(record.id, "slow", session_id="a"))
    await started.wait()

    await gateway.update(record.id, {"systemPrompt": "New prompt."})
    other = await gateway.chat(record.id, "quick", session_id="b")  # another session: the new definition
    with pytest.raises(SessionBusyError, match="previous definition"):
        await gateway.chat(record.id, "meanwhile", session_id="a")
    await gateway.delete(record.id)
    release.set()
    done = await running

    assert done.status == "answered" and done.answer == "[Old prompt.] slow"
    assert other.answer == "[New prompt.] quick"
    await gateway.close()


async def test_a_queued_turn_waits_for_the_retired_one() -> None:
    release, started = asyncio.Event(), asyncio.Event()

    async def slow(request: ModelRequest) -> str:
        if request.last_user_text() == "slow":
            started.set()
            await release.wait()
        return f"[{base_prompt(request)}] {request.last_user_text()}"

    gateway = Gateway(InMemoryAgents(), settings=GatewaySettings({"m": FunctionModel(slow)}, "m"),
                      on_concurrent_invoke="enqueue")
    record = await gateway.create({"name": "Slow", "systemPrompt": "Old prompt."})
    running = asyncio.ensure_future(gateway.chat(record.id, "slow", session_id="a"))
    await started.wait()
    await gateway.update(record.id, {"systemPrompt": "New prompt."})
    queued = asyncio.ensure_future(gateway.chat(record.id, "next", session_id="a"))
    await asyncio.sleep(0.05)
    assert not queued.done()
    release.set()

    assert (await running).answer == "[Old prompt.] slow"
    assert (await queued).answer == "[New prompt.] next"
    stored = await gateway.sessions.load(f"{record.id}:-:a")
    assert stored is not None and stored.message_count == 4  # both turns, in order
    await gateway.close()


async def test_a_shared_repository_picks_up_another_hosts_edit() -> None:
    repository = InMemoryAgents()
    repository.shared = True
    model = FunctionModel(lambda r: base_prompt(r))
    gateway = Gateway(repository, settings=GatewaySettings({"m": model}, "m"), revalidate_after=0.0)
    record = await gateway.create({"name": "Shared", "systemPrompt": "Version one."})
    assert (await gateway.chat(record.id, "hi")).answer == "Version one."

    await repository.update(patched(record, {"systemPrompt": "Version two."}))  # as another host would

    assert (await gateway.chat(record.id, "hi")).answer == "Version two."
    assert (await gateway.chat(record.id, "hi")).answer == "Version two." and gateway.builds == 2
    await gateway.close()


async def test_concurrent_first_uses_build_once(gateway: Gateway) -> None:
    replies = await asyncio.gather(*(gateway.chat("research", f"m{i}", session_id=f"s{i}") for i in range(8)))

    assert all(r.status == "answered" for r in replies) and gateway.builds == 1


async def test_random_operations_keep_answers_on_the_current_definition() -> None:
    """Hundreds of random creates, patches, deletes, tool changes and chats: every answer is made from
    the definition stored at that moment, and no deleted agent stays cached."""
    model = FunctionModel(lambda r: base_prompt(r))
    gateway = Gateway(InMemoryAgents(), settings=GatewaySettings({"m": model}, "m"))
    gateway.registry.register(lookup_tool())
    rng = random.Random(16)
    prompts: dict[str, str] = {}
    for step in range(300):
        action = rng.choice(["create", "patch", "delete", "tools", "chat", "chat", "chat"])
        ids = sorted(prompts)
        if action == "create" or not ids:
            record = await gateway.create({"name": f"agent {step}", "systemPrompt": f"Prompt {step}."})
            prompts[record.id] = f"Prompt {step}."
        elif action == "patch":
            target = rng.choice(ids)
            await gateway.update(target, {"systemPrompt": f"Prompt {step}.", "temperature": rng.random()})
            prompts[target] = f"Prompt {step}."
        elif action == "delete":
            target = rng.choice(ids)
            await gateway.delete(target)
            del prompts[target]
        elif action == "tools":
            gateway.register_tool(lookup_tool(), replace=True)
            assert gateway.cached() == []
        else:
            target = rng.choice(ids)
            reply = await gateway.chat(target, "hi", session_id=rng.choice(["a", "b"]))
            assert reply.answer == prompts[target], (step, target)
        assert set(gateway.cached()) <= set(prompts)
    await gateway.close()


def test_settings_name_a_default_that_exists() -> None:
    with pytest.raises(ValueError, match="default provider 'x' is not one of the providers"):
        GatewaySettings({"m": FunctionModel(lambda r: "")}, "x")


async def test_an_agent_whose_provider_left_the_host_fails_clearly() -> None:
    repository = InMemoryAgents()
    first = Gateway(repository, settings=GatewaySettings({"a": FunctionModel(lambda r: ""), "b": FunctionModel(
        lambda r: "")}, "a"))
    record = await first.create({"name": "Uses b", "provider": "b"})
    later: Any = Gateway(repository, settings=GatewaySettings({"a": FunctionModel(lambda r: "")}, "a"))

    with pytest.raises(AgentDefinitionError, match="names provider 'b', which this host does not have"):
        await later.chat(record.id, "hi")


async def test_the_time_section_is_in_the_users_time_zone(gateway: Gateway) -> None:
    seen: list[str] = []
    gateway.settings.providers["echo"].fn = lambda r: seen.append(r.system_text()) or "ok"  # type: ignore[attr-defined]
    await gateway.memory.put(memory_record("alice", "timezone", "Asia/Tokyo"))

    await gateway.chat("research", "hi", user_id="alice")
    await gateway.chat("research", "hi", user_id="bob")

    assert "Now: Monday 2026-01-05 18:00 (JST)" in seen[0] and "Time zone: Asia/Tokyo" in seen[0]
    assert "Now: Monday 2026-01-05 09:00 (UTC)" in seen[1]  # no time zone in bob's memory: the host's clock

"""MemoryInjector: a user's personal memory in the prompt, each piece naming its record, reachable by `why`."""

from __future__ import annotations

import pytest

from agent import Agent, InMemoryPersonalMemory, MemoryInjector, memory_record
from agent.providers import FunctionModel, ModelRequest
from tracer import ItemKind, Recorder, Store, why


@pytest.fixture
def memory() -> InMemoryPersonalMemory:
    return InMemoryPersonalMemory([
        memory_record("alice", "identity", "Alice Martin", name="name"),
        memory_record("alice", "fact", "Lives in Berlin.", name="home_city"),
        memory_record("alice", "communication_style", "short answers", name="length"),
        memory_record("alice", "interest", "jazz", name="jazz"),
        memory_record("alice", "timezone", "Europe/Berlin"),
        memory_record("alice", "goal", "Run a marathon in spring", name="marathon"),
        memory_record("alice", "goal", "Learn Italian", name="italian", status="done"),
        memory_record("alice", "memory", "Her dog is called Pixel.", name="dog", importance=0.9),
        memory_record("alice", "memory", "She disliked the hotel in Rome.", name="rome"),
        memory_record("alice", "custom_instruction", "Never book without asking.", name="booking"),
        memory_record("alice", "autonomy_level", "assisted"),
        memory_record("bob", "fact", "Lives in Lyon.", name="home_city"),
    ])



async def test_inject_memory_puts_each_record_in_its_section_naming_it(memory: InMemoryPersonalMemory) -> None:
    composed = await MemoryInjector(memory).inject_memory("You are a travel assistant.", "alice", "How is my dog?")

    pieces = [(p.section, p.origin_kind, p.source) for p in composed.pieces]
    assert pieces == [
        ("base", "prompt_section", "base"),
        ("memories", "prompt_section", "memories"),
        ("memories", "memory", "personal:alice/memory/dog"),  # Rome shares no word with the question
        ("goals", "prompt_section", "goals"),
        ("goals", "memory", "personal:alice/goal/marathon"),  # the finished goal is left out
        ("user_profile", "prompt_section", "user_profile"),
        ("user_profile", "memory", "personal:alice/identity/name"),
        ("user_profile", "memory", "personal:alice/fact/home_city"),
        ("user_profile", "memory", "personal:alice/communication_style/length"),
        ("user_profile", "memory", "personal:alice/interest/jazz"),
        ("user_profile", "memory", "personal:alice/timezone/timezone"),
        ("custom_instructions", "prompt_section", "custom_instructions"),
        ("custom_instructions", "memory", "personal:alice/custom_instruction/booking"),
        ("autonomy", "memory", "personal:alice/autonomy_level/autonomy_level"),
    ]
    assert "Her dog is called Pixel." in composed.text and "Rome" not in composed.text
    assert "## Autonomy: assisted" in composed.text
    assert (await MemoryInjector(memory).inject_memory("Base.", None)).text.startswith("Base.")


async def test_relevant_context_and_agent_prompt(memory: InMemoryPersonalMemory) -> None:
    injector = MemoryInjector(memory, max_memories=1)

    context = await injector.relevant_context("alice", "Which hotel did I stay at in Rome?")
    assert context == ("Relevant memories:\n- She disliked the hotel in Rome.\n\n"
                       "Active goals:\n- Run a marathon in spring")
    assert await injector.relevant_context("nobody", "anything") is None
    prompt = await injector.create_agent_prompt("Scout", "You plan trips.", "bob")
    assert prompt.startswith("You are Scout. You plan trips.") and "Lives in Lyon." in prompt
    assert "Alice" not in prompt


async def test_a_run_records_each_injected_record_and_why_reaches_it(
    memory: InMemoryPersonalMemory, store: Store
) -> None:
    def answer(request: ModelRequest) -> str:
        city = "Berlin" if "Lives in Berlin." in request.system_text() else "somewhere"
        return f"You live in {city}."

    agent = Agent("assistant", provider=FunctionModel(answer), facts=MemoryInjector(memory), user_id="alice",
                  recorder=Recorder(store))

    result = await agent.run("Where do I live?")
    store.flush()
    data = store.load_run(result.run_id)
    inference = next(s for s in data.stages if s.kind == "inference")
    sent = {e.origin.source for e in data.snapshot(inference.id) if e.origin.kind == "memory"}
    evidence = why(store, result.run_id)

    assert result.answer == "You live in Berlin."
    assert "personal:alice/fact/home_city" in sent and "personal:alice/goal/italian" not in sent
    memory_nodes = {n.origin.source for n in evidence.items() if n.item_kind == ItemKind.MEMORY and n.origin}
    assert "personal:alice/fact/home_city" in memory_nodes
    stage = next(s for s in data.stages if s.kind == "memory")
    assert stage.attributes["user_id"] == "alice"


async def test_memory_changes_reach_the_next_run(memory: InMemoryPersonalMemory) -> None:
    seen: list[str] = []
    agent = Agent("assistant", provider=FunctionModel(lambda r: seen.append(r.system_text()) or "ok"),
                  facts=MemoryInjector(memory), user_id="alice")

    await agent.run("hi")
    await memory.put(memory_record("alice", "fact", "Lives in Munich.", name="home_city"))
    await agent.run("hi")

    assert "Lives in Berlin." in seen[0] and "Lives in Munich." in seen[1] and "Berlin." not in seen[1]

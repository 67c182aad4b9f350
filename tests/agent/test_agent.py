"""The Agent: configuration, what a run returns, memory across runs, usage and cost."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent import (
    Agent,
    ConversationMemory,
    Fact,
    InMemoryFacts,
    ModelSettings,
    PromptComposer,
    Tool,
    ToolRegistry,
    tool,
)
from agent.errors import UserError
from agent.providers import FunctionModel, ModelRequest, ModelResponse, Price, ScriptedModel, Usage, calls


@tool
async def check_availability(date: str) -> dict[str, object]:
    """Free slots on a date.

    Args:
        date: the day, e.g. tomorrow
    """
    return {"date": date, "free": ["10:00", "15:30"]}


def fake_calendar() -> ToolRegistry:
    return ToolRegistry([check_availability])


async def test_run_returns_answer_status_run_id_and_usage() -> None:
    model = ScriptedModel([
        calls(("check_availability", {"date": "tomorrow"})),
        ModelResponse("You're free at 10:00.", usage=Usage(100, 20, 40), model="gpt-4o-mini"),
    ])
    agent = Agent("assistant", provider=model, tool_names=["check_availability"], registry=fake_calendar(),
                  prices={"gpt-4o-mini": Price(1.0, 2.0, 0.5)})
    result = await agent.run("What's my availability tomorrow?")
    assert result.ok and result.status == "answered" and result.answer == "You're free at 10:00."
    assert result.run_id.startswith("r-")
    assert result.turns == 2 and result.tool_calls == 1 and result.stop_reason == "answered"
    # the scripted first call estimates its usage; the second reports its own
    assert result.usage.input_tokens > 100 and result.usage.output_tokens > 20 and result.usage.cached_tokens == 40
    expected = ((result.usage.input_tokens - 40) * 1.0 + 40 * 0.5 + result.usage.output_tokens * 2.0) / 1e6
    assert result.cost == pytest.approx(expected)


async def test_persona_disclosure_and_settings_reach_the_model() -> None:
    model = ScriptedModel(["Hi, I'm Ada."])
    agent = Agent(
        "ada", provider=model, persona="You are Ada, a concierge.", discloses_ai=False,
        model=ModelSettings("gpt-4o", temperature=0.2, max_tokens=300, extra={"service_tier": "flex"}),
        custom_instructions=["Be brief."], clock=lambda: datetime(2025, 1, 2, 8, 0, tzinfo=UTC),
    )
    await agent.run("Who are you?")
    request = model.requests[0]
    system = request.system_text()
    assert system.startswith("You are Ada, a concierge.") and "do not volunteer that you are an AI" in system
    assert "- Be brief." in system and "Thursday 2025-01-02 08:00" in system
    assert request.settings() == {"model": "gpt-4o", "temperature": 0.2, "max_tokens": 300, "service_tier": "flex"}
    assert request.model == "gpt-4o"
    assert request.chat_messages()[-1] == {"role": "user", "content": "Who are you?"}


async def test_tools_from_the_registry_are_offered() -> None:
    model = ScriptedModel(["ok"])
    agent = Agent("a", provider=model, tool_names=["check_availability"], registry=fake_calendar())
    await agent.run("hi")
    definitions = model.requests[0].tool_definitions()
    assert [d["name"] for d in definitions] == ["check_availability"]
    assert definitions[0]["parameters"]["properties"]["date"]["description"] == "the day, e.g. tomorrow"


def test_configuration_errors_name_the_problem() -> None:
    model = ScriptedModel([])
    with pytest.raises(UserError, match="an agent needs a name"):
        Agent("", provider=model)
    with pytest.raises(UserError, match="need a registry"):
        Agent("a", provider=model, tool_names=["check_availability"])
    with pytest.raises(UserError, match="'calendar' is not in the registry"):
        Agent("a", provider=model, tool_names=["calendar"], registry=fake_calendar())
    with pytest.raises(UserError, match="more than one tool named check_availability"):
        Agent("a", provider=model, tools=[check_availability], tool_names=["check_availability"],
              registry=fake_calendar())
    with pytest.raises(UserError, match="max_turns must be >= 1"):
        Agent("a", provider=model, max_turns=0)
    with pytest.raises(UserError, match=r"agent a: provider must be a Provider .* not NoneType"):
        Agent("a", provider=None)  # type: ignore[arg-type]
    for length in (-5, 0, True, 2.5):
        with pytest.raises(UserError, match=f"max_length must be .* not {length!r}"):
            PromptComposer(max_length=length)  # type: ignore[arg-type]


@pytest.mark.parametrize("message", [b"hello", None, 123, {"text": "hi"}, ["hi"]])
async def test_a_message_that_is_not_text_is_refused_and_runs_nothing(message: object) -> None:
    model = ScriptedModel(["ok"])
    agent = Agent("a", provider=model)
    with pytest.raises(UserError, match=f"agent a: a message is text \\(str\\), not {type(message).__name__}"):
        await agent.run(message)  # type: ignore[arg-type]
    assert model.calls_made == 0 and not agent.busy
    assert (await agent.run("hi")).answer == "ok"  # the refusal left the agent as it was


async def test_memory_carries_the_conversation_across_runs() -> None:
    def model(request: ModelRequest) -> str:
        return f"you said {len([m for m in request.chat_messages() if m['role'] == 'user'])} things"

    memory = ConversationMemory()
    agent = Agent("a", provider=FunctionModel(model), memory=memory, conversation_id="c1")
    assert (await agent.run("one")).answer == "you said 1 things"
    assert (await agent.run("two")).answer == "you said 2 things"
    assert [m.item.kind for m in memory.require("c1").messages] == ["user", "assistant", "user", "assistant"]
    # a second agent on the same memory and conversation continues it
    other = Agent("b", provider=FunctionModel(model), memory=memory, conversation_id="c1")
    assert (await other.run("three")).answer == "you said 3 things"


async def test_memory_facts_are_injected_with_their_keys() -> None:
    facts = InMemoryFacts({"u1": [Fact("profile.city", "The user lives in Berlin.")]})
    model = ScriptedModel(["Berlin it is."])
    agent = Agent("a", provider=model, facts=facts, user_id="u1")
    await agent.run("Where do I live?")
    memory_items = [ci for ci in model.requests[0].context if ci.item.kind == "memory"]
    assert [(ci.item.text, ci.origin.kind, ci.origin.source) for ci in memory_items] == [
        ("The user lives in Berlin.", "memory", "profile.city")]


async def test_the_memory_window_limits_what_the_model_sees() -> None:
    model = ScriptedModel(["a" * 40, "b" * 40, "c"])
    agent = Agent("a", provider=model, memory=ConversationMemory(max_tokens=15))
    for text in ("first question", "second question", "third"):
        await agent.run(text)
    users = [m["content"] for m in model.requests[2].chat_messages() if m["role"] == "user"]
    assert users == ["third"]


async def test_prompt_length_cap() -> None:
    model = ScriptedModel(["ok"])
    agent = Agent("a", provider=model, persona="Base.", capabilities=["x" * 500],
                  composer=PromptComposer(max_length=100))
    await agent.run("hi")
    sections = [ci.origin.source for ci in model.requests[0].context if ci.item.kind == "prompt_section"]
    assert sections == ["base"]


async def test_close_closes_tools_that_hold_resources() -> None:
    closed: list[str] = []
    browser = Tool("browser", "A browser session.", {"type": "object"}, execute=lambda args: "page",
                   close=lambda reason: closed.append(reason))
    agent = Agent("a", provider=ScriptedModel([]), tools=[browser])
    await agent.close("evicted")
    assert closed == ["evicted"]

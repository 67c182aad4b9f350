"""What the loop accepts from a provider (agent._accept), through real Agent runs on a temp store."""

from __future__ import annotations

from typing import Any

import pytest

from agent import Agent, tool
from agent.providers import ModelRequest, ModelResponse, Provider, ScriptedModel, ToolCall, Usage
from agent.providers._testing import tool_results
from tracer import Recorder, RunData, Store


@tool
async def weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: sunny"



def load(store: Store, run_id: str) -> RunData:
    store.flush()
    return store.load_run(run_id)


def inference_attributes(data: RunData, nth: int = 0) -> dict[str, Any]:
    stages = sorted((s for s in data.stages if s.kind == "inference"), key=lambda s: s.seq)
    return dict(stages[nth].attributes)


def two_calls(first: str, second: str) -> ModelResponse:
    return ModelResponse("", (ToolCall(first, "weather", '{"city": "Oslo"}'),
                              ToolCall(second, "weather", '{"city": "Rome"}')), "tool_calls")


@pytest.mark.parametrize(("first", "second", "expected"), [
    ("c1", "c1", ["c1", "call_1_1"]),  # the same id twice: the second gets one of its own
    ("", "", ["call_1_0", "call_1_1"]),  # no ids at all (llama.cpp, some Ollama versions)
    ("call_1_1", "", ["call_1_1", "call_1_1_1"]),  # the id it would get is taken
])
async def test_tool_calls_without_distinct_ids_get_their_own(
    store: Store, first: str, second: str, expected: list[str]
) -> None:
    """Calls with the same id, or none, were sent back with results the server cannot pair (two
    tool messages with one tool_call_id; OpenAI answers 400) — each call now has an id of its own."""
    model = ScriptedModel([two_calls(first, second), "Sunny in both."])
    agent = Agent("a", provider=model, tools=[weather], recorder=Recorder(store))
    result = await agent.run("Weather?")

    assert result.status == "answered"
    second_request = model.requests[1].chat_messages()
    assert [c["id"] for c in second_request[-3]["tool_calls"]] == expected
    assert [m["tool_call_id"] for m in second_request[-2:]] == expected
    assert [r["content"] for r in tool_results(model.requests[1])] == ["Oslo: sunny", "Rome: sunny"]
    replaced = inference_attributes(load(store, result.run_id))["call_ids_replaced"]
    assert replaced == [{"index": i, "sent": sent} for i, sent in enumerate([first, second]) if sent != expected[i]]


async def test_distinct_ids_are_left_as_the_model_sent_them(store: Store) -> None:
    model = ScriptedModel([two_calls("a", "b"), "ok"])
    result = await Agent("a", provider=model, tools=[weather], recorder=Recorder(store)).run("Weather?")
    assert [c["id"] for c in model.requests[1].chat_messages()[-3]["tool_calls"]] == ["a", "b"]
    assert "call_ids_replaced" not in inference_attributes(load(store, result.run_id))


class Returns(Provider):
    """A custom provider (outside code) returning whatever it was given."""

    name = "fn"

    def __init__(self, response: Any) -> None:
        self.response = response

    async def complete(self, request: ModelRequest) -> Any:
        return self.response


@pytest.mark.parametrize(("response", "named"), [
    (ModelResponse(5), "the response's text is int 5, not a string"),  # type: ignore[arg-type]
    (ModelResponse("hi", model=7), "the response's model is int 7"),  # type: ignore[arg-type]
    (ModelResponse("hi", usage=Usage(-1)), "usage.input_tokens is int -1"),
    (ModelResponse("hi", usage=Usage(0, 10**30)), "usage.output_tokens is int 1000000000000000000000000000000"),
    (ModelResponse("", (ToolCall("c", "weather", {"city": "x"}),)),  # type: ignore[arg-type]
     "tool call 0's arguments is dict"),
    ("not a response", "its response is str 'not a response', not a ModelResponse"),
])
async def test_a_response_of_the_wrong_types_fails_the_run_naming_the_field(
    store: Store, response: Any, named: str
) -> None:
    """A model count of 10**30 broke the store's writer (every later write failed); a model name that
    was not a string raised AttributeError out of agent.run(), a traceback to the user. Now the run
    fails as a provider error naming the provider and the field."""
    agent = Agent("a", provider=Returns(response), tools=[weather], recorder=Recorder(store))
    result = await agent.run("hi")

    assert (result.status, result.stop_reason) == ("failed", "provider_error")
    assert result.error is not None and "ProviderResponseError: fn: " in result.error and named in result.error
    data = load(store, result.run_id)  # the store still writes
    assert data.run.status == "failed"
    [inference] = [s for s in data.stages if s.kind == "inference"]
    assert inference.status == "error"


async def test_arguments_cut_off_at_the_token_limit_are_named_as_such(store: Store) -> None:
    """A call cut short by max_tokens got only "not valid JSON" back, so the model wrote the same
    long call again; the error now says why the JSON ended early."""
    cut = ModelResponse("", (ToolCall("c1", "weather", '{"city": "Ro'),), finish_reason="length")
    model = ScriptedModel([cut, "ok"])
    result = await Agent("a", provider=model, tools=[weather], recorder=Recorder(store)).run("Weather?")

    assert result.status == "answered"
    [sent] = tool_results(model.requests[1])
    assert "not valid JSON" in sent["content"] and "cut off at the output token limit" in sent["content"]


async def test_invalid_arguments_without_the_token_limit_get_no_such_hint(store: Store) -> None:
    bad = ModelResponse("", (ToolCall("c1", "weather", '{"city": "Ro'),), finish_reason="tool_calls")
    model = ScriptedModel([bad, "ok"])
    await Agent("a", provider=model, tools=[weather], recorder=Recorder(store)).run("Weather?")
    [sent] = tool_results(model.requests[1])
    assert "not valid JSON" in sent["content"] and "token limit" not in sent["content"]

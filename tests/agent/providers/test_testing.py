"""The test models that ship with footprint, and the switch that blocks real model requests."""

from __future__ import annotations

import pytest

from agent.errors import ProviderError, RealModelBlockedError
from agent.providers import (
    FunctionModel,
    ModelRequest,
    ScriptedModel,
    block_real_models,
    calls,
    check_real_model_allowed,
    raw_call,
    real_models_blocked,
)
from tracer import ContextItem, Item, ItemKind, Origin, OriginKind

REQUEST = ModelRequest.of([
    ContextItem(Item.of_text(ItemKind.USER, "hello there"), Origin(OriginKind.USER, source="input")),
    ContextItem(Item(ItemKind.SETTINGS, {"model": "m-1"}), Origin(OriginKind.CONFIG, source="settings")),
])


async def test_scripted_model_answers_in_order_and_keeps_requests() -> None:
    model = ScriptedModel(["one", calls(("t", {"x": 1}, "c9"), text="calling")])
    first = await model.complete(REQUEST)
    assert (first.text, first.model, first.provider) == ("one", "m-1", "scripted")
    assert first.usage.input_tokens > 0 and first.usage.output_tokens == 1  # estimated when not scripted
    second = await model.complete(REQUEST)
    assert second.text == "calling" and second.tool_calls[0].id == "c9"
    assert second.tool_calls[0].arguments == '{"x": 1}' and second.finish_reason == "tool_calls"
    assert model.calls_made == 2 and model.requests == [REQUEST, REQUEST]
    with pytest.raises(ProviderError, match="call 3 but the script has 2 responses"):
        await model.complete(REQUEST)


async def test_scripted_model_repeats_and_raises_scripted_errors() -> None:
    model = ScriptedModel(["again"], repeat=True)
    assert [(await model.complete(REQUEST)).text for _ in range(3)] == ["again"] * 3
    failing = ScriptedModel([ProviderError("scripted failure", provider="scripted")])
    with pytest.raises(ProviderError, match="scripted failure"):
        await failing.complete(REQUEST)


async def test_function_model_reads_its_context() -> None:
    async def echo(request: ModelRequest) -> str:
        return request.last_user_text().upper()

    model = FunctionModel(echo, name="echo")
    response = await model.complete(REQUEST)
    assert (response.text, response.provider) == ("HELLO THERE", "echo")
    assert FunctionModel(lambda r: raw_call("t", "{bad", "c1")).name == "function"


async def test_stream_of_a_test_model_sends_the_text_then_the_response() -> None:
    events = [e async for e in ScriptedModel(["streamed"]).stream(REQUEST)]
    assert events[0].text == "streamed"  # type: ignore[union-attr]
    assert events[1].response.text == "streamed"  # type: ignore[union-attr]


@pytest.mark.footprint_expects_blocked  # sees the refusal itself
def test_real_model_requests_are_blocked_under_pytest() -> None:
    assert real_models_blocked()
    with pytest.raises(RealModelBlockedError, match="openai: a real model request was made"):
        check_real_model_allowed("openai")
    block_real_models(False)
    try:
        check_real_model_allowed("openai")
    finally:
        block_real_models(True)


async def test_test_models_keep_only_the_requests_they_are_told_to() -> None:
    """A long-running host on a test model keeps a bounded request history; every call is counted."""
    keep_two = FunctionModel(lambda request: "ok", keep_requests=2)
    keep_none = ScriptedModel(["a"], repeat=True, keep_requests=0)
    requests = [ModelRequest.of([ContextItem(Item.of_text("user", f"q{n}"), Origin("user"))]) for n in range(5)]
    for request in requests:
        await keep_two.complete(request)
        await keep_none.complete(request)
    assert keep_two.requests == requests[-2:] and keep_two.calls_made == 5
    assert keep_none.requests == [] and keep_none.calls_made == 5

"""FallbackProvider: which failures move on to the next provider, and what is raised when all fail."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest

from agent.errors import (
    ProviderAuthError,
    ProviderBadRequestError,
    ProviderCancelledError,
    ProviderConnectionError,
    ProviderError,
    ProviderRateLimitError,
    ProviderResponseError,
    ProviderServerError,
    ProviderTimeoutError,
    RealModelBlockedError,
    UserError,
)
from agent.providers import (
    FallbackProvider,
    FunctionModel,
    ModelRequest,
    ModelResponse,
    OpenAIProvider,
    Provider,
    ResponseDone,
    ScriptedModel,
    StreamEvent,
    TextDelta,
)

MakeRequest = Callable[..., ModelRequest]


class Failing(Provider):
    """Raises ``error`` — from a stream, after yielding ``before`` text deltas."""

    def __init__(self, name: str, error: Exception, *, before: Sequence[str] = (), models: Sequence[str] = ()) -> None:
        self.name = name
        self.error = error
        self.before = before
        self.models = list(models)
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        raise self.error

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.calls += 1
        for text in self.before:
            yield TextDelta(text)
        raise self.error

    async def list_models(self) -> list[str]:
        if self.models:
            return self.models
        raise self.error


def answering(name: str, text: str = "ok") -> FunctionModel:
    return FunctionModel(lambda request: text, name=name)


async def collect(provider: Provider, request: ModelRequest) -> list[StreamEvent]:
    return [event async for event in provider.stream(request)]


async def test_the_first_provider_that_answers_wins(request_of: MakeRequest) -> None:
    first, second = answering("first", "one"), answering("second", "two")
    chain = FallbackProvider([first, second])

    response = await chain.complete(request_of("hi"))

    assert (response.text, response.provider) == ("one", "first")
    assert len(second.requests) == 0


@pytest.mark.parametrize(
    "error",
    [
        ProviderTimeoutError("openai: timed out"),
        ProviderRateLimitError("openai: HTTP 429", retry_after=3),
        ProviderServerError("openai: HTTP 503", status=503),
        ProviderConnectionError("openai: connection refused"),
        ProviderResponseError("openai: not JSON"),
        ProviderError("openai: something unclassified"),
    ],
    ids=lambda error: type(error).__name__,
)
async def test_provider_failures_fall_back(request_of: MakeRequest, error: ProviderError) -> None:
    seen: list[tuple[str, ProviderError]] = []
    down = Failing("down", error)
    chain = FallbackProvider(
        [down, answering("backup", "saved")], on_fallback=lambda provider, e: seen.append((provider.name, e))
    )

    response = await chain.complete(request_of("hi"))

    assert (response.text, response.provider) == ("saved", "backup")
    assert seen == [("down", error)]


@pytest.mark.parametrize(
    "error",
    [
        ProviderAuthError("openai: HTTP 401", status=401),
        ProviderBadRequestError("openai: HTTP 400", status=400),
        RealModelBlockedError("openai: blocked"),
    ],
    ids=lambda error: type(error).__name__,
)
async def test_errors_that_would_fail_everywhere_are_raised_at_once(
    request_of: MakeRequest, error: ProviderError
) -> None:
    backup = answering("backup")
    chain = FallbackProvider([Failing("down", error), backup])

    with pytest.raises(type(error)) as caught:
        await chain.complete(request_of("hi"))
    assert caught.value is error
    with pytest.raises(type(error)):
        await collect(chain, request_of("hi"))
    assert backup.requests == []


async def test_an_unknown_error_falls_back_and_is_named_when_all_fail(request_of: MakeRequest) -> None:
    chain = FallbackProvider([Failing("buggy", KeyError("oops")), answering("backup", "saved")])

    response = await chain.complete(request_of("hi"))

    assert (response.text, response.provider) == ("saved", "backup")
    assert [(a.provider, a.outcome, a.error_type, a.fell_back) for a in response.attempts] == [
        ("buggy", "failed", "KeyError", True), ("backup", "answered", "", False)]
    only_bugs = FallbackProvider([Failing("a", KeyError("oops")), Failing("b", TimeoutError("slow"))])
    with pytest.raises(ProviderError) as caught:
        await only_bugs.complete(request_of("hi"))
    assert "1. a: KeyError: 'oops'" in str(caught.value) and "2. b: TimeoutError: slow" in str(caught.value)
    assert [a.error_type for a in caught.value.attempts] == ["KeyError", "TimeoutError"]  # type: ignore[attr-defined]


async def test_a_provider_that_is_not_ready_is_skipped(request_of: MakeRequest) -> None:
    closed, backup = answering("closed"), answering("backup", "saved")
    closed.is_ready = lambda: False  # type: ignore[method-assign]
    chain = FallbackProvider([closed, backup])

    response = await chain.complete(request_of("hi"))

    assert response.provider == "backup" and closed.requests == []
    assert [(a.provider, a.outcome) for a in response.attempts] == [("closed", "skipped"), ("backup", "answered")]
    assert chain.is_ready() and chain.type == "fallback"
    backup.is_ready = lambda: False  # type: ignore[method-assign]
    assert not chain.is_ready()
    with pytest.raises(ProviderError, match="no provider is ready"):
        await chain.complete(request_of("hi"))


async def test_current_provider_follows_the_chain(request_of: MakeRequest) -> None:
    seen: list[str] = []
    chain: FallbackProvider

    def second(request: ModelRequest) -> str:
        seen.append(chain.current_provider.name)
        return "two"

    chain = FallbackProvider([Failing("first", ProviderServerError("down")), FunctionModel(second, name="second")])
    assert chain.current_provider.name == "first"

    await chain.complete(request_of("hi"))

    assert seen == ["second"] and chain.current_provider.name == "second"


def stalling(started: asyncio.Event) -> FunctionModel:
    """A provider named slow that sets ``started`` and then takes 30 s to answer."""

    async def stall(request: ModelRequest) -> str:
        started.set()
        await asyncio.sleep(30)
        return "too late"

    return FunctionModel(stall, name="slow")


async def test_cancel_stops_the_request_in_flight_without_falling_back(request_of: MakeRequest) -> None:
    started = asyncio.Event()
    slow = stalling(started)
    backup = answering("backup")
    chain = FallbackProvider([slow, backup])
    call = asyncio.ensure_future(chain.complete(request_of("hi")))
    await started.wait()

    assert chain.cancel() is True
    with pytest.raises(ProviderCancelledError, match="cancelled") as caught:
        await call
    assert backup.requests == []
    assert [(a.provider, a.outcome) for a in caught.value.attempts] == [("slow", "cancelled")]  # type: ignore[attr-defined]
    assert chain.cancel() is False  # nothing in flight now


async def test_cancelling_the_caller_is_not_a_provider_cancel(request_of: MakeRequest) -> None:
    started = asyncio.Event()
    slow = stalling(started)
    chain = FallbackProvider([slow, answering("backup")])
    call = asyncio.ensure_future(chain.complete(request_of("hi")))
    await started.wait()
    call.cancel()

    with pytest.raises(asyncio.CancelledError):
        await call


async def test_when_all_fail_the_last_error_is_raised_with_every_failure(request_of: MakeRequest) -> None:
    first = ProviderServerError("openai (gpt-4o): HTTP 500: boom", status=500)
    last = ProviderRateLimitError("local (llama3): HTTP 429: busy", retry_after=7.0)
    seen: list[str] = []
    chain = FallbackProvider(
        [Failing("openai", first), Failing("local", last)], on_fallback=lambda provider, e: seen.append(provider.name)
    )

    with pytest.raises(ProviderRateLimitError) as caught:
        await chain.complete(request_of("hi"))

    error: Any = caught.value
    message = str(error)
    assert message.startswith("fallback(openai,local): all 2 providers failed")
    assert "1. openai: openai (gpt-4o): HTTP 500: boom" in message
    assert "2. local: local (llama3): HTTP 429: busy" in message
    assert (error.status, error.retry_after) == (429, 7.0)
    assert error.errors == [first, last]
    assert error.__cause__ is last
    assert seen == ["openai"]  # no hand-over after the last provider: there is nobody to hand to


async def test_a_stream_falls_back_while_nothing_was_yielded(request_of: MakeRequest) -> None:
    chain = FallbackProvider([Failing("down", ProviderTimeoutError("timed out")), ScriptedModel(["streamed"])])

    events = await collect(chain, request_of("hi"))

    assert events[0] == TextDelta("streamed")
    assert isinstance(events[-1], ResponseDone) and events[-1].response.provider == "scripted"


async def test_a_stream_that_already_yielded_does_not_fall_back(request_of: MakeRequest) -> None:
    backup = answering("backup")
    chain = FallbackProvider([Failing("flaky", ProviderConnectionError("reset"), before=["Hel"]), backup])
    seen: list[StreamEvent] = []

    with pytest.raises(ProviderConnectionError, match="reset"):
        async for event in chain.stream(request_of("hi")):
            seen.append(event)

    assert seen == [TextDelta("Hel")]
    assert backup.requests == []


async def test_a_failing_openai_server_falls_back_to_the_next_provider(
    openai_server: Any, request_of: MakeRequest
) -> None:
    openai_server.script(openai_server.error(500, "boom"), openai_server.error(503, "still down"))
    openai = OpenAIProvider(api_key="k", base_url=openai_server.base_url, max_retries=0)
    chain = FallbackProvider([openai, ScriptedModel(["from the script", "streamed from the script"])])

    assert chain.name == "fallback(openai,scripted)"
    response = await chain.complete(request_of("hi"))
    events = await collect(chain, request_of("hi"))

    assert (response.text, response.provider) == ("from the script", "scripted")
    assert events[0] == TextDelta("streamed from the script")
    assert [body.get("stream", False) for body in openai_server.bodies] == [False, True]
    await openai.aclose()


async def test_an_unauthorised_openai_server_does_not_fall_back(openai_server: Any, request_of: MakeRequest) -> None:
    openai_server.script(openai_server.error(401, "bad key"))
    openai = OpenAIProvider(api_key="wrong", base_url=openai_server.base_url)
    scripted = ScriptedModel(["never"])

    with pytest.raises(ProviderAuthError, match="bad key"):
        await FallbackProvider([openai, scripted]).complete(request_of("hi"))
    assert scripted.calls_made == 0
    await openai.aclose()


async def test_list_models_joins_the_chain_and_skips_a_provider_that_is_down() -> None:
    chain = FallbackProvider([
        Failing("a", ProviderServerError("down"), models=["m1", "m2"]),
        Failing("b", ProviderTimeoutError("down")),
        Failing("c", ProviderServerError("down"), models=["m2", "m3"]),
    ])

    assert await chain.list_models() == ["m1", "m2", "m3"]


def test_construction(request_of: MakeRequest) -> None:
    with pytest.raises(UserError):
        FallbackProvider([])
    local, remote = answering("local"), answering("remote")
    remote.real = True
    chain = FallbackProvider([local, remote])
    assert chain.real and not FallbackProvider([local]).real
    assert chain.count_tokens(request_of("x" * 40)) == local.count_tokens(request_of("x" * 40))


async def test_every_attempt_is_recorded_on_the_inference_stage_even_when_all_fail(tmp_path: Any) -> None:
    from agent import Agent
    from tracer import Recorder, Store

    store = Store.open(tmp_path / "fp.duckdb")
    chain = FallbackProvider([Failing("first", ProviderServerError("HTTP 503", status=503)),
                              Failing("second", ProviderTimeoutError("timed out"))])
    result = await Agent("chained", provider=chain, recorder=Recorder(store)).run("hello")
    store.flush()
    inference = next(s for s in store.load_run(result.run_id).stages if s.kind == "inference")
    store.close()

    assert result.status == "failed" and "all 2 providers failed" in (result.error or "")
    attempts = inference.attributes["attempts"]
    assert [(a["provider"], a["outcome"], a["error_type"], a["fell_back"]) for a in attempts] == [
        ("first", "failed", "ProviderServerError", True), ("second", "failed", "ProviderTimeoutError", True)]


async def test_an_agent_whose_fallback_chain_is_cancelled_ends_cancelled(request_of: MakeRequest) -> None:
    from agent import Agent

    started = asyncio.Event()
    chain = FallbackProvider([stalling(started), answering("backup")])
    agent = Agent("chained", provider=chain)
    run = asyncio.ensure_future(agent.run("hello"))
    await started.wait()
    chain.cancel()

    result = await run

    assert (result.status, result.stop_reason) == ("cancelled", "cancelled")
    assert agent.memory.unanswered_calls(agent.conversation_id) == []

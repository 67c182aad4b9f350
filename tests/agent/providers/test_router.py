"""ProviderRouter: routing by model-name prefix or by a selector, and saying why."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agent.errors import ProviderServerError, UserError
from agent.providers import (
    FallbackProvider,
    FunctionModel,
    ModelRequest,
    OpenAIProvider,
    ProviderRouter,
    ResponseDone,
    ScriptedModel,
    TextDelta,
)

MakeRequest = Callable[..., ModelRequest]


def answering(name: str) -> FunctionModel:
    return FunctionModel(lambda request: f"{name} answers", name=name)


@pytest.fixture
def router() -> ProviderRouter:
    return ProviderRouter(
        {"gpt-": answering("openai"), "gpt-4o": answering("openai-4o"), "llama": answering("local")},
        default=answering("fallback"),
    )


@pytest.mark.parametrize(
    ("model", "route", "reason"),
    [
        ("gpt-3.5-turbo", "gpt-", "model 'gpt-3.5-turbo' starts with 'gpt-'"),
        ("gpt-4o-mini", "gpt-4o", "model 'gpt-4o-mini' starts with 'gpt-4o'"),  # the longest prefix wins
        ("llama3.1:8b", "llama", "model 'llama3.1:8b' starts with 'llama'"),
        ("mistral-small", "default", "model 'mistral-small' matches no route prefix"),
        (None, "default", "the request names no model"),
    ],
)
async def test_routes_by_model_prefix(
    router: ProviderRouter, request_of: MakeRequest, model: str | None, route: str, reason: str
) -> None:
    request = request_of("hi", settings=None if model is None else {"model": model})

    choice = router.choose(request)
    response = await router.complete(request)

    assert (choice.name, choice.reason) == (route, reason)
    assert response.provider == choice.provider.name


async def test_routes_by_a_selector(request_of: MakeRequest) -> None:
    tool = {"name": "search", "description": "Search the web", "parameters": {"type": "object"}}
    capable, cheap = answering("capable"), answering("cheap")
    router = ProviderRouter(
        {"tools": capable},
        default=cheap,
        select=lambda request: "tools" if request.tool_definitions() else None,
    )

    with_tools = await router.complete(request_of("find it", tools=[tool]))
    plain = await router.complete(request_of("hello"))

    assert (with_tools.provider, plain.provider) == ("capable", "cheap")
    assert router.choose(request_of("find it", tools=[tool])).reason == "the selector chose route 'tools'"
    assert router.choose(request_of("hello")).reason == "the selector chose no route"


def test_a_selector_naming_an_unknown_route_is_a_configuration_error(request_of: MakeRequest) -> None:
    router = ProviderRouter({"fast": answering("fast")}, default=answering("slow"), select=lambda request: "fats")

    with pytest.raises(UserError, match=r"route 'fats'.*routes: 'fast'"):
        router.choose(request_of("hi"))


def test_default_is_not_a_route_name() -> None:
    with pytest.raises(UserError, match="default"):
        ProviderRouter({"default": answering("a")}, default=answering("b"))


async def test_streams_through_the_chosen_provider(router: ProviderRouter, request_of: MakeRequest) -> None:
    events = [event async for event in router.stream(request_of("hi", settings={"model": "llama3"}))]

    assert events[0] == TextDelta("local answers")
    assert isinstance(events[-1], ResponseDone) and events[-1].response.provider == "local"


async def test_name_models_and_realness() -> None:
    shared = ScriptedModel([])
    remote = answering("remote")
    remote.real = True

    async def models_of(name: str) -> list[str]:
        return {"shared": ["a", "b"], "remote": ["b", "c"]}[name]

    shared.list_models = lambda: models_of("shared")  # type: ignore[method-assign]
    remote.list_models = lambda: models_of("remote")  # type: ignore[method-assign]
    router = ProviderRouter({"x": shared, "y": shared}, default=remote)

    assert router.name == "router(scripted,remote)"  # each provider once
    assert router.real
    assert await router.list_models() == ["a", "b", "c"]
    assert not ProviderRouter({"x": shared}, default=shared).real


async def test_routes_gpt_models_to_an_openai_server_and_the_rest_elsewhere(
    openai_server: Any, request_of: MakeRequest
) -> None:
    completion = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "from openai"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    openai_server.script(openai_server.json(completion))
    openai = OpenAIProvider(api_key="k", base_url=openai_server.base_url)
    local = ScriptedModel(["from local"])
    router = ProviderRouter({"gpt-": openai}, default=local)

    remote_answer = await router.complete(request_of("hi", settings={"model": "gpt-4o-mini"}))
    local_answer = await router.complete(request_of("hi", settings={"model": "llama3"}))

    assert (remote_answer.text, remote_answer.provider) == ("from openai", "openai")
    assert (local_answer.text, local_answer.provider) == ("from local", "scripted")
    assert [body["model"] for body in openai_server.bodies] == ["gpt-4o-mini"]
    await openai.aclose()


async def test_a_route_can_be_a_fallback_chain(request_of: MakeRequest) -> None:
    chain = FallbackProvider([ScriptedModel([ProviderServerError("down")]), answering("backup")])
    router = ProviderRouter({"gpt-": chain}, default=answering("other"))

    response = await router.complete(request_of("hi", settings={"model": "gpt-4o"}))

    assert response.provider == "backup"

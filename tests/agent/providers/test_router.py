"""ProviderRouter: routing by model-name prefix or by a selector, and saying why."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agent.errors import NoRouteError, ProviderAuthError, ProviderServerError, UserError
from agent.providers import (
    FallbackProvider,
    FunctionModel,
    ModelRequest,
    OpenAIProvider,
    Price,
    ProviderRouter,
    ResponseDone,
    RouteProfile,
    RoutingCriteria,
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


# ---------------------------------------------------------------------- strategies

def strategy_router(**options: Any) -> ProviderRouter:
    """cheap: low price, slow, weak; fast: mid price, fastest; smart: dear, best, no vision; default: local."""
    return ProviderRouter(
        {"cheap": answering("cheap"), "fast": answering("fast"), "smart": answering("smart")},
        default=answering("local"),
        profiles={
            "cheap": RouteProfile("cheap-1", Price(0.10, 0.40), speed=0.3, quality=0.4, capabilities=frozenset({"tools"})),
            "fast": RouteProfile("fast-1", Price(1.00, 2.00), speed=0.95, quality=0.6,
                                 capabilities=frozenset({"tools", "vision"})),
            "smart": RouteProfile("smart-1", Price(5.00, 15.00), speed=0.4, quality=0.95, context_window=200_000,
                                  capabilities=frozenset({"tools"})),
            "default": RouteProfile("local-1", Price(0.50, 0.50), speed=0.2, quality=0.3, context_window=8_000,
                                    capabilities=frozenset()),
        },
        **options,
    )


@pytest.mark.parametrize(("strategy", "route"), [("cost", "cheap"), ("speed", "fast"), ("quality", "smart"),
                                                 ("balanced", "fast")])
def test_each_strategy_picks_its_route(strategy: str, route: str) -> None:
    choice = strategy_router().select_provider(strategy=strategy)

    assert choice.name == route and choice.strategy == strategy
    assert choice.reason.startswith(f"{strategy}: ")
    assert choice.candidates[0] == route and len(choice.candidates) == 4


def test_criteria_refuse_routes_and_say_why() -> None:
    router = strategy_router()

    vision = router.select_provider(RoutingCriteria(capabilities=frozenset({"vision"})), "cost")
    assert vision.name == "fast"
    assert vision.rejected == {"cheap": "lacks vision", "smart": "lacks vision", "default": "lacks vision"}
    long = router.select_provider(RoutingCriteria(min_context_window=150_000), "cost")
    assert long.name == "smart" and long.rejected["cheap"] == "context window 128000 is too small"
    assert router.select_provider(RoutingCriteria(min_quality=0.9), "cost").name == "smart"
    assert router.select_provider(RoutingCriteria(exclude=frozenset({"cheap"})), "cost").name == "default"
    assert router.select_provider(RoutingCriteria(max_cost=0.0005), "quality").name == "cheap"
    with pytest.raises(NoRouteError, match=r"no route meets the criteria.*cheap: lacks vision"):
        router.select_provider(RoutingCriteria(capabilities=frozenset({"vision"}), max_cost=0.0001), "cost")


def test_preferred_routes_win_ties() -> None:
    twins = ProviderRouter({"a": answering("a"), "b": answering("b")}, default=answering("c"),
                           profiles={"a": RouteProfile("m"), "b": RouteProfile("m"), "default": RouteProfile("m")})

    assert twins.select_provider(strategy="speed").name == "a"  # constructor order breaks the tie
    assert twins.select_provider(RoutingCriteria(prefer=("b",)), "speed").name == "b"


def test_a_request_with_tools_needs_a_route_with_tools(request_of: MakeRequest) -> None:
    tool = {"name": "search", "description": "Search", "parameters": {"type": "object"}}
    router = strategy_router(strategy="cost")

    assert router.choose(request_of("hi")).name == "cheap"
    with_tools = router.choose(request_of("hi", tools=[tool]))
    assert with_tools.name == "cheap" and "default" in with_tools.rejected
    assert with_tools.rejected["default"] == "lacks tools"


def test_estimate_cost_prices_the_chosen_route() -> None:
    estimate = strategy_router().estimate_cost(1_000_000, 1_000_000, strategy="quality")

    assert (estimate.route, estimate.model) == ("smart", "smart-1")
    assert estimate.estimated_cost == pytest.approx(20.0)
    assert strategy_router().estimate_cost(2_000, 1_000, strategy="cost").estimated_cost == pytest.approx(0.0006)
    with pytest.raises(UserError, match="negative"):
        strategy_router().estimate_cost(-1, 0)


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(UserError, match="strategy 'cheapest' is not one of cost, speed, quality, balanced"):
        strategy_router(strategy="cheapest")
    with pytest.raises(UserError, match="profiles for routes that do not exist: nope"):
        ProviderRouter({}, default=answering("x"), profiles={"nope": RouteProfile()})
    with pytest.raises(UserError, match="speed must be between 0 and 1"):
        RouteProfile(speed=2)


async def test_the_route_is_on_the_response(request_of: MakeRequest) -> None:
    response = await strategy_router(strategy="speed").complete(request_of("hi"))

    assert response.provider == "fast"
    assert response.route is not None and response.route["route"] == "fast"
    assert response.route["strategy"] == "speed" and response.route["candidates"][0] == "fast"
    assert [(a.provider, a.outcome) for a in response.attempts] == [("fast", "answered")]


async def test_complete_with_fallback_tries_the_ranked_routes_in_order(request_of: MakeRequest) -> None:
    router = ProviderRouter(
        {"cheap": ScriptedModel([ProviderServerError("cheap: HTTP 503", status=503)]),
         "fast": ScriptedModel([ProviderAuthError("fast: HTTP 401", status=401)])},
        default=answering("local"),
        profiles={"cheap": RouteProfile("c", Price(0.1, 0.1)), "fast": RouteProfile("f", Price(1, 1)),
                  "default": RouteProfile("l", Price(5, 5))},
    )

    with pytest.raises(ProviderAuthError) as caught:  # the key error would fail everywhere: no third try
        await router.complete_with_fallback(request_of("hi"), strategy="cost")
    assert [(a.provider, a.outcome, a.fell_back) for a in caught.value.attempts] == [  # type: ignore[attr-defined]
        ("scripted", "failed", True), ("scripted", "failed", False)]

    router.routes["fast"] = ScriptedModel([ProviderServerError("fast: HTTP 500", status=500)])
    router.routes["cheap"] = ScriptedModel([ProviderServerError("cheap: HTTP 503", status=503)])
    response = await router.complete_with_fallback(request_of("hi"), strategy="cost")
    assert response.provider == "local"
    assert [a.outcome for a in response.attempts] == ["failed", "failed", "answered"]
    assert response.route is not None and response.route["route"] == "default"
    assert response.route["reason"] == "cheap failed; next in order: default"


async def test_a_fallback_router_records_route_and_attempts_on_the_inference_stage(tmp_path: Any) -> None:
    from agent import Agent
    from tracer import Recorder, Store

    store = Store.open(tmp_path / "fp.duckdb")
    router = ProviderRouter({"cheap": ScriptedModel([ProviderServerError("down", status=503)])},
                            default=answering("local"),
                            profiles={"cheap": RouteProfile("c", Price(0.1, 0.1)), "default": RouteProfile("l", Price(5, 5))},
                            strategy="cost", fallback=True)
    agent = Agent("routed", provider=router, recorder=Recorder(store))

    result = await agent.run("hello")
    store.flush()
    inference = next(s for s in store.load_run(result.run_id).stages if s.kind == "inference")

    assert result.status == "answered"
    assert inference.attributes["route"]["route"] == "default"
    assert [a["outcome"] for a in inference.attributes["attempts"]] == ["failed", "answered"]
    assert inference.attributes["attempts"][0]["error"] == "down"
    store.close()

"""Which model a FallbackProvider or ProviderRouter asks each of its providers for, and what the
recording (the inference stage, the settings item, the OTel chat span) says was asked.

Each backend is a real OpenAIProvider on a loopback server of its own that answers with the model
it was asked for (as Ollama and vLLM do), so what a server received and what was recorded can be
compared. A chain or router sent its own name (``fallback(openai,openai)``) as the model to every
server, and an agent's model to every backend, a llama server included.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent import Agent, ModelSettings
from agent.providers import FallbackProvider, OpenAIProvider, Provider, ProviderRouter, ScriptedModel
from tests.agent.providers.conftest import OpenAIServer, Reply
from tests.agent.providers.openaikit import chunk, completion
from tracer import ItemKind, Recorder, Store
from tracer.otel import SpanBuilder


@pytest.fixture
def servers() -> Iterator[tuple[OpenAIServer, OpenAIServer]]:
    """Two loopback OpenAI-wire servers, ``a`` and ``b``."""
    a, b = OpenAIServer(), OpenAIServer()
    a.start()
    b.start()
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


def answer(model: str, *, stream: bool = False) -> Reply:
    """A reply saying it came from ``model``."""
    if stream:
        return OpenAIServer.sse([{**chunk({"content": f"from {model}"}), "model": model},
                                 {**chunk(finish="stop"), "model": model}])
    return OpenAIServer.json({**completion(f"from {model}"), "model": model})


DOWN = OpenAIServer.error(503, "overloaded")


def backend(server: OpenAIServer, model: str | None = None) -> OpenAIProvider:
    return OpenAIProvider(model, api_key="k", base_url=server.base_url, max_retries=0)


async def run(provider: Provider, tmp_path: Path, *, model: str | None = None,
              stream: bool = False) -> tuple[Any, dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Run an agent once: its result, the inference stage's attributes, its settings item's body
    and the OTel chat span's attributes."""
    spans: list[Any] = []
    tmp_path.mkdir(parents=True, exist_ok=True)
    store = Store.open(tmp_path / "fp.duckdb")
    agent = Agent("a", provider=provider, model=model, stream_inference=stream,
                  recorder=Recorder(store, listeners=[SpanBuilder(spans.append)]))
    try:
        result = await agent.run("hello")
        store.flush()
        [inference] = store.load_run(result.run_id).inferences()
    finally:
        store.close()
    [settings] = [ci.item.body for ci in agent.static_context() if ci.item.kind == ItemKind.SETTINGS]
    [chat] = [dict(span.attributes) for span in spans if span.attributes.get("gen_ai.operation.name") == "chat"]
    return result, dict(inference.attributes), dict(settings), chat


def asked(*servers: OpenAIServer) -> list[list[str]]:
    return [[body["model"] for body in server.bodies] for server in servers]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("agent_model", [None, "gpt-4o-mini"])
async def test_a_chain_asks_each_backend_for_its_own_model(
    servers: tuple[OpenAIServer, OpenAIServer], tmp_path: Path, stream: bool, agent_model: str | None
) -> None:
    """Both servers were sent "fallback(openai,openai)" (a 404, which does not fall back); with
    Agent(model="gpt-4o-mini") the llama server was sent gpt-4o-mini."""
    a, b = servers
    a.script(DOWN)
    b.script(answer("llama3.1", stream=stream))
    chain = FallbackProvider([backend(a, "gpt-4o-mini"), backend(b, "llama3.1")])

    result, stage, settings, chat = await run(chain, tmp_path, model=agent_model, stream=stream)

    assert (result.status, result.answer) == ("answered", "from llama3.1")
    assert asked(a, b) == [["gpt-4o-mini"], ["llama3.1"]]
    assert [(x["outcome"], x["model"]) for x in stage["attempts"]] == [("failed", "gpt-4o-mini"),
                                                                      ("answered", "llama3.1")]
    assert stage["model"] == "llama3.1"
    # the chain asks for two models: the settings item names neither, nor the chain
    assert "model" not in settings and "fallback" not in json.dumps(settings)
    assert chat["gen_ai.request.model"] == "llama3.1" and chat["gen_ai.response.model"] == "llama3.1"
    assert chat["gen_ai.provider.name"] == "openai" and chat["gen_ai.operation.name"] == "chat"


async def test_the_agents_model_goes_to_backends_without_one_of_their_own(
    servers: tuple[OpenAIServer, OpenAIServer], tmp_path: Path
) -> None:
    a, b = servers
    a.script(DOWN)
    b.script(answer("gpt-4o"))
    chain = FallbackProvider([backend(a, "gpt-4o-mini"), backend(b)])

    result, stage, settings, _ = await run(chain, tmp_path, model="gpt-4o")

    assert result.status == "answered"
    assert asked(a, b) == [["gpt-4o-mini"], ["gpt-4o"]]
    assert [x["model"] for x in stage["attempts"]] == ["gpt-4o-mini", "gpt-4o"]
    assert settings == {"agent_model": "gpt-4o"}


async def test_a_chain_of_one_model_on_two_servers_names_it(
    servers: tuple[OpenAIServer, OpenAIServer], tmp_path: Path
) -> None:
    a, b = servers
    a.script(DOWN)
    b.script(answer("qwen2.5"))
    chain = FallbackProvider([backend(a, "qwen2.5"), backend(b, "qwen2.5")])

    result, _, settings, chat = await run(chain, tmp_path)

    assert result.status == "answered" and asked(a, b) == [["qwen2.5"], ["qwen2.5"]]
    assert settings == {"model": "qwen2.5"} and chat["gen_ai.request.model"] == "qwen2.5"


@pytest.mark.parametrize("stream", [False, True])
async def test_a_router_asks_the_routes_provider_for_its_own_model(
    servers: tuple[OpenAIServer, OpenAIServer], tmp_path: Path, stream: bool
) -> None:
    """The router's name went to the default route's server; the agent's model (the routing key)
    went to a route whose provider serves another."""
    a, b = servers
    router = ProviderRouter({"llama": backend(b, "llama3.1:8b")}, default=backend(a, "gpt-4o-mini"))

    b.script(answer("llama3.1:8b", stream=stream))
    result, stage, settings, chat = await run(router, tmp_path / "1", model="llama3", stream=stream)
    assert result.answer == "from llama3.1:8b" and stage["route"]["route"] == "llama"
    assert settings == {"model": "llama3.1:8b", "agent_model": "llama3"}
    assert [x["model"] for x in stage["attempts"]] == ["llama3.1:8b"]
    assert chat["gen_ai.request.model"] == "llama3.1:8b"

    a.script(answer("gpt-4o-mini", stream=stream))
    result, stage, settings, chat = await run(router, tmp_path / "2", stream=stream)
    assert result.answer == "from gpt-4o-mini" and stage["route"]["route"] == "default"
    assert settings == {"model": "gpt-4o-mini"} and chat["gen_ai.request.model"] == "gpt-4o-mini"
    assert asked(a, b) == [["gpt-4o-mini"], ["llama3.1:8b"]]


async def test_a_router_passes_the_agents_model_to_routes_without_one(
    servers: tuple[OpenAIServer, OpenAIServer], tmp_path: Path
) -> None:
    a, b = servers
    b.script(answer("llama3.1"))
    router = ProviderRouter({"gpt-": backend(a), "llama": backend(b)}, default=ScriptedModel(["local"]), fallback=True)

    result, stage, settings, chat = await run(router, tmp_path, model="llama3.1")

    assert result.answer == "from llama3.1" and asked(a, b) == [[], ["llama3.1"]]
    assert settings == {"model": "llama3.1"} and chat["gen_ai.request.model"] == "llama3.1"
    assert [(x["provider"], x["model"]) for x in stage["attempts"]] == [("openai", "llama3.1")]


def test_the_settings_item_never_names_a_chain_or_router() -> None:
    configured, other = OpenAIProvider("m1", base_url="http://127.0.0.1:9/v1"), OpenAIProvider(
        "m2", base_url="http://127.0.0.1:9/v1")
    bare = OpenAIProvider(base_url="http://127.0.0.1:9/v1")
    chain = FallbackProvider([configured, other])
    nested = ProviderRouter({"m": chain}, default=bare, select=lambda request: None)
    for provider in (chain, nested, FallbackProvider([nested, configured])):
        for model in ("", "m1", "zz"):
            body = ModelSettings(model).as_body(provider)
            assert not any(str(value).startswith(("fallback(", "router(")) for value in body.values()), body
            assert body.get("model", "") in ("", "m1", "m2", "zz", bare.model), body
    # a plain provider takes the agent's model; a test model with none is named for itself
    assert ModelSettings("x").as_body(configured) == {"model": "x"}
    assert ModelSettings().as_body(configured) == {"model": "m1"}
    assert ModelSettings().as_body(ScriptedModel([])) == {"model": "scripted"}
    assert ModelSettings().as_body(FallbackProvider([configured, configured])) == {"model": "m1"}
    assert ModelSettings("x").as_body(FallbackProvider([bare, bare])) == {"model": "x"}


async def test_a_recorded_chain_replays_with_the_same_settings(tmp_path: Path) -> None:
    """A replay of a chain named the chain ("fallback(...)") as the model, which the recording had not."""
    from agent.providers import FunctionModel, ReplayProvider

    first, second = FunctionModel(lambda request: "one", name="first"), FunctionModel(lambda request: "two")
    first.model, second.model = "m1", "m2"  # type: ignore[attr-defined]
    chain = FallbackProvider([first, second])
    recorded = await Agent("a", provider=ReplayProvider("chain", provider=chain, mode="record", root=tmp_path)).run("hi")

    replay = ReplayProvider("chain", root=tmp_path)
    again = await Agent("a", provider=replay).run("hi")

    assert (recorded.answer, again.answer) == ("one", "one")
    assert replay.settings_for("") == chain.settings_for("") == {}
    assert first.requests[0].model == "m1"

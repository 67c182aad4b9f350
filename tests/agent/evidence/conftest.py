"""Shared fixtures for the evidence tests: a recorded demo session, and a small agent whose answer
depends on a memory fact (a FunctionModel reads it from its context)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from agent import Agent, Fact, InMemoryFacts, Tool, tool
from agent.demo import run_demo
from agent.providers import FunctionModel, ModelRequest, ModelResponse, calls
from agent.providers._demo import OfflineDemoModel
from tracer import Recorder, Store


@pytest.fixture
async def demo(store: Store) -> Any:
    """The demo session (three runs; the second answers wrongly, the third makes parallel calls)."""
    return await run_demo(store, provider=OfflineDemoModel(), echo=lambda _line: None, session_id="maya-test")


def city_of(request: ModelRequest) -> str:
    """Where the user lives as the context says: a memory fact first, else what the user said."""
    for ci in request.context:
        if ci.item.kind == "memory":
            found = re.search(r"lives in (\w+)", ci.item.text)
            if found:
                return found.group(1)
    for ci in reversed(request.context):
        if ci.item.kind == "user":
            found = re.search(r"moved to (\w+)", ci.item.text)
            if found:
                return found.group(1)
    return "nowhere"


def weather_model(request: ModelRequest) -> ModelResponse | str:
    """Calls weather for the user's city (and for 'also X' cities, in parallel), then answers from the results."""
    last_user = max(i for i, ci in enumerate(request.context) if ci.item.kind == "user")
    user = request.context[last_user].item.text
    results = [ci.item.body for ci in request.context[last_user:] if ci.item.kind == "tool_result"]
    if "moved to" in user:
        return "Noted."
    if not results:
        cities = [city_of(request), *re.findall(r"also (\w+)", user)]
        return calls(*(("weather", {"city": c}, f"call_{c}") for c in cities))
    return " ".join(f"{json.loads(r['content'])['city']}: {json.loads(r['content'])['sky']}." for r in results
                    if not r["is_error"] and r["content"]) or f"error: {results[0]['content'] or 'no result'}"


class Counter:
    """How many times each tool really ran, by (name, arguments)."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, dict[str, Any]]] = []


def weather_tool(counter: Counter, *, durable: bool = True) -> Tool:
    @tool(durable=durable)
    async def weather(city: str) -> dict[str, str]:
        """The sky over a city.

        Args:
            city: the city
        """
        counter.runs.append(("weather", {"city": city}))
        return {"city": city, "sky": "rain" if city == "Berlin" else "sun"}

    return weather


@pytest.fixture
def counter() -> Counter:
    """Counts real tool executions."""
    return Counter()


MakeAgent = Callable[..., Agent]


@pytest.fixture
def make_agent(store: Store, counter: Counter) -> MakeAgent:
    """make_agent(session=..., durable=..., facts=...): an agent whose answer depends on the memory fact profile.city."""

    def make(*, session: str = "s1", durable: bool = True, facts: list[Fact] | None = None, **kwargs: Any) -> Agent:
        return Agent(
            "weather", provider=FunctionModel(weather_model), tools=[weather_tool(counter, durable=durable)],
            facts=InMemoryFacts({"u": facts if facts is not None else [Fact("profile.city", "The user lives in Berlin.")]}),
            user_id="u", session_id=session, recorder=Recorder(store), **kwargs,
        )

    return make


@pytest.fixture
def live() -> Callable[[], FunctionModel]:
    """live(): a fresh live provider for counterfactuals of the weather agent's runs."""
    return lambda: FunctionModel(weather_model)

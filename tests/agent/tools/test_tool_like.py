"""Every place that takes tools takes what Agent(tools=) takes: Tools and typed functions, one path."""

from __future__ import annotations

import pytest

from agent import Tool
from agent.bus import ConversationalAgent
from agent.errors import UserError
from agent.orchestration import AgentBuilder, AgentConfig, PlanRunner
from agent.providers import ScriptedModel
from agent.tools import as_tools


def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: the city
    """
    return city


def _binding() -> object:
    from agent.bus import AgentBinding

    return AgentBinding(sources=[])  # type: ignore[call-arg]


def test_as_tools_makes_functions_tools_and_names_what_is_not_one() -> None:
    [made] = as_tools([lookup], "agent a")
    assert isinstance(made, Tool) and made.name == "lookup" and "city" in made.parameters["properties"]
    with pytest.raises(UserError, match=r"agent a: tools\[1\] is int 3, not a Tool or a function"):
        as_tools([lookup, 3], "agent a")  # type: ignore[list-item]
    with pytest.raises(UserError, match=r"agent a: tools must be a list"):
        as_tools(lookup, "agent a")  # type: ignore[arg-type]


def test_orchestration_takes_plain_functions() -> None:
    config = AgentConfig("o", "be brief", ScriptedModel(["x"]), "m", tools=[lookup])  # type: ignore[list-item]
    assert [t.name for t in config.tools] == ["lookup"] and isinstance(config.tools[0], Tool)
    built = AgentBuilder().name("b").system_prompt("p").provider(ScriptedModel(["x"])).model("m").tools([lookup])
    assert [t.name for t in built.build().config.tools] == ["lookup"]
    runner = PlanRunner(store=None, tools=[lookup])  # type: ignore[arg-type]
    assert isinstance(runner.tools["lookup"], Tool)
    with pytest.raises(UserError, match=r"plan runner: tools\[0\] is the name 'lookup'"):
        PlanRunner(store=None, tools=["lookup"])  # type: ignore[arg-type, list-item]


def test_a_bus_agent_takes_plain_functions() -> None:
    import inspect

    from agent.bus import _conversational

    params = inspect.signature(ConversationalAgent.__init__).parameters
    assert "ToolLike" in str(params["tools"].annotation)
    assert _conversational.as_tools([lookup], "bus agent x")[0].name == "lookup"

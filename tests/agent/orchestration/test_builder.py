"""AgentBuilder / create_agent: the fluent API, and build() naming what is missing."""

from __future__ import annotations

from typing import Any

import pytest

from agent import Tool
from agent.orchestration import AgentConfigError, AgentOrchestrator, create_agent
from agent.providers import ScriptedModel, calls


async def test_the_fluent_api_builds_a_working_orchestrator() -> None:
    def lookup(arguments: dict[str, Any]) -> str:
        return f"found {arguments['q']}"

    model = ScriptedModel([calls(("lookup", {"q": "x"})), "answer"])
    built = (create_agent().name("Research Agent").description("Performs research").system_prompt("You research.")
             .provider(model).model("gpt-4o")
             .tool({"name": "lookup", "description": "Look a thing up",
                    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}, lookup)
             .max_iterations(20).max_tokens(8192).temperature(0.5).verbose().user_id("u1").session("s1").build())
    assert isinstance(built, AgentOrchestrator)
    config = built.config
    assert (config.name, config.description, config.model, config.max_iterations, config.max_tokens,
            config.temperature, config.verbose, config.user_id, config.session_id) == (
        "Research Agent", "Performs research", "gpt-4o", 20, 8192, 0.5, True, "u1", "s1")
    context = await built.execute("find x")
    assert context.response == "answer" and context.tool_calls[0].result == "found x"


@pytest.mark.parametrize("drop, named", [
    ("name", "name"), ("system_prompt", "system_prompt"), ("provider", "provider"), ("model", "model"),
])
def test_build_names_each_missing_required_setting(drop: str, named: str) -> None:
    builder = create_agent()
    for key, value in {"name": "a", "system_prompt": "p", "provider": ScriptedModel([]), "model": "m"}.items():
        if key != drop:
            getattr(builder, key)(value)
    with pytest.raises(AgentConfigError, match=f"missing {named} \\(set with \\.{named}\\(\\.\\.\\.\\)\\)"):
        builder.build()


def test_build_lists_every_missing_setting_at_once() -> None:
    with pytest.raises(AgentConfigError, match="missing name, system_prompt, provider, model"):
        create_agent().build()


def test_tool_definitions_need_an_executor_and_a_tool_needs_none() -> None:
    with pytest.raises(AgentConfigError, match="needs an executor"):
        create_agent().tool({"name": "t", "description": "d"})
    with pytest.raises(AgentConfigError, match="lacks description"):
        create_agent().tool({"name": "t"}, lambda a: "x")
    real = Tool("t", "d", {"type": "object", "properties": {}}, lambda a: "x")
    with pytest.raises(AgentConfigError, match="carries its executor"):
        create_agent().tool(real, lambda a: "y")
    assert [t.name for t in create_agent().name("a").system_prompt("p").provider(ScriptedModel([])).model("m")
            .tools([real]).build().config.tools] == ["t"]

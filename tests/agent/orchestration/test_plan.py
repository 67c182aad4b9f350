"""Plans: planning_prompt, parse_plan (well-formed, malformed, and generated plans), cycle checks."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent import Tool
from agent.orchestration import (
    Plan,
    PlanDeadlockError,
    PlanParseError,
    PlanStep,
    check_acyclic,
    parse_plan,
    planning_prompt,
)

SEARCH = Tool("search", "Search the web", {"type": "object", "properties": {"query": {"type": "string"}},
                                           "required": ["query"]}, lambda a: "x")


def test_planning_prompt_names_the_goal_the_tools_and_the_format() -> None:
    prompt = planning_prompt("Find the tallest tower", [SEARCH])
    assert "Find the tallest tower" in prompt and "- search(query: string (required)): Search the web" in prompt
    assert '"depends_on"' in prompt and "{{step.N}}" in prompt


def test_parse_plan_reads_a_fenced_plan_with_the_seeds_names() -> None:
    text = """Here is the plan:
```json
{"goal": "tower", "steps": [
  {"id": 1, "description": "search it", "tool": "search", "args": {"query": "tallest tower"}},
  {"id": 2, "description": "decide", "dependsOn": [1]}
]}
```"""
    plan = parse_plan(text, tools=["search"])
    assert plan.goal == "tower" and plan.status == "pending" and plan.current_step == 0
    assert [(s.id, s.type, s.tool_name, s.tool_args, s.depends_on, s.status) for s in plan.steps] == [
        (1, "tool_call", "search", {"query": "tallest tower"}, [], "pending"),
        (2, "llm_decision", None, {}, [1], "pending")]


def test_parse_plan_finds_a_bare_object_after_prose() -> None:
    plan = parse_plan('Sure {not json} then {"steps": [{"description": "think"}]}')
    assert [(s.id, s.description) for s in plan.steps] == [(1, "think")]


@pytest.mark.parametrize("text, message", [
    ("", "the response is empty"),
    ("no plan here", "no JSON plan found"),
    ('{"steps": [{"id": 1, "description": "a",}]}', "not valid JSON"),
    ("[1, 2]", "no JSON plan found"),
    ('{"goal": "g"}', "the plan has no steps"),
    ('{"steps": []}', "the plan has no steps"),
    ('{"steps": ["go"]}', "step 1 of the list is not an object"),
    ('{"steps": [{"id": 0, "description": "a"}]}', "id must be a positive whole number"),
    ('{"steps": [{"id": true, "description": "a"}]}', "id must be a positive whole number"),
    ('{"steps": [{"id": 1}]}', "step 1 has no description"),
    ('{"steps": [{"id": 1, "description": "a", "tool": "serch"}]}', "names tool 'serch', which is not available"),
    ('{"steps": [{"id": 1, "description": "a", "tool": 5}]}', "tool must be a tool's name"),
    ('{"steps": [{"id": 1, "description": "a", "tool": "search", "args": [1]}]}', "args must be an object"),
    ('{"steps": [{"id": 1, "description": "a", "depends_on": "2"}]}', "depends_on must be a list"),
    ('{"steps": [{"id": 1, "description": "a", "depends_on": [1]}]}', "step 1 depends on itself"),
    ('{"steps": [{"id": 1, "description": "a", "depends_on": [7]}]}', "depends on step 7, which the plan does not"),
    ('{"steps": [{"id": 1, "description": "a"}, {"id": 1, "description": "b"}]}', "1 appear more than once"),
    ('{"steps": [{"id": 1, "description": "a", "type": "dance"}]}', "type 'dance' is not one of"),
    ('{"steps": [{"id": 1, "description": "a", "type": "tool_call"}]}', "is a tool_call but names no tool"),
    ('{"goal": 3, "steps": [{"description": "a"}]}', "goal must be text"),
    ('{"steps": [{"id": 1, "description": "a", "tool": "search", "args": {"query": "{{step.2}}"}}, '
     '{"id": 2, "description": "b", "tool": "search"}]}', "step 1 uses step 2's result but does not depend on it, directly or through another step"),
    ('{"steps": [{"id": 1, "description": "a", "tool": "search", "args": {"query": ["{{step.9}}"]}}]}',
     "step 1 uses {{step.9}}, but the plan has no step 9"),
    ('{"steps": [{"id": 1, "description": "a", "depends_on": [2]}, {"id": 2, "description": "b", '
     '"depends_on": [1]}]}', "steps 1 -> 2 -> 1 wait on each other"),
])
def test_a_malformed_plan_is_refused_naming_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(PlanParseError, match=message):
        parse_plan(text, tools=["search"])


def test_a_long_chain_and_a_cycle_deep_inside_it() -> None:
    chain = [PlanStep(i, f"s{i}", depends_on=[i - 1] if i > 1 else []) for i in range(1, 5001)]
    check_acyclic(chain)  # no recursion limit on long plans
    chain[0].depends_on = [5000]
    with pytest.raises(PlanDeadlockError, match="wait on each other"):
        check_acyclic(chain)


@st.composite
def plans(draw: Any) -> list[dict[str, Any]]:
    """Random well-formed plans: ids 1..n in a random order, each depending only on lower ids."""
    n = draw(st.integers(1, 12))
    ids = draw(st.permutations(list(range(1, n + 1))))
    steps = []
    for step_id in ids:
        deps = draw(st.lists(st.integers(1, max(1, step_id - 1)), max_size=3)) if step_id > 1 else []
        tool = draw(st.sampled_from([None, "search"]))
        steps.append({"id": step_id, "description": draw(st.text(min_size=1, max_size=20).filter(str.strip)),
                      "tool": tool, "args": {"query": draw(st.text(max_size=10))} if tool else {},
                      "depends_on": sorted(set(deps))})
    return steps


@settings(max_examples=60, deadline=None)
@given(plans(), st.sampled_from(["bare", "fenced", "prose"]))
def test_generated_plans_round_trip(steps: list[dict[str, Any]], wrapping: str) -> None:
    text = json.dumps({"goal": "g", "steps": steps})
    text = {"bare": text, "fenced": f"```json\n{text}\n```", "prose": f"The plan: {text} Done."}[wrapping]
    plan = parse_plan(text, tools=["search"])
    assert [(s.id, s.tool_name, s.depends_on) for s in plan.steps] == [
        (s["id"], s["tool"], s["depends_on"]) for s in steps]
    assert Plan.from_dict(plan.to_dict()) == plan


@settings(max_examples=60, deadline=None)
@given(plans(), st.data())
def test_generated_plans_broken_at_random_are_refused_cleanly(steps: list[dict[str, Any]], data: Any) -> None:
    victim = data.draw(st.sampled_from(steps))
    breakage = data.draw(st.sampled_from(["description", "self", "unknown", "cycle", "tool", "args", "id"]))
    if breakage == "description":
        victim["description"] = data.draw(st.sampled_from(["", "   ", None, 3]))
    elif breakage == "self":
        victim["depends_on"] = [*victim["depends_on"], victim["id"]]
    elif breakage == "unknown":
        victim["depends_on"] = [*victim["depends_on"], 99]
    elif breakage == "cycle":
        top = max(s["id"] for s in steps)
        first = next(s for s in steps if s["id"] == 1)
        if top == 1:
            first["depends_on"] = [1]
        else:
            first["depends_on"] = [top]
            next(s for s in steps if s["id"] == top)["depends_on"] = [1]
    elif breakage == "tool":
        victim["tool"] = "no_such_tool"
    elif breakage == "args":
        victim["tool"], victim["args"] = "search", "query=x"
    else:
        victim["id"] = data.draw(st.sampled_from([0, -1, "one", 1.5]))
    with pytest.raises(PlanParseError):
        parse_plan(json.dumps({"steps": steps}), tools=["search"])


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_any_text_is_a_plan_or_a_plan_parse_error(text: str) -> None:
    try:
        parse_plan(text)
    except PlanParseError:
        pass

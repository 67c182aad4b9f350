"""Generated plans with generated faults: the runner's invariants on plans nobody hand-picked."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent import Tool
from agent.orchestration import PlanParseError, PlanRunner, PlanStep, PlanStore, parse_plan


@st.composite
def faulty_plans(draw: Any) -> tuple[list[PlanStep], dict[int, int]]:
    """Random DAG plans (each step depends on lower ids) and, per step, how many times its tool fails first."""
    n = draw(st.integers(1, 10))
    steps, failures = [], {}
    for step_id in range(1, n + 1):
        deps = sorted(set(draw(st.lists(st.integers(1, step_id - 1), max_size=3)))) if step_id > 1 else []
        retries = draw(st.integers(0, 3))
        steps.append(PlanStep(step_id, f"step {step_id}", tool_name="work", tool_args={"step": step_id},
                              depends_on=deps, max_retries=retries))
        failures[step_id] = draw(st.sampled_from([0, 0, 0, 1, 2, 5]))
    order = draw(st.permutations(steps))
    return list(order), failures


@settings(max_examples=80, deadline=None)
@given(faulty_plans())
def test_generated_plans_keep_the_runners_invariants(case: tuple[list[PlanStep], dict[int, int]]) -> None:
    steps, failures = case
    ran: list[int] = []
    slept: list[float] = []
    tries: dict[int, int] = {}

    def work(arguments: dict[str, Any]) -> str:
        step_id = arguments["step"]
        tries[step_id] = tries.get(step_id, 0) + 1
        if tries[step_id] <= failures[step_id]:
            raise RuntimeError(f"fault {tries[step_id]}")
        ran.append(step_id)
        return f"done {step_id}"

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async def go() -> Any:
        store = PlanStore()
        plan = await store.create("p", "g", steps)
        tool = Tool("work", "work", {"type": "object", "properties": {"step": {"type": "integer"}}}, work)
        return await PlanRunner(store, tools=[tool], sleep=sleep, base_delay=1.0).execute(plan.id)

    done = asyncio.run(go())
    by_id = {s.id: s for s in done.steps}
    position = {step_id: i for i, step_id in enumerate(ran)}
    for step in done.steps:
        assert step.attempts <= step.max_retries + 1
        if step.status == "completed":
            # it ran once for real, after every step it depends on
            assert ran.count(step.id) == 1 and all(position[d] < position[step.id] for d in step.depends_on)
            assert step.attempts == failures[step.id] + 1
        elif step.status == "failed":
            assert failures[step.id] > step.max_retries and step.attempts == step.max_retries + 1
        else:
            assert step.status == "skipped" and step.attempts == 0
            assert any(by_id[d].status in ("failed", "skipped") for d in step.depends_on)
    assert done.status == ("failed" if any(s.status == "failed" for s in done.steps) else "completed")
    # the waits double from the base delay, restarting for each step
    expected = [1.0 * 2**k for s in sorted(done.steps, key=lambda s: position.get(s.id, 10**6))
                for k in range(min(failures[s.id], s.max_retries)) if s.attempts]
    assert sorted(slept) == sorted(expected)


@st.composite
def referencing_plans(draw: Any) -> list[dict[str, Any]]:
    """Random DAG plans whose arguments use ``{{step.N}}`` of random N: a dependency (direct or not), another step, or none."""
    n = draw(st.integers(1, 8))
    steps = []
    for step_id in range(1, n + 1):
        deps = sorted(set(draw(st.lists(st.integers(1, step_id - 1), max_size=3)))) if step_id > 1 else []
        refs = draw(st.lists(st.sampled_from(deps) if deps and draw(st.booleans()) else st.integers(1, n + 2),
                             max_size=3))
        text = " ".join(f"<{{{{step.{r}}}}}>" for r in refs)
        steps.append({"id": step_id, "description": f"step {step_id}", "tool": "work",
                      "args": {"step": step_id, "text": text}, "depends_on": deps})
    return draw(st.permutations(steps))


@settings(max_examples=80, deadline=None)
@given(referencing_plans())
def test_a_plan_is_refused_naming_a_bad_reference_or_every_reference_is_a_finished_dependency(
        steps: list[dict[str, Any]]) -> None:
    deps = {s["id"]: set(s["depends_on"]) for s in steps}
    waits = {i: set(d) for i, d in deps.items()}  # what each step waits for, directly or not
    for _ in steps:  # ids only point backwards: len(steps) rounds close the relation
        for i in waits:
            waits[i] |= {a for d in list(waits[i]) for a in deps.get(d, ())}
    bad = {(s["id"], int(r)) for s in steps for r in re.findall(r"\{\{step\.(\d+)\}\}", s["args"]["text"])
           if int(r) not in waits[s["id"]]}
    try:
        plan = parse_plan(json.dumps({"goal": "g", "steps": steps}), tools=["work"])
    except PlanParseError as exc:
        assert bad, f"a plan whose references are all dependencies was refused: {exc}"
        named = re.match(r"step (\d+) uses (?:step (\d+)'s result|\{\{step\.(\d+)\}\})", str(exc))
        assert named is not None, str(exc)
        assert (int(named.group(1)), int(named.group(2) or named.group(3))) in bad
        return
    assert not bad
    finished: list[int] = []
    given_texts: dict[int, str] = {}

    def work(arguments: dict[str, Any]) -> str:
        given_texts[arguments["step"]] = arguments["text"]
        finished.append(arguments["step"])
        return f"result {arguments['step']}"

    async def go() -> Any:
        store = PlanStore()
        await store.save(plan)
        tool = Tool("work", "work", {"type": "object", "properties": {"step": {"type": "integer"},
                                                                      "text": {"type": "string"}}}, work)
        return await PlanRunner(store, tools=[tool]).execute(plan.id)

    done = asyncio.run(go())
    assert done.status == "completed" and sorted(finished) == sorted(s["id"] for s in steps)
    for step in steps:
        refs = re.findall(r"\{\{step\.(\d+)\}\}", step["args"]["text"])
        assert given_texts[step["id"]] == " ".join(f"<result {r}>" for r in refs)
        assert all(finished.index(int(r)) < finished.index(step["id"]) for r in refs)

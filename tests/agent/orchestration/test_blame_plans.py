"""Blame through a plan: the lead executes a plan whose steps other agents do, and a changed answer of
one step's agent is carried on through the later steps and the plan's result up to the final answer."""

from __future__ import annotations

import asyncio
import random

import pytest

from agent import Tool
from agent.orchestration import PlanRunner, PlanStep, agent_tool, blame_team, plan_tools
from agent.orchestration.testing import PLANTED, random_plan_team
from tracer import Recorder, Store

from .conftest import QUESTION, WRONG_FACT, plan_team


async def test_a_wrong_tool_result_inside_a_plan_step_is_blamed_on_its_agent(store: Store) -> None:
    team = plan_team(Recorder(store))
    context = await team.run()
    assert WRONG_FACT in context.response
    report = await blame_team(store, context.run_id or "", agents=team.all, repeats=3)
    decisive = report.decisive
    assert decisive is not None and report.responsible_agent == "researcher", report.summary()
    assert (decisive.stage_kind, decisive.stage_name, decisive.text) == ("tool", "search", WRONG_FACT)
    assert decisive.verdict == "flips" and (decisive.changed, decisive.repeats) == (3, 3)
    assert all(t.verdict == "holds" for t in report.tested[:-1]) and report.tested[-1] is decisive
    # carried on through the plan: the writer (step 2) and the editor (step 3) ran again on the new
    # results, then the lead with the plan's new result
    forks = [store.get_run(r) for r in decisive.fork_runs]
    assert [r.agent for r in forks] == ["researcher"] * 3 + ["writer", "editor", "lead"] * 3
    writer = next(r for r in forks if r.agent == "writer")
    assert writer.input.startswith("Write up: Notes:") and WRONG_FACT not in writer.input
    assert all(WRONG_FACT not in a and a.startswith("Answer: Checked. Report.") for a in decisive.answers)


async def test_a_condition_the_change_would_turn_leaves_the_stage_inconclusive(store: Store) -> None:
    team = plan_team(Recorder(store))
    plan = await team.plans.create("answer", QUESTION, [
        PlanStep(1, "research", tool_name="ask_researcher", tool_args={"task": QUESTION}),
        PlanStep(2, "tall?", type="condition", config={"step": 1, "contains": "450"}, depends_on=[1]),
        PlanStep(3, "write", tool_name="ask_writer", tool_args={"task": "Write up: {{step.1}}"}, depends_on=[2]),
    ])
    context = await team.lead.execute(f"Run plan {plan.id}")
    report = await blame_team(store, context.run_id or "", agents=team.all, repeats=1)
    search = next(t for t in report.tested if t.stage_name == "search")
    assert search.verdict == "inconclusive", report.summary()
    assert "condition 'step 2: tall?' turns false" in (search.note or "")
    # what blame can still say: the plan's result, as the lead got it, decided the answer
    assert report.decisive is not None and report.decisive.stage_name == "execute_plan"


async def blame_plan(seed: int) -> None:
    spec = random_plan_team(random.Random(seed))
    with Store.open(":memory:") as store:
        team = await spec.build(Recorder(store))
        context = await team.run()
        assert context.status == "completed" and PLANTED in context.response
        report = await blame_team(store, context.run_id or "", agents=team.members, repeats=1, test_all=True)
        store.flush()
        culprit_stages = spec.culprit_stages(store, context.run_id or "")
        carrying = spec.carrying_steps()
        expected = min((t for t in report.tested if culprit_stages.get(t.stage_id) in carrying),
                       key=lambda t: t.finished_at)
        summary = "\n".join(report.summary())
        assert report.decisive is expected and report.responsible_agent == spec.culprit, summary
        assert expected.verdict == "flips" and expected.answers[0] != report.answer, summary
        for test in report.tested:  # nothing innocent is convicted: a flip is the culprit's, or the plan's result
            if test.stage_id in culprit_stages:
                assert test.verdict == ("flips" if culprit_stages[test.stage_id] in carrying else "holds"), summary
            elif (test.agent, test.stage_name) == ("lead", "execute_plan"):
                assert test.verdict == "flips", summary
            else:
                assert test.verdict == "holds", summary


@pytest.mark.parametrize("seed", range(8))
def test_blame_through_generated_plans_names_the_planted_culprit_and_nothing_innocent(seed: int) -> None:
    asyncio.run(blame_plan(seed))


async def test_a_wrong_result_of_a_plans_own_tool_is_blamed_on_that_step(store: Store) -> None:
    """No agent did step 1 (the plan's search tool did): blame names the step, in the lead's run."""
    recorder = Recorder(store)
    team = plan_team(recorder, fact="The Eiffel Tower is 330 m tall.")  # the researcher's own search is right
    lookup = Tool("lookup", "Look a page up", {"type": "object", "properties": {"q": {"type": "string"}}},
                  lambda a: WRONG_FACT, durable=True)
    runner = PlanRunner(team.plans, tools=[lookup, agent_tool(team.writer)], decider=team.editor)
    team.lead.update_config(tools=plan_tools(runner))
    plan = await team.plans.create("answer", QUESTION, [
        PlanStep(1, "look up", tool_name="lookup", tool_args={"q": QUESTION}),
        PlanStep(2, "write", tool_name="ask_writer", tool_args={"task": "Write up: {{step.1}}"}, depends_on=[1]),
        PlanStep(3, "check", type="llm_decision", depends_on=[2]),
    ])
    context = await team.lead.execute(f"Run plan {plan.id}")
    assert WRONG_FACT in context.response
    report = await blame_team(store, context.run_id or "", agents=team.all, repeats=2)
    decisive = report.decisive
    assert decisive is not None and report.responsible_agent == "lead", report.summary()
    assert (decisive.stage_kind, decisive.stage_name, decisive.verdict) == ("plan_step", "step 1: look up", "flips")
    assert decisive.text == WRONG_FACT and all(t.verdict == "holds" for t in report.tested[:-1])
    # the writer and the editor ran again on the step's empty result, then the lead (twice)
    agents = [store.get_run(r).agent for r in decisive.fork_runs]
    assert agents == ["writer", "editor", "lead", "lead"]
    assert all(WRONG_FACT not in a for a in decisive.answers)

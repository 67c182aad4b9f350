"""Who and when: blame on a team's run names the responsible agent and the decisive stage, with the
counterfactual re-runs as evidence — the three-agent scenario with one tool result planted wrong."""

from __future__ import annotations

from agent.orchestration import MultiAgentOrchestrator, Team, blame_team
from tracer import Recorder, Store

from .conftest import QUESTION, WRONG_FACT, team_of_three


async def test_a_planted_wrong_tool_result_is_blamed_on_the_researcher_and_nothing_else(store: Store) -> None:
    team = team_of_three(Recorder(store))
    context = await team.lead.execute(QUESTION)
    assert WRONG_FACT in context.response
    report = await blame_team(store, context.run_id or "", agents=team.all, repeats=3)
    decisive = report.decisive
    assert decisive is not None and report.responsible_agent == "researcher"
    assert (decisive.stage_kind, decisive.stage_name, decisive.text) == ("tool", "search", WRONG_FACT)
    assert decisive.verdict == "flips" and (decisive.changed, decisive.repeats) == (3, 3)
    assert store.get_run(decisive.run_id).agent == "researcher" and decisive.run_id != context.run_id
    # nothing else: every stage tested before it holds, and it is the only one named
    before = report.tested[:-1]
    assert report.tested[-1] is decisive and before and all(t.verdict == "holds" for t in before)
    assert {t.agent for t in before} == {"lead", "researcher"}  # their prompts were tested and cleared
    assert report.untested and all(t.finished_at >= decisive.finished_at for t in report.untested)
    # the evidence: re-runs of the researcher and of the lead above it, answering without the planted fact
    forks = [store.get_run(r) for r in decisive.fork_runs]
    assert {r.agent for r in forks} == {"researcher", "lead"} and all(r.forked_from_run for r in forks)
    assert all(WRONG_FACT not in answer for answer in decisive.answers)
    lines = "\n".join(report.summary())
    assert "responsible agent: researcher" in lines and "decisive stage: tool 'search'" in lines
    assert report.to_dict()["responsible_agent"] == "researcher"


async def test_testing_every_stage_shows_the_later_flips_as_carried_on(store: Store) -> None:
    team = team_of_three(Recorder(store))
    context = await team.lead.execute(QUESTION)
    report = await blame_team(store, context.run_id or "", agents=team.all, repeats=1, test_all=True)
    assert report.responsible_agent == "researcher" and not report.untested
    carried = [(t.agent, t.stage_name) for t in report.downstream]
    assert ("lead", "ask_researcher") in carried and ("lead", "ask_writer") in carried
    assert all(t.verdict == "holds" for t in report.tested if t.stage_kind == "prompt")


async def test_a_team_routed_run_is_blamed_through_the_router(store: Store) -> None:
    recorder = Recorder(store)
    three = team_of_three(recorder)
    teams = MultiAgentOrchestrator(recorder=recorder)
    teams.register_team(Team("desk", [three.lead], lambda message, context: "lead"))
    context = await teams.execute(QUESTION)
    report = await blame_team(store, context.metadata["team_run"], agents=three.all, repeats=1)
    assert report.responsible_agent == "researcher" and report.decisive is not None
    assert report.decisive.stage_name == "search"
    assert set(report.agents.values()) == {"desk", "lead", "researcher", "writer"}


async def test_without_the_researchers_provider_its_stages_are_inconclusive(store: Store) -> None:
    team = team_of_three(Recorder(store))
    context = await team.lead.execute(QUESTION)
    report = await blame_team(store, context.run_id or "", agents=[team.lead, team.writer], repeats=1)
    researcher_tests = [t for t in report.tested if t.sent_in != context.run_id and t.agent == "researcher"]
    assert researcher_tests and all(t.verdict == "inconclusive" for t in researcher_tests)
    assert any("no provider given for researcher" in n for n in report.notes)
    # the lead's own result of the researcher is then the earliest stage that flips
    assert report.responsible_agent == "lead" and report.decisive is not None
    assert report.decisive.stage_name == "ask_researcher"


async def test_a_correct_fact_still_gets_its_stage_named(store: Store) -> None:
    team = team_of_three(Recorder(store), fact="The Eiffel Tower is 330 m tall.")
    context = await team.lead.execute(QUESTION)
    report = await blame_team(store, context.run_id or "", agents=team.all, repeats=1)
    # blame says what decided the answer, right or wrong: here too the search result
    assert report.decisive is not None and report.decisive.stage_name == "search"

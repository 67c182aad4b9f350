"""Edits for every kind of item: a tool result with its call kept, a model output replaced from the
call that made it, an item restored into the window; the chain of a convicted tool result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from agent import ConversationMemory
from agent.evidence import Edit, EditError, blame, counterfactual
from agent.evidence.cli import register
from tests.agent.evidence.planted import planted
from tracer import Store, dropped_context, earlier_verdicts, rank, why


def _named(store: Store, run_id: str, name: str) -> str:
    from tracer import item_names

    return next(h for h, n in item_names(store.load_run(run_id)).items() if n == name)


async def test_a_tool_result_returns_nothing_or_an_error_with_its_call_kept(
    store: Store, make_agent: Any, live: Any
) -> None:
    agent = make_agent()
    original = await agent.run("Weather at home?")
    assert original.answer == "Berlin: rain."
    nothing = await counterfactual(store, original.run_id, edits=Edit.returned_nothing("result:weather#1"),
                                   provider=live(), tools=list(agent.tools.values()), repeats=1)
    assert nothing.verdict == "flips" and nothing.edits[0].name == "result:weather#1"
    fork = store.load_run(nothing.outcomes[0].run_id)
    results = [i for i in fork.items.values() if i.kind == "tool_result"]
    calls_ = [i for i in fork.items.values() if i.kind == "tool_call"]
    assert calls_ and results and all(r.body["content"] == "" for r in results)  # the call stayed, got nothing
    failed = await counterfactual(store, original.run_id, edits=Edit.returned_error("result:weather#1", "offline"),
                                  provider=live(), tools=list(agent.tools.values()), repeats=1)
    assert failed.outcomes[0].answer == "error: Error: offline"
    # "remove" on a tool result means the same: the tool returned nothing (the model cannot fetch it again)
    removed = await counterfactual(store, original.run_id, edits=Edit.remove("result:weather#1"), provider=live(),
                                   tools=list(agent.tools.values()), repeats=1)
    assert removed.edits[0].action == "nothing" and removed.verdict == "flips"
    # the verdicts recorded so far are a ranking signal for why
    result_hash = removed.edits[0].item.hash
    assert earlier_verdicts(store, original.run_id)[result_hash] == "flips"
    ranked = rank(why(store, original.run_id), verdicts=earlier_verdicts(store, original.run_id))
    assert ranked[0].item_hash == result_hash and any("earlier counterfactual" in r for r in ranked[0].reasons)
    replaced = await counterfactual(store, original.run_id,
                                    edits=Edit.replace("result:weather#1", '{"city": "Berlin", "sky": "snow"}'),
                                    provider=live(), tools=list(agent.tools.values()), repeats=1)
    assert replaced.outcomes[0].answer == "Berlin: snow."
    with pytest.raises(EditError, match="edit of a tool result"):
        await counterfactual(store, original.run_id, edits=Edit.returned_nothing("memory:profile.city"),
                             provider=live())


async def test_a_wrong_argument_is_replaced_from_the_call_that_made_it(
    store: Store, make_agent: Any, counter: Any, live: Any
) -> None:
    agent = make_agent()
    original = await agent.run("Weather at home?")
    result = await counterfactual(store, original.run_id,
                                  edits=Edit.replace("call:weather#1", json.dumps({"city": "Lisbon"})),
                                  provider=live(), tools=list(agent.tools.values()), repeats=2)
    assert result.verdict == "flips" and [o.answer for o in result.outcomes] == ["Lisbon: sun."] * 2
    assert result.stage_name == "turn 1"  # the call that produced it: the edited response is served there
    fork = store.load_run(result.outcomes[0].run_id)
    assert fork.inferences()[0].attributes["provider"] == "recording"
    assert counter.runs[-1] == ("weather", {"city": "Lisbon"})  # the new call ran (durable), once for both


async def test_blame_walks_the_chain_and_tests_a_model_output_given_an_alternative(
    store: Store, make_agent: Any, live: Any
) -> None:
    agent = make_agent()
    original = await agent.run("Weather at home?")
    report = await blame(store, original.run_id, provider=live(), tools=list(agent.tools.values()), repeats=1)
    assert [c.name for c in report.culprits] == ["memory:profile.city", "result:weather#1"]
    chain = report.culprits[1].chain
    assert chain is not None
    kinds = [link.kind for link in chain.links]
    assert kinds[:2] == ["call", "inference"] and "source" in kinds
    source = next(link for link in chain.links if link.kind == "source")
    assert "memory:profile.city" in source.text and "'berlin'" in source.text.lower()
    assert "--replace call:weather#1" in chain.try_next
    skipped = next(s for s in report.skipped if s.name == "call:weather#1")
    assert "alternative" in skipped.reason
    given = await blame(store, original.run_id, provider=live(), tools=list(agent.tools.values()), repeats=1,
                        alternatives={"call:weather#1": json.dumps({"city": "Lisbon"})})
    call = next(s for s in given.tested if s.name == "call:weather#1")
    assert call.action == "replace" and call.verdict == "flips"


async def test_an_earlier_answer_in_the_history_is_replaced_and_a_left_out_item_restored(
    store: Store, make_agent: Any, live: Any
) -> None:
    agent = make_agent(facts=[], memory=ConversationMemory(max_messages=3))
    await agent.run("I moved to Lisbon")
    await agent.run("Weather at home?")
    third = await agent.run("Weather at home?")
    store.flush()
    data = store.load_run(third.run_id)
    assert third.answer == "nowhere: sun."  # "I moved to Lisbon" fell out of the window
    # the run records only what fell out of the window since the run before; dropped follows the chain
    left = [d for report in dropped_context(store, third.run_id) for d in report.items]
    moved = next(d.item_hash for d in left if d.text == "I moved to Lisbon")
    assert moved not in data.items
    restored = await counterfactual(store, third.run_id, edits=Edit.restore(moved), provider=live(),
                                    tools=list(agent.tools.values()), repeats=1)
    assert restored.verdict == "flips" and restored.outcomes[0].answer == "Lisbon: sun."
    fork = store.load_run(restored.outcomes[0].run_id)
    assert moved in {e.item_hash for e in fork.snapshot(fork.inferences()[0].id)}
    report = await blame(store, third.run_id, provider=live(), tools=list(agent.tools.values()), repeats=1)
    assert [s.item_hash for s in report.omissions] == [moved]
    with pytest.raises(EditError, match="not left out of"):
        await counterfactual(store, third.run_id, edits=Edit.restore("settings"), provider=live())


def test_the_cli_takes_a_provider_function_and_item_names(tmp_path: Path) -> None:
    import asyncio

    path = tmp_path / "cli.duckdb"

    async def make() -> Any:
        with Store.open(path) as store:
            return await planted(3, store, benign=14, kind="tool_result")

    case = asyncio.run(make())

    @click.group()
    def cli() -> None:
        """footprint"""

    register(cli)
    provider = "tests.agent.evidence.planted:depot_model"
    out = CliRunner().invoke(cli, ["blame", case.run_id, "--db", str(path), "--provider", provider, "--repeat", "1",
                                   "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["culprits"][0] == case.culprit and data["culprit_names"][0].startswith("result:search#")
    assert data["reruns"] > 0 and data["seconds"] > 0
    name = data["culprit_names"][0]
    text = CliRunner().invoke(cli, ["counterfactual", case.run_id, "--returned-nothing", name, "--db", str(path),
                                    "--provider", provider, "--repeat", "1"])
    assert text.exit_code == 0 and "Verdict: flips" in text.output and "Control: a re-run with no edit" in text.output
    replayed = CliRunner().invoke(cli, ["replay", case.run_id, "--db", str(path), "--provider", provider])
    assert replayed.exit_code == 0 and "The live model reproduces the recorded answer." in replayed.output
    bad = CliRunner().invoke(cli, ["blame", case.run_id, "--db", str(path), "--provider", "nope"])
    assert bad.exit_code == 2 and "MODULE:FUNC" in bad.output

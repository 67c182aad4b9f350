"""An item sent only to an earlier run's model is tested where it acted: in that run, then here."""

from __future__ import annotations

import re

from agent import Agent, Fact, InMemoryFacts
from agent.evidence import blame
from agent.providers import FunctionModel, ModelRequest
from tracer import Recorder, Store


def recall(request: ModelRequest) -> str:
    last = max(i for i, ci in enumerate(request.context) if ci.item.kind == "user")
    question = request.context[last].item.text
    kinds = ("memory",) if "What is the code" in question else ("assistant",)
    for ci in request.context[:last]:
        found = re.search(r"code is (\d+)", ci.item.text) if ci.item.kind in kinds else None
        if found:
            return f"The code is {found.group(1)}." if kinds == ("memory",) else f"You were told {found.group(1)}."
    return "I do not know."


async def test_a_fact_forgotten_since_is_tested_in_the_run_that_last_sent_it(store: Store) -> None:
    facts = InMemoryFacts({"u": [Fact("code", "The code is 4821."), Fact("tea", "The user likes tea.")]})
    agent = Agent("recall", provider=FunctionModel(recall), facts=facts, user_id="u", recorder=Recorder(store),
                  session_id="earlier")
    first = await agent.run("What is the code?")
    assert first.answer == "The code is 4821."
    await facts.forget("u", "code")
    second = await agent.run("Which code were you told?")
    assert second.answer == "You were told 4821."
    store.flush()
    report = await blame(store, second.run_id, provider=FunctionModel(recall), repeats=1)
    through = next(s for s in report.tested if s.action == "through")
    assert through.text == "The code is 4821." and through.earlier_run == first.run_id
    assert through.verdict == "flips" and through.via == f"in run {first.run_id}"
    assert len(through.run_ids) == 2  # the earlier run's re-run, then this run's
    # named first: it came before the answer it made in the earlier run, which flips here too
    assert [c.text for c in report.culprits] == ["The code is 4821.", "The code is 4821."][:len(report.culprits)]
    assert report.culprits[0].action == "through"
    tea = next(s for s in report.tested if s.text == "The user likes tea.")
    assert tea.verdict == "holds"  # still sent to this run: tested here, directly
    fork = store.get_run(through.run_ids[1])
    assert fork.forked_from_run == second.run_id and fork.fork_edit is not None
    assert fork.fork_edit["through_run"] == first.run_id

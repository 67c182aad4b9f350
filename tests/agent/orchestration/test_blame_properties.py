"""Generated teams: random trees of agents and tools, each model using a random part of what it is
given. Blame must name the earliest stage that has a path of use to the final answer — and its agent."""

from __future__ import annotations

import asyncio
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.orchestration import blame_team
from agent.orchestration.testing import build_team, expected_decisive, random_team
from tracer import Recorder, Store


async def blame_one(seed: int) -> None:
    spec = random_team(random.Random(seed))
    with Store.open(":memory:") as store:
        lead, members = build_team(spec, Recorder(store))
        context = await lead.execute("start")
        assert context.status == "completed"
        report = await blame_team(store, context.run_id or "", agents=members, repeats=1)
        store.flush()
        stages = [(s.ended_at or 0.0, data.run.agent, s.name, s.id)
                  for data in (store.load_run(r) for r in report.agents) for s in data.stages if s.kind == "tool"]
        expected = expected_decisive(spec, stages)
        if expected is None:
            assert report.decisive is None, report.summary()
            return
        assert report.decisive is not None, report.summary()
        assert (report.responsible_agent, report.decisive.stage_id) == expected, report.summary()
        assert all(t.verdict == "holds" for t in report.tested[:-1]), report.summary()


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_blame_names_the_earliest_stage_with_a_path_to_the_answer(seed: int) -> None:
    asyncio.run(blame_one(seed))

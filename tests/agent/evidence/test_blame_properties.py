"""The product's promise, measured: on generated planted-culprit scenarios (see ``planted.py``), blame
names the culprit first with ``flips``, never convicts a benign item, and `why` ranks the culprit high.

``FOOTPRINT_BLAME_CASES`` sets the number of scenarios (200 here; ``bench/blame.py`` runs more).
Each scenario's model is deterministic, so one re-run per counterfactual is a full test of it.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from agent.evidence import blame
from agent.providers import FunctionModel
from tests.agent.evidence.planted import depot_model, planted
from tracer import Store, rank, why

CASES = int(os.environ.get("FOOTPRINT_BLAME_CASES", "200"))


async def test_blame_convicts_the_planted_culprit_and_never_a_benign_item(tmp_path: Path) -> None:
    first = top5 = 0
    wrong_first: list[str] = []
    convicted_benign: list[str] = []
    unranked: list[str] = []
    kinds: Counter[str] = Counter()
    windows: Counter[str] = Counter()
    with Store.open(tmp_path / "planted.duckdb") as store:
        for seed in range(CASES):
            case = await planted(seed, store)
            scenario = case.scenario
            kinds[scenario.kind + (" chain" if scenario.chain else "")] += 1
            windows[scenario.window] += 1
            report = await blame(store, case.run_id, provider=FunctionModel(depot_model), tools=case.tools,
                                 repeats=1)
            culprits = report.culprits
            if culprits and culprits[0].item_hash == case.culprit and culprits[0].verdict == "flips":
                first += 1
            else:
                wrong_first.append(f"{scenario.describe()} -> {[c.name for c in culprits]}")
            for suspect in [*report.tested, *report.left_out]:
                if suspect.verdict == "flips" and suspect.item_hash not in {case.culprit, *case.derived}:
                    convicted_benign.append(f"{scenario.describe()}: {suspect.name} {suspect.text!r}")
            ranked = [r.item_hash for r in rank(why(store, case.run_id))]
            if case.culprit in ranked[:5]:
                top5 += 1
            else:
                place = ranked.index(case.culprit) + 1 if case.culprit in ranked else None
                unranked.append(f"{scenario.describe()} (ranked {place})")
    # every kind of culprit, every kind of window, in the mix
    assert set(kinds) >= {"memory", "feature", "history_user", "history_tool", "tool_result", "memory chain"}, kinds
    assert set(windows) == {"none", "messages", "tokens", "pinned"}, windows
    assert not convicted_benign, "blame convicted benign items:\n" + "\n".join(convicted_benign)
    assert first >= 0.95 * CASES, f"culprit first in {first}/{CASES}:\n" + "\n".join(wrong_first[:20])
    assert top5 >= 0.90 * CASES, f"culprit in why's top 5 in {top5}/{CASES}:\n" + "\n".join(unranked[:20])

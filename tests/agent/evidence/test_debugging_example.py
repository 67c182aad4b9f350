"""The example of docs/debugging.md holds: a tool-result culprit, and a wrong-argument chain."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from agent.evidence import Edit, blame, counterfactual
from agent.providers import FunctionModel
from tracer import Store

_spec = importlib.util.spec_from_file_location(
    "debugging_weather", Path(__file__).resolve().parents[3] / "fixtures/debugging/weather.py")
assert _spec is not None and _spec.loader is not None
weather = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(weather)


async def test_the_debugging_guide_example(tmp_path: Path) -> None:
    path = str(tmp_path / "debugging.duckdb")
    porto, home = await weather.record(path)
    with Store.open(path) as store:
        provider = FunctionModel(weather.model)
        stale = await blame(store, porto, provider=provider, tools=weather.tools(), repeats=1)
        assert [c.name for c in stale.culprits] == ["result:forecast#1"]
        assert stale.culprits[0].chain is not None and "input" in stale.culprits[0].chain.links[-1].text
        fixed = await counterfactual(store, porto, provider=provider, repeats=1, edits=Edit.replace(
            "result:forecast#1", json.dumps({"city": "Porto", "forecast": "heavy rain, 14 °C"})))
        assert fixed.verdict == "flips" and fixed.outcomes[0].answer.startswith("Yes, take an umbrella")
        wrong = await blame(store, home, provider=provider, tools=weather.tools(), repeats=1)
        assert [c.name for c in wrong.culprits] == ["memory:profile.home", "result:forecast#1"]
        chain = wrong.culprits[1].chain
        assert chain is not None and any("memory:profile.home" in link.text for link in chain.links)
        said = next(s for s in wrong.tested if s.text.startswith("By the way, I moved"))
        assert said.verdict == "holds"
        proof = await counterfactual(store, home, provider=provider, tools=weather.tools(), repeats=1,
                                     edits=Edit.replace("call:forecast#1", json.dumps({"city": "Lisbon"})))
        assert proof.verdict == "flips" and "Lisbon" in proof.outcomes[0].answer

"""Replay, counterfactual and blame over a run whose tool result reached the model cut to its bound."""

from __future__ import annotations

from typing import Any

from agent import Agent, tool
from agent.evidence import Edit, blame, counterfactual, replay
from agent.providers import FunctionModel, ModelRequest, ModelResponse, calls, tool_results
from tracer import Recorder, Store

_CODE = "door code 4711"
_REPORT = "\n".join([*(f"entry {n}: nothing of note" for n in range(400)), _CODE,
                     *(f"entry {n}: nothing of note" for n in range(400, 800))])


@tool(durable=True)
def read_report() -> str:
    """The building's report."""
    return _REPORT


def _model(request: ModelRequest) -> ModelResponse | str:
    """Calls the tool once, then answers with the door code when its result shows it."""
    results = tool_results(request)
    if not results:
        return calls(("read_report", {}), text="")
    return "The code is 4711." if _CODE in results[-1]["content"] else "The report does not say."


async def _cut_run(store: Store, bound: int = 2_000) -> tuple[Agent, Any]:
    agent = Agent("building", provider=FunctionModel(_model, name="fm"), tools=[read_report],
                  recorder=Recorder(store), max_tool_result_chars=bound)
    return agent, await agent.run("What is the door code?")


def _result_stage(store: Store, run_id: str) -> tuple[Any, Any]:
    data = store.load_run(run_id)
    return data, next(s for s in data.stages if s.kind == "tool")


async def test_a_run_with_a_cut_result_replays_exactly(store: Store) -> None:
    _, original = await _cut_run(store)
    assert original.answer == "The report does not say."  # the code was in the part left out
    replayed = await replay(store, original.run_id)
    assert replayed.identical, replayed.divergence
    assert replayed.answer == original.answer


async def test_a_cut_result_that_fits_a_bigger_bound_still_replays_as_recorded(store: Store) -> None:
    """The rebuilt agent must not cut again with the default bound what a bigger bound let through."""
    _, original = await _cut_run(store, bound=len(_REPORT) - 10)
    assert original.answer == "The code is 4711."  # the code sits in the head that was kept
    store.flush()
    assert "result_cut" in _result_stage(store, original.run_id)[1].attributes
    replayed = await replay(store, original.run_id)
    assert replayed.identical, replayed.divergence


async def test_restoring_what_was_cut_flips_the_answer(store: Store) -> None:
    _, original = await _cut_run(store)
    store.flush()
    data, stage = _result_stage(store, original.run_id)
    uncut_hash, shown_hash = data.outputs[stage.id]
    uncut = data.items[uncut_hash].body["text"]
    assert uncut == _REPORT and stage.attributes["result_cut"]["chars"] == len(_REPORT)
    result = await counterfactual(store, original.run_id, edits=Edit.replace(shown_hash, uncut),
                                  provider=FunctionModel(_model, name="fm"), repeats=2)
    assert result.verdict == "flips"
    assert {o.answer for o in result.outcomes} == {"The code is 4711."}


async def test_blame_runs_over_a_cut_result(store: Store) -> None:
    agent, original = await _cut_run(store)
    report = await blame(store, original.run_id, provider=FunctionModel(_model, name="fm"),
                         tools=list(agent.tools.values()), repeats=1)
    assert any(s.kind == "tool_result" for s in report.tested)
    result = next(s for s in report.tested if s.kind == "tool_result")
    assert result.verdict in ("flips", "holds")

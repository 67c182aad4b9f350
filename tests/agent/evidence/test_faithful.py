"""Faithful re-runs: the rebuild leaves out exactly what the recording's window left out, a control
re-run comes before every verdict, and an unreproducible control is inconclusive, never flips."""

from __future__ import annotations

from pathlib import Path

from agent import Agent, ConversationMemory, Hooks, Tool, tool
from agent.evidence import Control, Controls, Edit, blame, counterfactual, replay
from agent.evidence._rebuild import ServedTools
from agent.evidence._recording import read_recording
from agent.providers import FunctionModel, ModelRequest, ModelResponse, calls
from tests.agent.evidence.planted import PinnedWindow
from tracer import ContextItem, Item, ItemKind, Origin, OriginKind, Recorder, Store


def echo_code(request: ModelRequest) -> ModelResponse | str:
    """Answers with the code the context states (the newest statement wins), else 'none'."""
    last = max(i for i, ci in enumerate(request.context) if ci.item.kind == "user")
    question = request.context[last].item.text
    if question.startswith("Note"):
        return "Noted."
    if not any(ci.item.kind == "tool_result" for ci in request.context[last:]):
        return calls(("clock", {}, "clock-1"))
    codes = [w for ci in request.context if ci.item.kind == "user" for w in ci.item.text.split() if w.isdigit()]
    return f"code {codes[-1]}" if codes else "none"


def clock_tool() -> Tool:
    @tool(durable=True)
    async def clock() -> str:
        """The time."""
        return "09:00"

    return clock


async def _session(store: Store, memory: ConversationMemory, notes: int) -> tuple[Agent, str]:
    agent = Agent("faithful", provider=FunctionModel(echo_code), tools=[clock_tool()], memory=memory,
                  recorder=Recorder(store), session_id="faithful")
    for n in range(notes):
        await agent.run(f"Note {n}: the code is {1000 + n}")
    last = await agent.run("What is the code?")
    store.flush()
    return agent, last.run_id


async def test_a_window_that_is_not_oldest_first_and_drops_more_than_twenty_is_rebuilt_exactly(
    tmp_path: Path,
) -> None:
    with Store.open(tmp_path / "s.duckdb") as store:
        _, run_id = await _session(store, PinnedWindow(6), notes=20)
        data = store.load_run(run_id)
        first = data.inferences()[0]
        assert first.attributes["window_dropped"] > 20
        result = await replay(store, run_id)
        assert result.identical, result.divergence.reason
        recording = read_recording(data)
        control = await Controls().check(recording, 1, provider=FunctionModel(echo_code),
                                         tools=ServedTools(recording), same=str.__eq__, original=data.run.output or "")
        assert control.reproduced, control.reason
        # the pinned start (the first note) is in context: without it the answer holds; the newest note decides
        report = await blame(store, run_id, provider=FunctionModel(echo_code), repeats=1)
        assert [c.text for c in report.culprits][:1] == ["Note 19: the code is 1019"]
        assert all(s.verdict in ("holds", "flips") for s in report.tested)
        # what the window left out is restored in its place: the answer does not change (the newest wins)
        assert report.left_out and all(s.verdict == "holds" for s in report.left_out)


async def test_an_oldest_first_window_over_twenty_dropped_replays_and_holds(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.duckdb") as store:
        _, run_id = await _session(store, ConversationMemory(max_messages=8), notes=16)
        assert store.load_run(run_id).inferences()[0].attributes["window_dropped"] > 20
        assert (await replay(store, run_id)).identical
        said = next(h for h, i in store.load_run(run_id).items.items() if i.text == "Note 14: the code is 1014")
        held = await counterfactual(store, run_id, edits=Edit.remove(said), provider=FunctionModel(echo_code),
                                    repeats=2)
        assert held.control is not None and held.control.reproduced and held.verdict == "holds"


async def test_a_control_that_does_not_reproduce_gives_inconclusive_never_flips(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.duckdb") as store:
        memory = ConversationMemory()
        agent: Agent | None = None

        async def sneak_in(ctx: object) -> None:  # a hook adds a message the recording cannot explain
            assert agent is not None
            if getattr(ctx, "turn", 0) == 2:
                memory.add(agent.conversation_id, ContextItem(Item.of_text(ItemKind.USER, "the code is 4242"),
                                                              Origin(OriginKind.HOOK, source="sneak")))

        agent = Agent("faithful", provider=FunctionModel(echo_code), tools=[clock_tool()],
                      memory=memory, recorder=Recorder(store), hooks=Hooks(before_turn=sneak_in))
        await agent.run("Note: the code is 1234")
        run = await agent.run("What is the code?")
        assert run.answer == "code 4242"
        store.flush()
        data = store.load_run(run.run_id)
        note = next(h for h, i in data.items.items() if i.text == "Note: the code is 1234")
        result = await counterfactual(store, run.run_id, edits=Edit.remove(note), stage=2,
                                      provider=FunctionModel(echo_code))
        assert result.verdict == "inconclusive" and not result.outcomes
        assert "does not reproduce the recorded context of inference 'turn 2'" in result.reason
        # a live model that is not the recording's: inconclusive too, naming it
        other = FunctionModel(lambda request: "something else", name="other")
        first = await counterfactual(store, run.run_id, edits=Edit.remove(note), stage=1, provider=other)
        assert first.verdict == "inconclusive" and "does not give the recorded answer" in first.reason
        report = await blame(store, run.run_id, provider=other, repeats=1)
        assert not report.culprits and all(s.verdict == "inconclusive" for s in report.tested)
        assert all("live model" in s.reason or "does not reproduce" in s.reason for s in report.tested), [s.reason for s in report.tested]


async def test_controls_are_cached_per_run_and_stage(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.duckdb") as store:
        _, run_id = await _session(store, ConversationMemory(max_messages=8), notes=4)
        controls = Controls()
        data = store.load_run(run_id)
        sent = {e.item_hash for e in data.snapshot(data.inferences()[0].id)}
        notes = [h for h, i in data.items.items() if i.text.startswith("Note") and h in sent]
        assert len(notes) >= 2
        for note in notes:
            await counterfactual(store, run_id, edits=Edit.remove(note), provider=FunctionModel(echo_code),
                                 repeats=1, controls=controls)
        # one snapshot replay for the run, one live control for the one stage the notes are first sent at
        assert controls.reruns == 2 and list(controls.live) == [(run_id, 0)]
        assert isinstance(controls.live[(run_id, 0)], Control)

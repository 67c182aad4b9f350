"""The flowchart rendering behind footprint's syrupy extension: stable, readable, normalized."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from agent import Agent, InMemoryFacts, tool
from agent._facts import Fact
from agent.providers import ScriptedModel, calls
from tracer import ContextItem, Item, ItemKind, Origin, OriginKind, Recorder, RunData, Store
from tracer.syrupy import FlowchartExtension, render_flowchart


@tool()
async def lookup(city: str) -> str:
    """Weather for a city.

    Args:
        city: the city
    """
    if city == "Atlantis":
        raise ValueError("no such city")
    return f"sunny in {city}"


async def _session(db: Path, answer: str = "Sunny in Paris; Atlantis is unknown.") -> list[RunData]:
    """Two runs of one session: a parallel tool batch with a failing call, then a follow-up."""
    with Store.open(db) as store:
        agent = Agent(
            "weather", recorder=Recorder(store), tools=[lookup],
            provider=ScriptedModel([calls(("lookup", {"city": "Paris"}), ("lookup", {"city": "Atlantis"})), answer,
                                    "You are welcome."]),
            facts=InMemoryFacts({"u": [Fact("profile.home", "The user lives in Paris.\nSince 2020.")]}), user_id="u",
        )
        first = await agent.run("weather in Paris and Atlantis?")
        second = await agent.run("thanks")
        store.flush()
        return [store.load_run(first.run_id), store.load_run(second.run_id)]


async def test_two_recordings_of_the_same_behaviour_render_the_same(tmp_path: Path) -> None:
    one = render_flowchart(await _session(tmp_path / "a.duckdb"))
    two = render_flowchart(await _session(tmp_path / "b.duckdb"))  # new run, stage, call and session ids
    assert one == two
    assert not re.search(r"\b[rs]-0[0-9a-f]+|\bcall_\d", one)


async def test_the_rendering_shows_stages_context_origins_and_the_answer(tmp_path: Path) -> None:
    text = render_flowchart(await _session(tmp_path / "a.duckdb"))
    lines = text.splitlines()
    assert lines[0] == "════ run R1 · agent weather · session session#1 · answered ════"
    assert "  input: weather in Paris and Atlantis?" in lines
    assert "  output: Sunny in Paris; Atlantis is unknown." in lines
    assert any(line.startswith("════ run R2 · agent weather · session session#1") for line in lines)
    # a parallel batch: two tool stages forked from the batch, the next inference joins them
    assert "S5 tool 'lookup' · ok  <- S4 (fork)  in S4" in lines
    assert "S6 tool 'lookup' · error  <- S4 (fork)  in S4" in lines
    assert "S7 inference 'turn 2' · ok  <- S5, S6 (join)" in lines
    assert any(line.startswith("    ") and "[call#2 error] Error: lookup failed: ValueError: no such city" in line
               for line in lines)
    # an item's text appears in full once, with its origin; multi-line text is indented
    assert "      | The user lives in Paris." in lines and "      | Since 2020." in lines
    assert any("memory (again)" in line and "<- memory profile.home @ S1" in line for line in lines)
    # the second run's inference saw the first run's messages: their origins name R1's stages
    second = text[text.index("run R2"):]
    assert "<- user input @ R1.S0" in second
    assert "duration_ms" not in text


async def test_a_changed_answer_changes_only_what_changed(tmp_path: Path) -> None:
    before = render_flowchart(await _session(tmp_path / "a.duckdb"))
    after = render_flowchart(await _session(tmp_path / "b.duckdb", answer="Rain in Paris."))
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=False) if a != b]
    assert changed
    for a, b in changed:  # the answer, and the token counts that follow from it
        assert ("Sunny in Paris" in a and "Rain in Paris" in b) or ("tokens" in a and "tokens" in b)


def test_dropped_context_and_unknown_ids_are_shown_normalized(tmp_path: Path) -> None:
    with Store.open(tmp_path / "fp.duckdb") as store:
        run = Recorder(store).start_run(agent="a", input="hi", attributes={"conversation": "0f" * 16})
        with run.stage("inference", "turn 1") as stage:
            kept = ContextItem(Item.of_text(ItemKind.USER, "hi"), Origin(OriginKind.USER, source="input"))
            old = ContextItem(Item.of_text(ItemKind.USER, "an old message"),
                              Origin(OriginKind.STAGE, "r-0193a1b2c3d4-00f1a2b3c4", "s-0193a1b2c3d4-00f1a2b3c5"))
            stage.inputs([kept], dropped=[(old, "window")])
            stage.output(Item.of_text(ItemKind.ASSISTANT, "hello"))
        run.end("answered", output="hello")
        store.flush()
        text = render_flowchart(store)
    assert "  not in context:" in text
    assert "an old message  <- stage#1  (dropped by window)" in text
    assert '"conversation": "uuid#1"' in text


def test_the_extension_serializes_runs_and_rejects_anything_else(tmp_path: Path) -> None:
    extension: Any = FlowchartExtension()
    with Store.open(tmp_path / "fp.duckdb") as store:
        run = Recorder(store).start_run(agent="a", input="hi")
        run.end("answered", output="hello")
        store.flush()
        data = store.load_run(run.id)
        assert extension.serialize(data) == render_flowchart([data]) == render_flowchart(store)
    assert FlowchartExtension._file_extension == "flow.txt"
    with pytest.raises(TypeError, match="RunData"):
        render_flowchart(42)  # type: ignore[arg-type]

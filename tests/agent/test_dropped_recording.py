"""What the memory window left out is recorded without growing with the square of the conversation."""

from __future__ import annotations

from pathlib import Path

from agent import Agent, ConversationMemory
from agent._loop import DROPPED_RECORDED
from agent.providers import ScriptedModel
from tracer import Recorder, Store


async def test_a_long_conversation_records_only_the_newest_dropped_messages(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.duckdb") as store:
        agent = Agent(
            "a", provider=ScriptedModel(["ok " * 20], repeat=True), recorder=Recorder(store),
            memory=ConversationMemory(max_tokens=60),
        )
        for n in range(40):
            await agent.run(f"message {n} " + "x" * 80)
        store.flush()
        last = store.load_run(store.resolve_run_id("last"))
        inference = last.inferences()[0]
        dropped = [e for e in last.inputs[inference.id] if not e.included]
        total = inference.attributes["window_dropped"]
        assert total > DROPPED_RECORDED  # far more fell out of the window than is recorded
        assert len(dropped) == DROPPED_RECORDED
        # the recorded ones are the newest to fall out: the last of them is the message just before the window
        memory = agent.memory.require(agent.conversation_id).messages
        assert dropped[-1].item_hash == memory[total - 1].item.hash

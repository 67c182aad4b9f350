"""What the memory window left out is recorded in full, by reference, and a run's later calls record only what is new."""

from __future__ import annotations

from pathlib import Path

from agent import Agent, ConversationMemory, tool
from agent.providers import FunctionModel, ModelRequest, ModelResponse, calls
from tracer import DROPPED_SINCE, Recorder, Store, dropped_context, left_out


@tool
async def note(text: str) -> str:
    """Take a note.

    Args:
        text: what to note
    """
    return "noted: " + text * 10


def two_notes_then_answer(request: ModelRequest) -> ModelResponse | str:
    last_user = max(i for i, ci in enumerate(request.context) if ci.item.kind == "user")
    done = sum(1 for ci in request.context[last_user:] if ci.item.kind == "tool_result")
    return calls(("note", {"text": f"n{done}"}, f"c{done}")) if done < 2 else "ok " * 20


async def test_every_left_out_message_is_recorded_and_later_calls_record_only_the_new_ones(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.duckdb") as store:
        agent = Agent("a", provider=FunctionModel(two_notes_then_answer), tools=[note], recorder=Recorder(store),
                      memory=ConversationMemory(max_tokens=120))
        for n in range(30):
            await agent.run(f"message {n} " + "x" * 80)
        store.flush()
        last = store.load_run(store.resolve_run_id("last"))
        first, *later = last.inferences()
        total = first.attributes["window_dropped"]
        assert total > 20  # far more than the 20 an earlier version recorded
        own = [e for e in last.inputs[first.id] if not e.included]
        memory = agent.memory.require(agent.conversation_id).messages
        # every message the first call left out, in conversation order, by reference to the stored item;
        # the run itself recorded only what fell out since the run before (a reader follows the chain)
        assert [e.item_hash for e in left_out(last, first.id, store)] == [ci.item.hash for ci in memory[:total]]
        assert len(own) < total
        for stage in later:
            assert stage.attributes[DROPPED_SINCE] == {"memory_window": first.id if stage is later[0] else later[0].id}
            new = [e for e in last.inputs[stage.id] if not e.included]
            assert len(new) < stage.attributes["window_dropped"]  # only what fell out since
            assert len(left_out(last, stage.id, store)) == stage.attributes["window_dropped"]
        reports = dropped_context(store, last.run.id)
        assert [len(r.items) for r in reports] == [s.attributes["window_dropped"] for s in last.inferences()]
        # content addressing: each message is stored once however many snapshots name it
        rows = store.query("SELECT count(*), count(DISTINCT hash) FROM fp_item")
        assert rows[0][0] == rows[0][1]


async def test_a_run_continues_the_previous_runs_list_and_readers_follow_the_chain(tmp_path: Path) -> None:
    from agent._loop import WINDOW_CHAIN
    from agent.evidence._recording import read_recording

    with Store.open(tmp_path / "s.duckdb") as store:
        agent = Agent("a", provider=FunctionModel(lambda request: "ok"), recorder=Recorder(store),
                      memory=ConversationMemory(max_messages=6))
        runs = [(await agent.run(f"message {n}")).run_id for n in range(WINDOW_CHAIN + 8)]
        store.flush()
        continued = full = 0
        for run_id in runs[4:]:
            data = store.load_run(run_id)
            stage = data.inferences()[0]
            since = stage.attributes.get(DROPPED_SINCE)
            own = [e for e in data.inputs[stage.id] if not e.included]
            if since is not None:
                continued += 1
                assert isinstance(since["memory_window"], list) and len(own) <= 2  # only what fell out since
            else:
                full += 1
            # whoever reads it with the store gets every left-out message, in conversation order
            reports = dropped_context(store, run_id)
            assert len(reports[0].items) == stage.attributes["window_dropped"]
            assert len(read_recording(data, store).inferences[0].window_left_out) == stage.attributes["window_dropped"]
        assert continued >= WINDOW_CHAIN and full >= 1  # a whole list again after a chain of WINDOW_CHAIN runs
        last = store.load_run(runs[-1])
        memory = agent.memory.require(agent.conversation_id).messages
        total = last.inferences()[0].attributes["window_dropped"]
        assert [e.item_hash for e in left_out(last, last.inferences()[0].id, store)] == [
            ci.item.hash for ci in memory[:total]]

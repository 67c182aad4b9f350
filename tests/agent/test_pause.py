"""Pausing a run to ask a person, and resuming it without running earlier tool calls again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent import Agent, ConversationMemory, PauseRun, PauseState, tool
from agent.errors import UserError
from agent.providers import ScriptedModel, calls, tool_results
from tracer import Recorder, Store


def counting_tools() -> tuple[dict[str, int], list[Any]]:
    runs = {"search": 0, "ask": 0, "book": 0}

    @tool
    async def search(city: str) -> str:
        """Search hotels."""
        runs["search"] += 1
        return f"Hotel Central in {city}"

    @tool
    async def ask(question: str) -> str:
        """Ask the user."""
        runs["ask"] += 1
        raise PauseRun(question)

    @tool
    async def book(hotel: str) -> str:
        """Book a hotel."""
        runs["book"] += 1
        return f"booked {hotel}"

    return runs, [search, ask, book]


async def test_a_pause_awaits_a_person_and_resume_continues_where_it_stopped(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.duckdb")
    runs, tools = counting_tools()
    model = ScriptedModel([
        calls(("search", {"city": "Rome"}, "c1"), ("ask", {"question": "Which nights?"}, "c2")),
        "Booked for Friday and Saturday.",
    ])
    agent = Agent("a", provider=model, tools=tools, recorder=Recorder(store))
    paused = await agent.run("Find me a hotel in Rome")
    assert paused.status == "awaiting" and paused.question == "Which nights?" and not paused.ok
    assert paused.pause is not None and paused.pause.results == {"c1": {"content": "Hotel Central in Rome",
                                                                        "is_error": False}}
    store.flush()
    assert store.get_run(paused.run_id).status == "awaiting"
    assert store.get_run(paused.run_id).output == "Which nights?"

    # the state survives JSON (a host stores it between requests)
    state = json.loads(json.dumps(paused.pause.to_dict()))
    resumed = await agent.resume(state, "Friday and Saturday")
    assert resumed.status == "answered" and resumed.answer == "Booked for Friday and Saturday."
    assert resumed.run_id == paused.run_id
    assert runs == {"search": 1, "ask": 1, "book": 0}  # the search was not run again
    results = tool_results(model.requests[1])
    assert [(r["call_id"], r["content"]) for r in results] == [
        ("c1", "Hotel Central in Rome"), ("c2", "Friday and Saturday")]

    store.flush()
    data = store.load_run(paused.run_id)
    assert data.run.status == "answered"
    kinds = [(s.kind, s.status) for s in sorted(data.stages, key=lambda s: s.seq)]
    assert kinds == [
        ("input", "ok"), ("prompt", "ok"), ("inference", "ok"), ("tool_batch", "ok"), ("tool", "ok"), ("tool", "ok"),
        ("pause", "ok"),
        ("resume", "ok"), ("prompt", "ok"), ("tool_batch", "ok"), ("tool", "ok"), ("tool", "ok"), ("inference", "ok"),
        ("answer", "ok"),
    ]
    assert [s.seq for s in sorted(data.stages, key=lambda s: s.seq)] == list(range(14))
    by_seq = {s.seq: s for s in data.stages}
    assert (by_seq[6].id, by_seq[7].id, "resume") in {(e.src, e.dst, e.kind) for e in data.edges}
    assert by_seq[10].attributes["served_from"] == "pause"  # the finished search, served back
    store.close()


async def test_an_approval_pause_runs_the_call_only_when_approved() -> None:
    runs, tools = counting_tools()

    def approve(call: Any, t: Any) -> bool:
        if call.name == "book":
            raise PauseRun(f"Book {json.loads(call.arguments)['hotel']}?", kind="approval")
        return True

    def agent_for(model: ScriptedModel) -> Agent:
        return Agent("a", provider=model, tools=tools, approve=approve)

    yes_model = ScriptedModel([calls(("book", {"hotel": "Central"}, "c1")), "Done."])
    yes = agent_for(yes_model)
    paused = await yes.run("book it")
    assert paused.status == "awaiting" and paused.question == "Book Central?"
    assert runs["book"] == 0
    assert (await yes.resume(paused.pause, "yes")).answer == "Done."  # type: ignore[arg-type]
    assert runs["book"] == 1 and tool_results(yes_model.requests[1])[0]["content"] == "booked Central"

    no_model = ScriptedModel([calls(("book", {"hotel": "Ritz"}, "c1")), "Not booked."])
    no = agent_for(no_model)
    paused = await no.run("book it")
    assert (await no.resume(paused.pause, "no, too expensive")).answer == "Not booked."  # type: ignore[arg-type]
    assert runs["book"] == 1
    declined = tool_results(no_model.requests[1])[0]
    assert declined["is_error"] and "declined this call" in declined["content"]


async def test_a_tool_that_requires_confirmation_pauses_without_a_permission_checker() -> None:
    """``requires_confirmation`` (a person approves each call) held only under a permission checker:
    an agent without one ran the call unasked."""
    paid: list[float] = []

    @tool(requires_confirmation=True)
    def pay(amount: float) -> str:
        """Pay money."""
        paid.append(amount)
        return f"paid {amount}"

    def agent_for(model: ScriptedModel) -> Agent:
        return Agent("a", provider=model, tools=[pay])

    yes_model = ScriptedModel([calls(("pay", {"amount": 12.5}, "c1")), "Paid."])
    yes = agent_for(yes_model)
    paused = await yes.run("pay it")
    assert paused.status == "awaiting" and paused.question is not None and "pay" in paused.question
    assert "12.5" in paused.question and paid == []
    assert (await yes.resume(paused.pause, "yes")).answer == "Paid."  # type: ignore[arg-type]
    assert paid == [12.5]

    no_model = ScriptedModel([calls(("pay", {"amount": 99}, "c1")), "Not paid."])
    no = agent_for(no_model)
    paused = await no.run("pay it")
    assert (await no.resume(paused.pause, "no")).answer == "Not paid."  # type: ignore[arg-type]
    assert paid == [12.5] and "declined this call" in tool_results(no_model.requests[1])[0]["content"]

    # reached through use_tool (meta-tools), the same
    meta_model = ScriptedModel([calls(("use_tool", {"tool_name": "pay", "arguments": {"amount": 7}}, "c1")), "Paid."])
    meta = Agent("m", provider=meta_model, tools=[pay], meta_tools=True)
    paused = await meta.run("pay it")
    assert paused.status == "awaiting" and paid == [12.5]
    assert (await meta.resume(paused.pause, "yes")).answer == "Paid."  # type: ignore[arg-type]
    assert paid == [12.5, 7]


async def test_resume_on_another_instance_with_the_same_memory() -> None:
    _, tools = counting_tools()
    memory = ConversationMemory()
    model = ScriptedModel([calls(("ask", {"question": "Which city?"}, "c1")), "Rome it is."])
    first = Agent("a", provider=model, tools=tools, memory=memory, conversation_id="conv")
    paused = await first.run("plan a trip")
    second = Agent("a", provider=model, tools=tools, memory=memory, conversation_id="conv")
    assert (await second.resume(paused.pause.to_dict(), "Rome")).answer == "Rome it is."  # type: ignore[union-attr]


async def test_a_pause_that_cannot_be_resumed_is_refused() -> None:
    _, tools = counting_tools()
    model = ScriptedModel([calls(("ask", {"question": "Which city?"}, "c1")), "Moving on.", "never"])
    agent = Agent("a", provider=model, tools=tools)
    paused = await agent.run("plan a trip")
    assert paused.pause is not None
    elsewhere = Agent("b", provider=model, tools=tools)
    with pytest.raises(UserError, match="paused in conversation"):
        await elsewhere.resume(paused.pause, "Rome")
    # a new run instead of a resume: the open call gets an error result, and the conversation goes on
    assert (await agent.run("forget it")).answer == "Moving on."
    closed = tool_results(model.requests[1])[0]
    assert closed["call_id"] == "c1" and closed["is_error"]
    with pytest.raises(UserError, match="its conversation went on without it"):
        await agent.resume(paused.pause, "Rome")


def test_pause_state_from_a_bad_dict() -> None:
    with pytest.raises(ValueError, match="lacks"):
        PauseState.from_dict({"run_id": "r"})


async def test_a_model_that_reuses_its_call_ids_across_turns_can_still_be_resumed() -> None:
    """Local models (and the offline demo model) number their calls per response, so every turn's
    first call is 'call_1'. A pause of the second turn was refused as 'its conversation went on
    without it' because the first turn's result for 'call_1' was in the conversation; after a crash
    the host's recovery hit the same check, and every later turn of the session failed with a 500."""
    runs, tools = counting_tools()
    model = ScriptedModel([
        calls(("search", {"city": "Rome"}, "call_1")), "Hotel Central.",
        calls(("ask", {"question": "Which nights?"}, "call_1")), "Booked for Friday.",
    ])
    agent = Agent("a", provider=model, tools=tools)
    assert (await agent.run("Find me a hotel in Rome")).answer == "Hotel Central."
    paused = await agent.run("Book it")
    assert paused.status == "awaiting" and paused.pause is not None
    resumed = await agent.resume(paused.pause, "Friday")
    assert resumed.status == "answered" and resumed.answer == "Booked for Friday."
    assert runs == {"search": 1, "ask": 1, "book": 0}
    with pytest.raises(UserError, match="went on without it"):  # the pause's own call answered: refused still
        await agent.resume(paused.pause, "Friday")

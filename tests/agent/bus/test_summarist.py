"""SummaristAgent: shares what it hears, summarises on a heartbeat or a count, records the call."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.bus import (
    AgentBinding,
    BindingError,
    Bus,
    ConversationalAgent,
    HeartbeatEvent,
    SourceBinding,
    SummaristAgent,
)
from agent.errors import ProviderError
from agent.providers import FunctionModel, ModelRequest, ScriptedModel
from tracer import ItemKind, Recorder, Store, why

WATCH = AgentBinding([SourceBinding("whatsapp", prefix="", claim=False)], heartbeat=True)


def summary_of(request: ModelRequest) -> str:
    lines = [ci.item.text for ci in request.context if ci.item.kind == ItemKind.USER]
    return f"{len(lines)} messages: " + " / ".join(lines)


async def test_it_shares_so_the_answering_agent_still_gets_every_message(message, sent) -> None:
    bus = Bus()
    bus.add_transport(sent)
    summarist = SummaristAgent("sum", WATCH, provider=FunctionModel(summary_of),
                               report_to=("email", "owner@example.org")).start(bus)
    ConversationalAgent("pa", AgentBinding([SourceBinding("whatsapp", prefix="", reply_channel="whatsapp")]),
                        provider=FunctionModel(lambda r: "ok")).start(bus)
    report = bus.publish(message("I need a haircut", sender="ola", sender_name="Ola"))
    bus.publish(message("Friday?", sender="ola", sender_name="Ola", message_id="2"))
    await bus.drain()
    assert report.shared_with == ("sum",) and report.claimed_by == "pa"
    assert summarist.pending("whatsapp:+48100") == 2 and sent.texts() == ["ok", "ok"]

    bus.publish(HeartbeatEvent(0.0, 1))
    await bus.drain()
    assert sent[-1].channel == "email" and sent[-1].to == "owner@example.org"
    assert sent[-1].text == "2 messages: Ola: I need a haircut / Ola: Friday?"
    assert summarist.pending("whatsapp:+48100") == 0
    assert summarist.summaries["whatsapp:+48100"].count == 2


async def test_a_count_triggers_a_summary_per_conversation(message) -> None:
    binding = AgentBinding([SourceBinding("whatsapp", prefix="", claim=False, reply_channel="whatsapp")])
    agent = SummaristAgent("sum", binding, provider=FunctionModel(summary_of), every=2)
    for i, endpoint in enumerate(["A", "B", "A", "A"]):
        agent.deliver(message(f"m{i}", endpoint=endpoint, message_id=str(i)))
    await agent.idle()
    # A reached 2 after m2 and summarised back on its own reply channel; B and A's m3 wait
    assert [(e.to, e.text) for e in agent.outbox] == [("A", "2 messages: anna: m0 / anna: m2")]
    assert agent.pending("whatsapp:A") == 1 and agent.pending("whatsapp:B") == 1


async def test_a_heartbeat_skips_conversations_below_min_messages(message) -> None:
    agent = SummaristAgent("sum", WATCH, provider=FunctionModel(summary_of), min_messages=2)
    agent.deliver(message("only one"))
    agent.deliver(HeartbeatEvent(0.0))
    await agent.idle()
    assert agent.summaries == {} and agent.pending("whatsapp:+48100") == 1
    assert agent.outbox == []  # silent: no report_to, no reply channel


async def test_a_failed_summary_keeps_the_messages_for_the_next_try(message) -> None:
    model = ScriptedModel([ProviderError("down", provider="x"), "all good"])
    agent = SummaristAgent("sum", WATCH, provider=model, report_to=("log", "ops"))
    agent.deliver(message("a"))
    agent.deliver(HeartbeatEvent(0.0, 1))
    await agent.idle()
    assert agent.pending("whatsapp:+48100") == 1 and agent.failures[0].where == "handler"
    agent.deliver(HeartbeatEvent(0.0, 2))
    await agent.idle()
    assert [e.text for e in agent.outbox] == ["all good"] and agent.summaries["whatsapp:+48100"].count == 1


async def test_the_summary_is_a_recorded_run_whose_snapshot_is_the_messages(message, tmp_path: Path) -> None:
    with Store.open(tmp_path / "sum.duckdb") as store:
        agent = SummaristAgent("sum", WATCH, provider=FunctionModel(summary_of), recorder=Recorder(store))
        agent.deliver(message("first", message_id="11"))
        agent.deliver(message("second", message_id="12"))
        agent.deliver(HeartbeatEvent(0.0))
        await agent.idle()
        store.flush()
        summary = agent.summaries["whatsapp:+48100"]
        data = store.load_run(summary.run_id)
        assert data.run.status == "answered" and data.run.session_id == "whatsapp:+48100"
        assert [s.kind for s in data.stages] == ["inference", "answer"]
        sources = [e.origin.source for e in data.snapshot(data.inferences()[0].id)]
        assert sources == ["instructions", "whatsapp:+48100#11", "whatsapp:+48100#12", "settings"]
        evidence = why(store, summary.run_id)
        assert {n.origin.source for n in evidence.items() if n.origin} >= {"whatsapp:+48100#11"}


def test_a_summarist_that_would_never_summarise_is_refused() -> None:
    with pytest.raises(BindingError, match="never summarises"):
        SummaristAgent("sum", AgentBinding([SourceBinding("w", prefix="")]), provider=FunctionModel(summary_of))

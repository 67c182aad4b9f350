"""Bindings: what an agent hears, claim or share, and where it answers."""

from __future__ import annotations

import pytest

from agent.bus import AgentBinding, BindingError, HeartbeatEvent, MessageEvent, SourceBinding, TaskEvent


def test_bindings_are_checked() -> None:
    with pytest.raises(BindingError, match="exactly one of endpoint, prefix or task"):
        SourceBinding("whatsapp")
    with pytest.raises(BindingError, match="exactly one"):
        SourceBinding("whatsapp", endpoint="a", prefix="b")
    with pytest.raises(BindingError, match="needs a source"):
        SourceBinding("", prefix="")
    with pytest.raises(BindingError, match="hears nothing"):
        AgentBinding([])
    binding = AgentBinding([SourceBinding("w", prefix="+48", claim=False)], heartbeat=True)
    assert binding.describe() == "w:+48* share (silent)\nheartbeat"


def test_route_is_the_first_matching_source() -> None:
    exact = SourceBinding("w", endpoint="+48100", reply_channel="w")
    rest = SourceBinding("w", prefix="+48", claim=False)
    binding = AgentBinding([exact, rest])
    event = MessageEvent("w", "+48100", "anna", "1", "hi", 0.0)
    assert binding.route(event) is exact
    assert binding.route(MessageEvent("w", "+48999", "anna", "1", "hi", 0.0)) is rest
    assert binding.route(HeartbeatEvent(0.0)) is None


def test_a_task_binding_hears_only_its_task_on_its_source() -> None:
    binding = SourceBinding("jobs", task="report")
    assert binding.matches(TaskEvent("jobs", "report", "1", "", 0.0))
    assert not binding.matches(TaskEvent("other", "report", "1", "", 0.0))
    assert not binding.matches(MessageEvent("jobs", "report", "anna", "1", "hi", 0.0))
    assert SourceBinding("w", prefix="").matches(MessageEvent("w", "anything", "a", "1", "", 0.0))

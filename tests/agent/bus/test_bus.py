"""The bus: ordered delivery, claim stops it, share passes it on, failures are isolated."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

import agent.bus as bus_package
from agent.bus import (
    AgentBinding,
    BindingError,
    Bus,
    BusFailure,
    ChannelAgent,
    HeartbeatEvent,
    InboundEvent,
    MessageEvent,
    SendText,
    SourceBinding,
    Verdict,
    heartbeats,
)


class Echo(ChannelAgent):
    """Answers every message with ``<name>: <text>`` and logs what it handled."""

    def __init__(self, name: str, binding: AgentBinding, log: list[str], **kwargs: object) -> None:
        super().__init__(name, binding, **kwargs)  # type: ignore[arg-type]
        self.log = log

    async def on_message(self, message: MessageEvent, route: SourceBinding) -> None:
        self.log.append(f"{self.name}:{message.text}")
        await self.reply(message, route, f"{self.name}: {message.text}")


def on_whatsapp(*, claim: bool, reply: str | None = "whatsapp") -> AgentBinding:
    return AgentBinding([SourceBinding("whatsapp", prefix="", claim=claim, reply_channel=reply)])


async def test_a_claim_stops_delivery_and_shares_before_it_still_handle(message, sent) -> None:
    log: list[str] = []
    bus = Bus()
    bus.add_transport(sent)
    watcher = Echo("watcher", on_whatsapp(claim=False, reply=None), log).start(bus)
    Echo("first", on_whatsapp(claim=True), log).start(bus)
    second = Echo("second", on_whatsapp(claim=True), log).start(bus)

    report = bus.publish(message("hello"))
    await bus.drain()

    assert bus.subscribers == ("watcher", "first", "second")
    assert report.claimed_by == "first" and report.shared_with == ("watcher",)
    assert sorted(log) == ["first:hello", "watcher:hello"]  # second never saw it
    assert sent == [SendText("whatsapp", "+48100", "first: hello", "first", in_reply_to="1")]  # watcher is silent
    assert watcher.outbox == [] and second.outbox == []


async def test_priority_is_the_order_agents_were_started(message) -> None:
    log: list[str] = []
    bus = Bus()
    Echo("b", on_whatsapp(claim=True), log).start(bus)
    Echo("a", on_whatsapp(claim=True), log).start(bus)
    assert bus.publish(message("x")).claimed_by == "b"
    await bus.drain()
    assert log == ["b:x"]


async def test_an_event_nobody_hears_is_not_handled(message) -> None:
    bus = Bus()
    Echo("tg", AgentBinding([SourceBinding("telegram", prefix="")]), []).start(bus)
    report = bus.publish(message("x"))
    assert not report.handled and report.claimed_by is None


async def test_a_failing_handler_is_reported_and_others_still_answer(message, sent) -> None:
    failures: list[BusFailure] = []

    class Broken(ChannelAgent):
        async def on_message(self, message: MessageEvent, route: SourceBinding) -> None:
            raise RuntimeError("database down")

    log: list[str] = []
    bus = Bus(on_error=failures.append)
    bus.add_transport(sent)
    broken = Broken("broken", on_whatsapp(claim=False)).start(bus)
    Echo("echo", on_whatsapp(claim=True), log).start(bus)

    bus.publish(message("one"))
    bus.publish(message("two", message_id="2"))
    await bus.drain()

    assert log == ["echo:one", "echo:two"]
    assert [f.where for f in failures] == ["handler", "handler"]
    assert "database down" in failures[0].describe() and failures[0].agent == "broken"
    assert list(bus.failures) == failures and len(broken.failures) == 2


async def test_a_raising_filter_is_isolated_too(message) -> None:
    class BadFilter(ChannelAgent):
        def accepts(self, event: InboundEvent) -> bool:
            raise ValueError("bad filter")

    log: list[str] = []
    bus = Bus()
    BadFilter("bad", on_whatsapp(claim=True)).start(bus)
    Echo("echo", on_whatsapp(claim=True), log).start(bus)
    report = bus.publish(message("x"))
    await bus.drain()
    assert report.failed == ("bad",) and report.claimed_by == "echo"
    assert bus.failures[0].where == "deliver" and log == ["echo:x"]


async def test_a_failing_transport_does_not_stop_the_others(message, sent) -> None:
    def broken(event: object) -> None:
        raise ConnectionError("socket closed")

    bus = Bus()
    bus.add_transport(broken)
    bus.add_transport(sent)
    Echo("echo", on_whatsapp(claim=True), []).start(bus)
    bus.publish(message("x"))
    await bus.drain()
    assert sent.texts() == ["echo: x"]
    assert bus.failures[0].where == "transport" and bus.failures[0].agent == "echo"


async def test_an_on_error_callback_that_fails_is_only_logged(message) -> None:
    def explode(failure: BusFailure) -> None:
        raise RuntimeError("callback broke")

    class Broken(ChannelAgent):
        async def on_message(self, message: MessageEvent, route: SourceBinding) -> None:
            raise RuntimeError("x")

    bus = Bus(on_error=explode)
    Broken("b", on_whatsapp(claim=True)).start(bus)
    bus.publish(message())
    await bus.drain()
    assert len(bus.failures) == 1


async def test_sources_are_merged_and_a_broken_source_ends_alone(message) -> None:
    log: list[str] = []

    async def good() -> AsyncIterator[InboundEvent]:
        for i in range(3):
            yield message(f"m{i}", message_id=i, endpoint=f"+{i}")
            await asyncio.sleep(0)

    async def bad() -> AsyncIterator[InboundEvent]:
        yield message("b0", endpoint="+b")
        raise OSError("connection lost")

    bus = Bus()
    Echo("echo", on_whatsapp(claim=True), log).start(bus)
    tasks = [bus.listen(good(), name="good"), bus.listen(bad(), name="bad")]
    await asyncio.gather(*tasks)
    await bus.close()
    assert sorted(log) == ["echo:b0", "echo:m0", "echo:m1", "echo:m2"]
    assert [f.agent for f in bus.failures] == ["source:bad"]


async def test_heartbeats_source_ticks() -> None:
    ticks: list[int] = []

    class Ticker(ChannelAgent):
        async def on_heartbeat(self, tick: HeartbeatEvent) -> None:
            ticks.append(tick.tick)

    bus = Bus()
    Ticker("t", AgentBinding(heartbeat=True)).start(bus)
    await bus.listen(heartbeats(0, count=3), name="heartbeat")
    await bus.drain()
    assert ticks == [1, 2, 3]


async def test_names_are_unique_and_stop_unsubscribes(message) -> None:
    bus = Bus()
    agent = Echo("echo", on_whatsapp(claim=True), []).start(bus)
    with pytest.raises(BindingError, match="already subscribed"):
        Echo("echo", on_whatsapp(claim=True), []).start(bus)
    agent.stop()
    assert bus.subscribers == () and bus.publish(message()).claimed_by is None


def test_verdict_values() -> None:
    assert [v.value for v in Verdict] == ["ignore", "share", "claim"]


def test_all_is_complete_and_sorted() -> None:
    public = {name for name in vars(bus_package) if name[0].isalpha()} - {"errors"}
    exported = set(bus_package.__all__)
    assert public == exported, public ^ exported
    assert bus_package.__all__ == sorted(bus_package.__all__, key=lambda n: (not n.isupper(), n))

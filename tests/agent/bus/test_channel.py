"""ChannelAgent driven with plain objects: matching, claim or share, staleness, heartbeat, order."""

from __future__ import annotations

import asyncio

import pytest

from agent.bus import (
    AgentBinding,
    BindingError,
    ChannelAgent,
    HeartbeatEvent,
    InboundEvent,
    MessageEvent,
    SendText,
    SourceBinding,
    TaskEvent,
    Verdict,
)


class Recorder(ChannelAgent):
    """Keeps what each handler saw."""

    def __init__(self, binding: AgentBinding, **kwargs: object) -> None:
        super().__init__("rec", binding, **kwargs)  # type: ignore[arg-type]
        self.seen: list[tuple[str, str]] = []

    async def on_message(self, message: MessageEvent, route: SourceBinding) -> None:
        self.seen.append(("message", message.text))
        await self.reply(message, route, f"re: {message.text}")

    async def on_stale(self, message: MessageEvent, route: SourceBinding) -> None:
        self.seen.append(("stale", message.text))

    async def on_task(self, task: TaskEvent, route: SourceBinding) -> None:
        self.seen.append(("task", task.text))
        await self.reply(task, route, "done")

    async def on_heartbeat(self, tick: HeartbeatEvent) -> None:
        self.seen.append(("tick", str(tick.tick)))


async def test_endpoint_prefix_and_exact_endpoint_matching(message) -> None:
    binding = AgentBinding([
        SourceBinding("whatsapp", endpoint="+48100", claim=True),
        SourceBinding("whatsapp", prefix="+49", claim=False),
    ])
    agent = Recorder(binding)
    assert agent.deliver(message("a", endpoint="+48100")) is Verdict.CLAIM
    assert agent.deliver(message("b", endpoint="+49555")) is Verdict.SHARE
    assert agent.deliver(message("c", endpoint="+48101")) is Verdict.IGNORE
    assert agent.deliver(message("d", source="telegram", endpoint="+48100")) is Verdict.IGNORE
    await agent.idle()
    assert sorted(agent.seen) == [("message", "a"), ("message", "b")]


async def test_silent_without_a_reply_channel_and_outbox_without_a_bus(message) -> None:
    loud = Recorder(AgentBinding([SourceBinding("web", prefix="", reply_channel="web-out")]))
    quiet = Recorder(AgentBinding([SourceBinding("web", prefix="")]))
    for agent in (loud, quiet):
        agent.deliver(message("hi", source="web", endpoint="chat-1", message_id="7"))
        await agent.idle()
    assert loud.outbox == [SendText("web-out", "chat-1", "re: hi", "rec", in_reply_to="7")]
    assert quiet.outbox == [] and quiet.seen == [("message", "hi")]


async def test_stale_messages_go_to_on_stale_but_are_still_claimed(message) -> None:
    agent = Recorder(AgentBinding([SourceBinding("whatsapp", prefix="")]), stale_after=60)
    assert agent.deliver(message("old", age=61)) is Verdict.CLAIM
    assert agent.deliver(message("new", age=59, message_id="2")) is Verdict.CLAIM
    await agent.idle()
    assert agent.seen == [("stale", "old"), ("message", "new")]


async def test_stale_is_judged_by_the_agents_clock(message) -> None:
    event = message("x", age=0)
    later = Recorder(AgentBinding([SourceBinding("whatsapp", prefix="")]), stale_after=10,
                     clock=lambda: event.timestamp + 11)
    never = Recorder(AgentBinding([SourceBinding("whatsapp", prefix="")]), stale_after=None,
                     clock=lambda: event.timestamp + 10_000)
    assert later.is_stale(event) and not never.is_stale(event)


async def test_default_on_stale_drops_the_message(message) -> None:
    class Plain(ChannelAgent):
        handled = 0

        async def on_message(self, message: MessageEvent, route: SourceBinding) -> None:
            self.handled += 1

    agent = Plain("plain", AgentBinding([SourceBinding("whatsapp", prefix="", reply_channel="w")]), stale_after=5)
    agent.deliver(message("old", age=3600))
    await agent.idle()
    assert agent.handled == 0 and agent.outbox == [] and not agent.failures


async def test_heartbeat_only_when_bound_and_always_shared() -> None:
    hears = Recorder(AgentBinding([SourceBinding("x", prefix="")], heartbeat=True))
    deaf = Recorder(AgentBinding([SourceBinding("x", prefix="")]))
    tick = HeartbeatEvent(0.0, 4)
    assert hears.deliver(tick) is Verdict.SHARE
    assert deaf.deliver(tick) is Verdict.IGNORE
    await hears.idle()
    assert hears.seen == [("tick", "4")] and deaf.seen == []


async def test_tasks_match_by_name_and_answer_reply_to() -> None:
    agent = Recorder(AgentBinding([SourceBinding("jobs", task="weekly-report", reply_channel="email")]))
    old_task = TaskEvent("jobs", "weekly-report", "t1", "write it", 0.0, reply_to="boss@example.org")
    assert agent.deliver(old_task) is Verdict.CLAIM  # tasks are never stale
    assert agent.deliver(TaskEvent("jobs", "other", "t2", "no", 0.0)) is Verdict.IGNORE
    await agent.idle()
    assert agent.seen == [("task", "write it")]
    assert agent.outbox == [SendText("email", "boss@example.org", "done", "rec", in_reply_to="t1")]


async def test_accepts_filters_after_the_binding_matched(message) -> None:
    class OnlyQuestions(Recorder):
        def accepts(self, event: InboundEvent) -> bool:
            return isinstance(event, MessageEvent) and event.text.endswith("?")

    agent = OnlyQuestions(AgentBinding([SourceBinding("whatsapp", prefix="")]))
    assert agent.deliver(message("hello")) is Verdict.IGNORE
    assert agent.deliver(message("ready?")) is Verdict.CLAIM


async def test_turns_of_one_conversation_run_in_order_others_concurrently(message) -> None:
    gate = asyncio.Event()
    order: list[str] = []

    class Slow(ChannelAgent):
        async def on_message(self, message: MessageEvent, route: SourceBinding) -> None:
            if message.text == "a1":
                await gate.wait()  # the first turn of chat A waits
            order.append(message.text)
            if message.text == "b1":
                gate.set()

    agent = Slow("slow", AgentBinding([SourceBinding("w", prefix="")]))
    agent.deliver(message("a1", source="w", endpoint="A"))
    agent.deliver(message("a2", source="w", endpoint="A"))
    agent.deliver(message("b1", source="w", endpoint="B"))
    await agent.idle()
    assert order == ["b1", "a1", "a2"]  # B did not wait for A; A's turns kept their order


async def test_a_failed_turn_does_not_block_the_next_one(message) -> None:
    class FailsFirst(Recorder):
        async def on_message(self, message: MessageEvent, route: SourceBinding) -> None:
            if message.text == "boom":
                raise RuntimeError("boom")
            await super().on_message(message, route)

    agent = FailsFirst(AgentBinding([SourceBinding("whatsapp", prefix="")]))
    agent.deliver(message("boom"))
    agent.deliver(message("next", message_id="2"))
    await agent.idle()
    assert agent.seen == [("message", "next")]
    assert [f.where for f in agent.failures] == ["handler"]


def test_delivering_outside_an_event_loop_says_so(message) -> None:
    agent = Recorder(AgentBinding([SourceBinding("whatsapp", prefix="")]))
    with pytest.raises(BindingError, match="running event loop"):
        agent.deliver(message())

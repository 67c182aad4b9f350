"""Replies wait for their runs' recordings: one group-committed flush for many turns.

The real crash (SIGKILL under ``exit`` durability) is tests/hosting/test_crash.py; these check
the order in process: a flush that began after the run ended, before the session save and the
reply, and a durable session's run reports held until then.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from agent.durable import (
    AgentProviders,
    DurableAgent,
    InferenceSettings,
    InMemoryPersistence,
    SessionPersistence,
)
from agent.providers import FunctionModel, ModelRequest
from hosting import DurableHost, InMemorySessions, standing_agent
from hosting._committed import GroupFlush
from tests.hosting.hostkit import make_agent
from tracer import Durability, Recorder, Store


async def test_waits_share_one_flush_and_a_wait_during_a_flush_gets_the_next() -> None:
    release = threading.Event()
    began: list[int] = []
    ended: list[int] = []

    def flush() -> None:
        began.append(len(began) + 1)
        if len(began) == 1:
            release.wait(10)
        ended.append(began[-1])

    group = GroupFlush(flush)
    first = asyncio.ensure_future(group.wait())
    while not began:
        await asyncio.sleep(0.005)
    # these arrive while flush 1 runs: it may have begun before their rows were submitted
    later = [asyncio.ensure_future(group.wait()) for _ in range(5)]
    await asyncio.sleep(0.05)
    assert not any(t.done() for t in later) and began == [1]
    release.set()
    await first
    await asyncio.gather(*later)
    assert began == [1, 2] and ended == [1, 2]  # five waits, one more flush, begun after flush 1
    assert (group.flushes, group.waits) == (2, 6)


async def test_a_flush_error_reaches_every_waiter() -> None:
    def broken() -> None:
        raise OSError("disk gone")

    group = GroupFlush(broken)
    results = await asyncio.gather(*(group.wait() for _ in range(3)), return_exceptions=True)
    assert [type(r) for r in results] == [OSError] * 3


class _Spy:
    """Logs the store's flushes and the sessions' saves in the order they happen."""

    def __init__(self, store: Store, sessions: InMemorySessions) -> None:
        self.log: list[str] = []
        real_flush, real_save = store.flush, sessions.save

        def flush() -> None:
            self.log.append("flush")
            real_flush()

        async def save(envelope: Any, **kwargs: Any) -> Any:
            self.log.append("save")
            return await real_save(envelope, **kwargs)

        store.flush = flush  # type: ignore[method-assign]
        sessions.save = save  # type: ignore[method-assign]


async def test_under_exit_the_run_is_committed_before_the_session_is_saved_and_the_reply_sent(
        store: Store) -> None:
    sessions = InMemorySessions()
    spy = _Spy(store, sessions)
    recorder = Recorder(store, durability=Durability.EXIT)
    host = standing_agent(agent_factory=lambda: make_agent(recorder=recorder), sessions=sessions,
                          durability="exit", recordings=store)
    await host.start()  # (its sweep of a dead process's runs reads the store)
    spy.log.clear()
    reply = await host.handle("hello", session_id="alice")
    assert spy.log == ["flush", "save"]
    one_off = await host.handle("hi there")  # a one-off turn names its run too
    assert spy.log == ["flush", "save", "flush"]
    for run_id in (reply.run_id, one_off.run_id):
        assert run_id is not None and store.get_run(run_id).status == "answered"
    await host.close()


async def test_under_sync_nothing_waits_for_a_flush(store: Store) -> None:
    sessions = InMemorySessions()
    spy = _Spy(store, sessions)
    recorder = Recorder(store)
    host = standing_agent(agent_factory=lambda: make_agent(recorder=recorder), sessions=sessions,
                          durability="sync", recordings=store)
    await host.start()
    spy.log.clear()
    await host.handle("hello", session_id="alice")
    assert "flush" not in spy.log  # every stage was durable when it closed
    await host.close()


async def test_concurrent_turns_share_flushes(store: Store) -> None:
    recorder = Recorder(store)
    host = standing_agent(agent_factory=lambda: make_agent(recorder=recorder), sessions=InMemorySessions())
    replies = await asyncio.gather(*(host.handle("hello", session_id=f"s{n}") for n in range(40)))
    flushes, waits = host._turns.commits.flush_counts()
    assert waits == 40 and flushes < 20, (flushes, waits)
    assert {store.get_run(r.run_id or "").status for r in replies} == {"answered"}
    await host.close()


async def test_a_durable_sessions_run_reports_wait_for_the_recording(store: Store) -> None:
    release = threading.Event()
    real_flush = store.flush

    def slow_flush() -> None:
        release.wait(10)
        real_flush()

    store.flush = slow_flush  # type: ignore[method-assign]
    recorder = Recorder(store, durability=Durability.EXIT)

    def echo(request: ModelRequest) -> str:
        return f"echo: {request.last_user_text()}"

    providers = AgentProviders().add("m", FunctionModel(echo), "test")

    def make(session_id: str, persistence: SessionPersistence) -> DurableAgent:
        return DurableAgent(session_id, providers=providers, provider="m", persistence=persistence,
                            recorder=recorder)

    durable = DurableHost(make, InMemoryPersistence())
    events = durable.subscribe("chat")
    await durable.queue("chat", "send", "hello", InferenceSettings())
    await durable.sessions["chat"].wait_for_idle()
    await asyncio.sleep(0.05)
    heard = _drain(events)
    assert "MessageQueued" in heard and "TurnDone" not in heard and "Settled" not in heard
    release.set()
    for _ in range(200):
        heard += _drain(events)
        if "Settled" in heard:
            break
        await asyncio.sleep(0.01)
    assert heard.index("TurnDone") < heard.index("Settled")
    assert heard[-2:] == ["TurnDone", "Settled"]
    await durable.close()


def _drain(queue: asyncio.Queue[dict[str, Any] | None]) -> list[str]:
    heard = []
    while not queue.empty():
        event = queue.get_nowait()
        assert event is not None
        heard.append(event["type"])
    return heard

"""Replies wait for their runs' recordings: one commit of the writer for many turns.

The real crash (SIGKILL under ``exit`` durability) is tests/hosting/test_crash.py; these check
the order in process: a flush that began after the run ended, before the session save and the
reply, and a durable session's run reports held until then.
"""

from __future__ import annotations

import asyncio
import contextlib
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
from tests.hosting.hostkit import make_agent
from tracer import Durability, Recorder, Store


async def test_waits_coming_in_while_a_batch_is_written_share_the_next_commit(store: Store) -> None:
    recorder = Recorder(store)
    for n in range(5):  # rows queued, then many waits at once
        run = recorder.start_run(agent="a", input=f"hi {n}")
        run.end("answered", output="ok")
    before = store.writer_stats["batches"]
    await asyncio.gather(*(store.committed() for _ in range(50)))
    assert store.writer_stats["batches"] - before <= 3  # 50 waits, a batch or two
    assert len(store.list_runs()) == 5
    await store.committed()  # nothing queued: answered by the next (empty) batch


async def test_a_write_error_reaches_every_waiter(tmp_path: Any) -> None:
    broken = Store.open(tmp_path / "broken.duckdb")
    recorder = Recorder(broken)
    broken._writer._write = lambda bundles: (_ for _ in ()).throw(OSError("disk gone"))  # type: ignore[union-attr]
    run = recorder.start_run(agent="a", input="hi")
    run.end("answered", output="ok")
    results = await asyncio.gather(*(broken.committed() for _ in range(3)), return_exceptions=True)
    assert [type(r).__name__ for r in results] == ["StoreError"] * 3
    assert all("disk gone" in str(r) for r in results)
    with contextlib.suppress(Exception):
        broken.close()


class _Spy:
    """Logs the store's flushes and the sessions' saves in the order they happen."""

    def __init__(self, store: Store, sessions: InMemorySessions) -> None:
        self.log: list[str] = []
        real_committed, real_save = store.committed, sessions.save

        async def committed() -> None:
            self.log.append("flush")
            await real_committed()

        async def save(envelope: Any, **kwargs: Any) -> Any:
            self.log.append("save")
            return await real_save(envelope, **kwargs)

        store.committed = committed  # type: ignore[method-assign]
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
    before = store.writer_stats["batches"]
    replies = await asyncio.gather(*(host.handle("hello", session_id=f"s{n}") for n in range(40)))
    batches = store.writer_stats["batches"] - before
    assert batches < 20, batches  # 40 turns' waits shared the writer's commits
    assert {store.get_run(r.run_id or "").status for r in replies} == {"answered"}
    await host.close()


async def test_a_durable_sessions_run_reports_wait_for_the_recording(store: Store) -> None:
    release = asyncio.Event()
    real_committed = store.committed

    async def slow_committed() -> None:
        await release.wait()
        await real_committed()

    store.committed = slow_committed  # type: ignore[method-assign]
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

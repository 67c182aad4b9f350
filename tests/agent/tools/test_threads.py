"""Plain-function tools' worker threads: the caller's context, parallel calls, errors, cancellation."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from agent.tools._threads import MAX_WORKERS, in_thread

_WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


async def test_the_function_runs_off_the_loop_in_the_callers_context() -> None:
    _WHO.set("caller")
    name, who = await in_thread(lambda: (threading.current_thread().name, _WHO.get()))
    assert name == "footprint-tool" and who == "caller"


async def test_calls_run_in_parallel() -> None:
    """Each call waits for all the others: they finish only when every one runs at the same time."""
    count = min(MAX_WORKERS, 6)
    barrier = threading.Barrier(count, timeout=10)
    results = await asyncio.gather(*(in_thread(lambda i=i: (barrier.wait(), i)[1]) for i in range(count)))
    assert results == list(range(count))


async def test_an_exception_reaches_the_caller() -> None:
    def fails(x: int) -> int:
        raise ValueError(f"bad {x}")

    with pytest.raises(ValueError, match="bad 3"):
        await in_thread(fails, 3)
    assert await in_thread(lambda a, b=0: a + b, 1, b=2) == 3  # the worker goes on


async def test_a_cancelled_caller_stops_waiting_and_the_function_runs_to_its_end() -> None:
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        release.wait(10)
        finished.set()
        return "late"

    task = asyncio.ensure_future(in_thread(slow))
    await asyncio.to_thread(started.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()
    await asyncio.to_thread(finished.wait, 10)
    assert finished.is_set()
    assert await in_thread(lambda: "next") == "next"  # its late result was dropped, nothing broke


async def test_calls_whose_callers_stopped_waiting_do_not_hold_every_worker() -> None:
    """MAX_WORKERS tools hung past their timeout left every later plain-function tool of the process
    queued behind them: each then 'did not finish within' its timeout without ever starting."""
    release = threading.Event()
    started = [threading.Event() for _ in range(MAX_WORKERS)]
    returned: list[int] = []

    def hung(i: int) -> str:
        started[i].set()
        release.wait(30)
        returned.append(i)
        return "late"

    tasks = [asyncio.ensure_future(in_thread(hung, i)) for i in range(MAX_WORKERS)]
    try:
        for event in started:
            assert await asyncio.to_thread(event.wait, 60)
        for task in tasks:  # their callers time out
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert await in_thread(lambda: list(returned)) == []  # it ran while every hung call still held its worker
    finally:
        release.set()

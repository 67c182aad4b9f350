"""Plain-function tools run in worker threads, off the event loop, with a short hand-off.

``asyncio.to_thread`` goes through the loop's default executor: a work item, a concurrent future,
a chained asyncio future and their callbacks, ~70 µs of the loop's own CPU a call on a small
machine (bench/peers.py's sync-tool variant makes one per inference). Here a call is one queue put
and, from the worker, one ``call_soon_threadsafe`` that settles the awaited future: half of that.

The same promises as ``to_thread``: the function runs in the caller's context (context variables
copied), calls run in parallel (a worker is started whenever none is idle, up to :data:`MAX_WORKERS`;
past that calls wait their turn), an exception reaches the awaiting caller, and a caller cancelled
(a tool's timeout) stops waiting while the function runs on to its end, its result dropped. A
worker held so, by a call nobody waits for, does not count against :data:`MAX_WORKERS`: tools
that hang past their timeout do not leave every later plain-function tool waiting for a worker.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

from ..errors import ToolExitedError

#: Worker threads at most (as the default executor: one per core plus four, at most 32).
MAX_WORKERS = min(32, (os.cpu_count() or 1) + 4)

# the call's state, shared by its caller and its worker: queued, running, abandoned (running, and
# its caller stopped waiting), done
_QUEUED, _RUNNING, _ABANDONED, _DONE = range(4)
_Work = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", contextvars.Context, Callable[..., Any],
              tuple[Any, ...], dict[str, Any], list[int]]


class _Workers:
    """The process's tool worker threads and the queue they take calls from."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[_Work] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  # workers waiting for a call and not yet claimed by one
        self._started = 0
        self._held = 0  # workers running a call whose caller stopped waiting (a tool past its timeout)

    def submit(self, work: _Work) -> None:
        with self._lock:
            if self._idle:
                self._idle -= 1  # claimed: two calls in a row never count on the same idle worker
                start = False
            else:
                start = self._started - self._held < MAX_WORKERS
                self._started += start
        self._calls.put(work)
        if start:
            threading.Thread(target=self._work, name="footprint-tool", daemon=True).start()

    def abandon(self, state: list[int]) -> None:
        """The caller of the call in ``state`` stopped waiting: if it runs, its worker is held by it."""
        with self._lock:
            if state[0] == _RUNNING:
                state[0] = _ABANDONED
                self._held += 1

    def _work(self) -> None:
        calls = self._calls
        while True:
            loop, future, context, func, args, kwargs, state = calls.get()
            if not future.cancelled():  # read across threads: at worst a cancelled call still runs
                state[0] = _RUNNING  # (set before the caller can see it: abandon() reads it under the lock)
                try:
                    outcome: tuple[bool, Any] = (True, context.run(func, *args, **kwargs))
                except (SystemExit, KeyboardInterrupt) as exc:  # not this process's: set on a future,
                    outcome = (False, ToolExitedError(exc))  # either would stop the caller's event loop
                except BaseException as exc:  # the caller gets it, as from to_thread
                    outcome = (False, exc)
                try:
                    loop.call_soon_threadsafe(_settle, future, outcome)
                except RuntimeError:  # the loop closed meanwhile: nobody waits for this result
                    pass
                del outcome
            del loop, future, context, func, args, kwargs
            with self._lock:
                if state[0] == _ABANDONED:
                    self._held -= 1
                state[0] = _DONE
                self._idle += 1


def _settle(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if future.cancelled():
        return
    ok, value = outcome
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


_workers = _Workers()


def _after_fork() -> None:  # a forked child has none of its parent's threads
    global _workers
    _workers = _Workers()


os.register_at_fork(after_in_child=_after_fork)


async def in_thread(func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """``func(*args, **kwargs)`` in a worker thread, in the caller's context; its result or exception."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    state = [_QUEUED]
    workers = _workers
    workers.submit((loop, future, contextvars.copy_context(), func, args, kwargs, state))
    try:
        return await future
    except asyncio.CancelledError:
        workers.abandon(state)
        raise

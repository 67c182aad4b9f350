"""Turning a running task's emitted events into an async stream: the one pump every ``stream()`` uses."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def pump(queue: asyncio.Queue[T], runner: asyncio.Future[Any], is_last: Callable[[T], bool]) -> AsyncGenerator[T, None]:
    """Yield what ``runner`` puts on ``queue`` as it comes, up to an item ``is_last`` says ends it.

    When ``runner`` ends first, what it left on the queue is yielded, and the pump stops (the caller
    then reads the runner's result, or its exception).
    """
    while True:
        getter = asyncio.ensure_future(queue.get())
        done, _ = await asyncio.wait({getter, runner}, return_when=asyncio.FIRST_COMPLETED)
        if getter not in done:
            getter.cancel()
            break
        item = getter.result()
        yield item
        if is_last(item):
            return
    while not queue.empty():
        item = queue.get_nowait()
        yield item
        if is_last(item):
            return

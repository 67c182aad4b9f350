"""Sliding-window rate limits: at most N calls in any 60 seconds, per key.

A window keeps the times of the calls it counted (at most N of them), so a key costs memory in
proportion to its limit, and an idle key is forgotten once its calls are older than the window.
The clock is injectable, so tests move time by hand.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

WINDOW_SECONDS = 60.0


class SlidingWindow:
    """Counts calls per key over the last ``window`` seconds."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, window: float = WINDOW_SECONDS) -> None:
        self.clock = clock
        self.window = window
        self._calls: dict[str, deque[float]] = {}

    def retry_after(self, key: str, limit: int) -> float | None:
        """None when one more call under ``key`` stays within ``limit``; else seconds until it would."""
        calls = self._calls.get(key)
        if calls is None:
            return None if limit > 0 else self.window
        now = self.clock()
        while calls and calls[0] + self.window <= now:  # the same sum retry_after reports
            calls.popleft()
        if not calls:
            del self._calls[key]
            return None if limit > 0 else self.window
        if len(calls) < limit:
            return None
        return max(0.0, calls[len(calls) - limit] + self.window - now)

    def add(self, key: str, limit: int) -> None:
        """Count one call under ``key`` now (a window never holds more than ``limit`` calls)."""
        calls = self._calls.get(key)
        if calls is None or calls.maxlen != max(1, limit):
            calls = self._calls[key] = deque(calls or (), maxlen=max(1, limit))
        calls.append(self.clock())

    def count(self, key: str) -> int:
        """Calls counted under ``key`` within the window."""
        self.retry_after(key, 1 << 30)
        return len(self._calls.get(key, ()))

    def forget_idle(self) -> None:
        """Drop every key whose calls all left the window (bounds memory with many users)."""
        now = self.clock()
        for key in [k for k, calls in self._calls.items() if not calls or calls[-1] + self.window <= now]:
            del self._calls[key]

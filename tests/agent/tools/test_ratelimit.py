"""The sliding window: never more than N counted calls in any 60 seconds, and a refusal only when
the window is really full; retry_after says exactly when the next call fits."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.tools import SlidingWindow


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=1, max_value=8),
       st.lists(st.floats(min_value=0.0, max_value=40.0, allow_nan=False), min_size=1, max_size=80))
def test_no_window_of_60_seconds_ever_holds_more_than_the_limit(limit: int, gaps: list[float]) -> None:
    clock = Clock()
    window = SlidingWindow(clock)
    counted: list[float] = []
    for gap in gaps:
        clock.now += gap
        recent = [t for t in counted if t + 60.0 > clock.now]
        wait = window.retry_after("k", limit)
        if wait is None:
            assert len(recent) < limit  # allowed only when there is room
            window.add("k", limit)
            counted.append(clock.now)
        else:
            assert len(recent) == limit  # refused only when full
            assert wait == min(recent) + 60.0 - clock.now  # and exactly until the oldest leaves
    for t in counted:  # the invariant over every window that starts at a counted call
        assert sum(1 for u in counted if t <= u < t + 60.0) <= limit


def test_a_refused_call_fits_exactly_when_retry_after_says() -> None:
    clock = Clock()
    window = SlidingWindow(clock)
    for t in (0.0, 7.3, 12.9):
        clock.now = t
        window.add("k", 3)
    clock.now = 30.0
    wait = window.retry_after("k", 3)
    assert wait == 30.0
    clock.now = 59.99
    assert window.retry_after("k", 3) is not None
    clock.now = 60.0
    assert window.retry_after("k", 3) is None


def test_keys_are_separate_idle_keys_are_forgotten_and_a_zero_limit_refuses() -> None:
    clock = Clock()
    window = SlidingWindow(clock)
    window.add("a", 1)
    assert window.retry_after("a", 1) == 60.0 and window.retry_after("b", 1) is None
    assert window.retry_after("b", 0) == 60.0
    clock.now = 61.0
    window.forget_idle()
    assert window.count("a") == 0 and window._calls == {}

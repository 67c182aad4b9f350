"""Hooks: firing sync and async callbacks, merging several into one, failures returned not raised."""

from __future__ import annotations

from typing import Any

from agent import Hooks, RunContext

CTX = RunContext("a", "r-1", "s-1", 2)


async def test_fire_calls_sync_and_async_hooks() -> None:
    seen: list[Any] = []

    async def later(ctx: RunContext, request: Any) -> None:
        seen.append(("async", ctx.turn, request))

    hooks = Hooks(before_turn=lambda ctx: seen.append(("sync", ctx.turn)), before_inference=later)
    assert await hooks.fire("before_turn", CTX) is None
    assert await hooks.fire("before_inference", CTX, "req") is None
    assert await hooks.fire("after_turn", CTX) is None  # unset: nothing happens
    assert seen == [("sync", 2), ("async", 2, "req")]


async def test_a_failing_hook_is_returned_not_raised() -> None:
    def broken(ctx: RunContext) -> None:
        raise KeyError("missing")

    error = await Hooks(before_loop=broken).fire("before_loop", CTX)
    assert isinstance(error, KeyError)


async def test_merge_fans_out_in_order_and_runs_every_observer() -> None:
    seen: list[str] = []

    def failing(ctx: RunContext) -> None:
        seen.append("first")
        raise RuntimeError("first failed")

    async def second(ctx: RunContext) -> None:
        seen.append("second")

    def third(ctx: RunContext) -> None:
        seen.append("third")
        raise ValueError("third failed")

    merged = Hooks.merge([Hooks(before_loop=failing), Hooks(), Hooks(before_loop=second),
                          Hooks(before_loop=third, after_loop=lambda ctx, result: seen.append("after"))])
    error = await merged.fire("before_loop", CTX)
    assert seen == ["first", "second", "third"]
    assert isinstance(error, ExceptionGroup)
    assert [type(e) for e in error.exceptions] == [RuntimeError, ValueError]
    await merged.fire("after_loop", CTX, None)
    assert seen[-1] == "after"
    assert merged.before_turn is None  # a hook nobody implements stays unset


async def test_merge_of_one_keeps_the_callback() -> None:
    def hook(ctx: RunContext) -> None:
        return None

    assert Hooks.merge([Hooks(before_turn=hook)]).before_turn is hook

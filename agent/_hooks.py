"""Lifecycle hooks and features.

:class:`Hooks` are optional callbacks (sync or async) around the loop, each turn, each inference
and each tool call. A :class:`Feature` bundles instructions, tools and hooks; when several features
are given, their instructions and tools concatenate and their hooks fan out in order.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._tools import Tool

Hook = Callable[..., Any]


@dataclass(frozen=True)
class RunContext:
    """Passed to every hook: which agent, run, session and turn."""

    agent: str
    run_id: str
    session_id: str | None
    turn: int = 0


@dataclass
class Hooks:
    """Callbacks around the run. Each receives a :class:`RunContext` first.

    before_loop(ctx) / after_loop(ctx, result) / before_turn(ctx) / after_turn(ctx) /
    before_inference(ctx, request) / after_inference(ctx, response) /
    on_tool_start(ctx, call) / on_tool_end(ctx, call, result_text, is_error, duration_ms) /
    on_progress(ctx, line)
    """

    before_loop: Hook | None = None
    after_loop: Hook | None = None
    before_turn: Hook | None = None
    after_turn: Hook | None = None
    before_inference: Hook | None = None
    after_inference: Hook | None = None
    on_tool_start: Hook | None = None
    on_tool_end: Hook | None = None
    on_progress: Hook | None = None

    @staticmethod
    def merge(all_hooks: Sequence[Hooks]) -> Hooks:
        """One Hooks whose callbacks call every given callback in order."""
        merged = Hooks()
        for f in fields(Hooks):
            callbacks = [getattr(h, f.name) for h in all_hooks if getattr(h, f.name) is not None]
            if callbacks:
                setattr(merged, f.name, _fan_out(callbacks))
        return merged

    async def fire(self, name: str, *args: Any) -> None:
        """Call the hook ``name`` if set (awaiting it when it is async)."""
        callback = getattr(self, name)
        if callback is not None:
            value = callback(*args)
            if inspect.isawaitable(value):
                await value


def _fan_out(callbacks: list[Hook]) -> Hook:
    if len(callbacks) == 1:
        return callbacks[0]

    async def call_all(*args: Any) -> None:
        for callback in callbacks:
            value = callback(*args)
            if inspect.isawaitable(value):
                await value

    return call_all


@dataclass
class Feature:
    """A reusable bundle: instructions (a prompt section), tools and hooks."""

    name: str
    instructions: str | None = None
    tools: list[Tool] = field(default_factory=list)
    hooks: Hooks = field(default_factory=Hooks)

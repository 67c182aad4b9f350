"""Lifecycle hooks and features.

:class:`Hooks` are optional callbacks (sync or async) around the loop, each turn, each inference
and each tool call. A :class:`Feature` bundles instructions, tools and hooks; when several features
are given, their instructions and tools concatenate and their hooks fan out in order.

A hook observes; it never fails the run. An exception from a hook is logged and recorded with the
run (``hook_errors`` in its attributes), and the run goes on.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .tools import Tool

Hook = Callable[..., Any]
log = logging.getLogger("footprint.agent")

#: The hook names in the order a run meets them (tool hooks repeat per call, turn hooks per turn).
HOOK_NAMES = (
    "before_loop", "before_turn", "before_inference", "after_inference", "on_tool_start", "on_progress",
    "on_tool_end", "after_turn", "after_loop",
)


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
        """One Hooks whose callbacks call every given callback in order (each one, even if another fails)."""
        merged = Hooks()
        for f in fields(Hooks):
            callbacks = [getattr(h, f.name) for h in all_hooks if getattr(h, f.name) is not None]
            if callbacks:
                setattr(merged, f.name, _fan_out(callbacks))
        return merged

    async def fire(self, name: str, *args: Any) -> Exception | None:
        """Call the hook ``name`` if set (awaiting it when async); its exception is returned, not raised."""
        callback = getattr(self, name)
        if callback is None:
            return None
        try:
            value = callback(*args)
            if inspect.isawaitable(value):
                await value
        except Exception as exc:  # a hook observes; it never fails the run
            log.warning("hook %s failed: %s: %s", name, type(exc).__name__, exc, exc_info=exc)
            return exc
        return None


def _fan_out(callbacks: list[Hook]) -> Hook:
    if len(callbacks) == 1:
        return callbacks[0]

    async def call_all(*args: Any) -> None:
        errors: list[Exception] = []
        for callback in callbacks:
            try:
                value = callback(*args)
                if inspect.isawaitable(value):
                    await value
            except Exception as exc:  # the other observers still run
                errors.append(exc)
        if len(errors) == 1:
            raise errors[0]
        if errors:
            raise ExceptionGroup(f"{len(errors)} callbacks of one hook failed", errors)

    return call_all


@dataclass
class Feature:
    """A reusable bundle: instructions (a prompt section), tools and hooks.

    Given several features, an agent adds each one's instructions as its own prompt section
    (``feature:NAME``) in order, offers all their tools, and calls every feature's hooks in order.
    """

    name: str
    instructions: str | None = None
    tools: list[Tool] = field(default_factory=list)
    hooks: Hooks = field(default_factory=Hooks)

"""Governing one call: the permission check, its record on the tool stage, and what follows.

:func:`enforce` is the one place a decision turns into behaviour, used by the agent's tool loop,
by :func:`with_permission_check` and by ``use_tool`` for the tool it reaches: an allowed call is
counted and goes on, a refusal becomes an error result naming the rule, and a call that needs a
person pauses the run ``awaiting`` (resuming with a yes runs it).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ._context import ToolContext
from ._permissions import PermissionChecker
from ._tool import PauseRun, Tool
from .errors import PermissionDeniedError, ToolRateLimitedError


def enforce(checker: PermissionChecker, tool: Tool, arguments: dict[str, Any], context: ToolContext,
            *, key: str = "permission") -> None:
    """Check ``tool`` for ``context``'s user; record the decision under ``key``; raise unless allowed."""
    decision = checker.check(tool, context, arguments)
    context.record(**{key: decision.to_dict()})
    if not decision.allowed:  # what `why` shows beside the refused call
        context.record(why_note=f"{decision.tool} {decision.outcome.replace('_', ' ')} by rule {decision.rule}: "
                                f"{decision.reason}")
    if decision.allowed:
        checker.record_usage(tool, context, decision, arguments)
        return
    if decision.requires_confirmation:
        raise confirmation(tool, arguments)
    if decision.outcome == "rate_limited":
        raise ToolRateLimitedError(decision)
    raise PermissionDeniedError(decision)


def confirmation(tool: Tool, arguments: dict[str, Any]) -> PauseRun:
    """The pause that asks a person to allow one call (a yes on resuming runs it)."""
    shown = json.dumps(arguments, ensure_ascii=False, default=str)
    return PauseRun(f"Allow {tool.name} with {shown[:300]}? (it needs a person's confirmation)", kind="approval")


def govern(checker: PermissionChecker | None, tool: Tool, arguments: dict[str, Any], context: ToolContext | None,
           *, confirmed: bool) -> None:
    """What a call goes through before it runs: the checker's decision (:func:`enforce`), or without
    a checker the tool's own ``requires_confirmation`` — a person's yes is asked either way."""
    if checker is not None:
        assert context is not None
        enforce(checker, tool, arguments, context)
    elif tool.requires_confirmation and not confirmed:
        raise confirmation(tool, arguments)


def with_permission_check(tool: Tool, checker: PermissionChecker) -> Tool:
    """``tool`` wrapped so each call is checked by ``checker`` first (for agents without a checker).

    The wrapper receives the execution context (the user, the workspace, whether a person already
    confirmed) and passes it on when the tool takes it.
    """

    async def execute(arguments: dict[str, Any], context: ToolContext) -> Any:
        enforce(checker, tool, arguments, context)
        return await tool.run(arguments, context)

    return dataclasses.replace(tool, execute=execute, takes_context=True, timeout=None, close=tool.close)

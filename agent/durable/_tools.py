"""Typed tools: a result schema, the rendering the model sees, and an error predicate.

:func:`typed_tool` builds an ordinary :class:`agent.Tool` (so the loop, its batch and its
recording are the same for every tool) whose ``execute`` returns a structured result that is
validated against ``returns``, rendered for the model by ``render``, and marked an error by
``is_error``. A result that fails its schema becomes an error result naming what is wrong.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

import jsonschema

from agent import Tool, result_text
from agent.errors import ToolReportedError, UserError


def typed_tool(
    name: str,
    description: str,
    parameters: dict[str, Any],
    returns: dict[str, Any],
    execute: Callable[[dict[str, Any]], Awaitable[Any] | Any],
    *,
    render: Callable[[Any], str] = result_text,
    is_error: Callable[[Any], bool] | None = None,
    durable: bool = False,
    timeout: float | None = 30.0,
) -> Tool:
    """A tool whose structured result is checked against ``returns`` and rendered by ``render``.

    ``durable=True``: running it again with the same arguments is safe, so a batch a crash cut
    off runs it again on ``start()``; any other interrupted call becomes an error result.
    """
    try:
        jsonschema.Draft202012Validator.check_schema(returns)
    except jsonschema.SchemaError as exc:
        raise UserError(f"tool {name}: returns is not a valid JSON schema: {exc.message}") from exc
    validator = jsonschema.Draft202012Validator(returns)

    async def run(arguments: dict[str, Any]) -> str:
        result = execute(arguments)
        if inspect.isawaitable(result):
            result = await result
        problems = sorted(validator.iter_errors(result), key=lambda e: list(e.path))
        if problems:
            details = "; ".join(f"{'/'.join(map(str, e.path)) or '(root)'}: {e.message}" for e in problems[:5])
            raise ToolReportedError(f"Error: {name} returned a result that does not match its schema: {details}")
        text = render(result)
        if is_error is not None and is_error(result):
            raise ToolReportedError(text)
        return text

    return Tool(name, description, parameters, run, durable=durable, timeout=timeout)

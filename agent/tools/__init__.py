"""Tools and their governance: definitions, the registry, and the execution context.

A :class:`Tool` is what a model can call; :func:`tool` builds one from a typed function. A
:class:`ToolRegistry` is the catalogue tool names resolve against (groups, search, the workspace).
A tool that declares it receives a :class:`ToolContext`: the run, session, user and workspace it
runs for, and a way to record its decisions on its own tool stage.
"""

from ._context import ToolContext
from ._registry import ToolRegistry
from ._tool import PauseRun, Tool, result_text, tool

__all__ = [
    "PauseRun",
    "Tool",
    "ToolContext",
    "ToolRegistry",
    "result_text",
    "tool",
]

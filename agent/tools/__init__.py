"""Tools and their governance: definitions, the registry, permissions, meta-tools, the code sandbox.

A :class:`Tool` is what a model can call; :func:`tool` builds one from a typed function. A
:class:`ToolRegistry` is the catalogue tool names resolve against (groups, search, the workspace).
A tool that declares it receives a :class:`ToolContext`: the run, session, user and workspace it
runs for, and a way to record its decisions on its own tool stage.

A :class:`PermissionChecker` decides who may run which tool, on which paths and hosts, and how
often; :func:`meta_tools` lets a model discover a large catalogue in three steps instead of being
sent every schema. :class:`CodeGenerator` writes code and runs JavaScript and TypeScript in a
:class:`DenoSandbox` with every permission denied; :func:`code_tool` offers that to an agent.
Every decision is recorded on the tool stage of the call it governed. :class:`MCPConnection` offers
the tools of an MCP server (``pip install footprint[mcp]``).
"""

from ._codegen import (
    CodeGenerator,
    CodeSnippet,
    CodeValidation,
    ExecutionStats,
    GeneratedCode,
    code_tool,
)
from ._context import ToolContext
from ._factories import permission_checker, permissive_checker, restrictive_checker
from ._governance import enforce, govern, with_permission_check
from ._mcp import MCPConnection
from ._meta import LIMIT_ARGUMENTS, META_TOOL_NAMES, apply_tool_limits, cap_result, meta_tools, tool_help
from ._permissions import (
    CATEGORIES,
    PermissionChecker,
    PermissionDecision,
    PermissionLevel,
    PermissionPolicy,
    ToolRule,
    UserPermissions,
)
from ._ratelimit import SlidingWindow
from ._registry import ToolRegistry
from ._results import DEFAULT_MAX_RESULT_CHARS, RECORDED_RESULT_CHARS, Cut, cut_result, result_text, storable
from ._sandbox import DenoSandbox, SandboxLimits, SandboxResult, find_deno
from ._tool import PauseRun, Tool, ToolLike, as_tool, as_tools, message_of, tool
from .errors import (
    CodeValidationError,
    PermissionDeniedError,
    SandboxError,
    ToolRateLimitedError,
    ToolUseError,
    UnreadableResultError,
)

__all__ = [
    "CATEGORIES",
    "DEFAULT_MAX_RESULT_CHARS",
    "LIMIT_ARGUMENTS",
    "META_TOOL_NAMES",
    "RECORDED_RESULT_CHARS",
    "CodeGenerator",
    "CodeSnippet",
    "CodeValidation",
    "CodeValidationError",
    "Cut",
    "DenoSandbox",
    "ExecutionStats",
    "GeneratedCode",
    "MCPConnection",
    "PauseRun",
    "PermissionChecker",
    "PermissionDecision",
    "PermissionDeniedError",
    "PermissionLevel",
    "PermissionPolicy",
    "SandboxError",
    "SandboxLimits",
    "SandboxResult",
    "SlidingWindow",
    "Tool",
    "ToolContext",
    "ToolLike",
    "ToolRateLimitedError",
    "ToolRegistry",
    "ToolRule",
    "ToolUseError",
    "UnreadableResultError",
    "UserPermissions",
    "apply_tool_limits",
    "as_tool",
    "as_tools",
    "cap_result",
    "code_tool",
    "cut_result",
    "enforce",
    "find_deno",
    "govern",
    "message_of",
    "meta_tools",
    "permission_checker",
    "permissive_checker",
    "restrictive_checker",
    "result_text",
    "storable",
    "tool",
    "tool_help",
    "with_permission_check",
]

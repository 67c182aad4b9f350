"""Meta-tools: three small tools offered instead of a whole catalogue.

    search_tools("keyword")             -> matching tool names, one line each
    get_tool_help("tool_name")          -> the tool's parameters and an example call
    use_tool("tool_name", {arguments})  -> runs the tool

A hundred tool schemas cost the model thousands of prompt tokens on every request; these three
cost a few hundred. ``use_tool`` checks the call before running it (the tool exists, the required
arguments are there, the schema holds), caps list-returning tools (:func:`apply_tool_limits`),
applies the agent's permission checker to the tool it reaches, and on any failure answers with the
error *and* the tool's full parameter help, so the model can correct the call in one step. The
tool stage records the real tool reached, its arguments and the limits applied.
"""

from __future__ import annotations

import json
from typing import Any

from tracer.errors import json_kind

from ..errors import ToolArgumentsError, ToolError, ToolNotFoundError
from ._context import ToolContext
from ._governance import govern
from ._permissions import META_CATEGORY
from ._registry import ToolRegistry
from ._schema import kind_text
from ._tool import PauseRun, Tool, message_of
from .errors import PermissionDeniedError, ToolUseError

SEARCH_TOOLS, GET_TOOL_HELP, USE_TOOL = "search_tools", "get_tool_help", "use_tool"
META_TOOL_NAMES = (SEARCH_TOOLS, GET_TOOL_HELP, USE_TOOL)
#: integer arguments a list-returning tool's ``max_results`` caps
LIMIT_ARGUMENTS = ("limit", "max_results", "count", "top_k", "page_size")
#: categories whose tools are hidden from search for a user who may not use them
_HIDING_RULES = frozenset({"unknown_tool", "denied_tools", "level", "category"})


def tool_help(tool: Tool) -> str:
    """Everything a model needs to call ``tool`` through ``use_tool``: parameters and an example."""
    properties = tool.parameters.get("properties") or {}
    required = set(tool.parameters.get("required") or ())
    lines = [f"{tool.name}: {tool.description}"]
    if tool.category:
        lines.append(f"Category: {tool.category}")
    if tool.requires_confirmation:
        lines.append("A person confirms each call before it runs.")
    extra = tool.parameters.get("additionalProperties", False)  # left out: not offered (as Tool.signature)
    lines.append("Parameters:" if properties or extra is not False else "Parameters: none")
    example: dict[str, Any] = {}
    for name, schema in properties.items():
        kind = kind_text(schema, " or ") or ("one of " + ", ".join(map(json.dumps, schema["enum"]))
                                             if "enum" in schema else "any")
        notes = ["required" if name in required else "optional"]
        if "enum" in schema and "type" in schema:
            notes.append("one of " + ", ".join(map(json.dumps, schema["enum"])))
        if "default" in schema:
            notes.append(f"default {json.dumps(schema['default'])}")
        if tool.max_results is not None and name in LIMIT_ARGUMENTS:
            notes.append(f"at most {tool.max_results}")
        described = f": {schema['description']}" if schema.get("description") else ""
        lines.append(f"- {name} ({kind}, {', '.join(notes)}){described}")
        if name in required:
            example[name] = _placeholder(schema)
    if extra is not False:
        other = kind_text(extra, " or ") if isinstance(extra, dict) else None
        lines.append(f"- {'any other name' if properties else 'any name'} ({other or 'any'}, optional)")
    lines.append(f'Call it: use_tool("{tool.name}", {json.dumps(example, ensure_ascii=False)})')
    return "\n".join(lines)


def _placeholder(schema: dict[str, Any]) -> Any:
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    return {"string": "...", "integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}.get(
        kind if isinstance(kind, str) else "", None)


def apply_tool_limits(tool: Tool, arguments: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``arguments`` with the tool's ``max_results`` cap applied to its limit arguments, and what changed."""
    if tool.max_results is None:
        return arguments, []
    cap = tool.max_results
    properties = tool.parameters.get("properties") or {}
    changed: list[str] = []
    capped = dict(arguments)
    for name in LIMIT_ARGUMENTS:
        value = capped.get(name)
        if name in properties and isinstance(value, int) and not isinstance(value, bool) and value > cap:
            capped[name] = cap
            changed.append(f"{name} {value} -> {cap}")
    return capped, changed


def cap_result(tool: Tool, value: Any) -> tuple[Any, list[str]]:
    """A list result cut to the tool's ``max_results``, and a note when it was cut."""
    if tool.max_results is None or not isinstance(value, list) or len(value) <= tool.max_results:
        return value, []
    return value[:tool.max_results], [f"result {len(value)} items -> {tool.max_results}"]


def _catalogue(context: ToolContext) -> ToolRegistry:
    if context.tools is None:
        raise ToolUseError("no tool catalogue is attached to this agent, so there is nothing to search or use")
    return context.tools


def _find(catalogue: ToolRegistry, name: str) -> Tool:
    if name in META_TOOL_NAMES:
        raise ToolUseError(f"{name} is a meta-tool: call it directly, not through use_tool")
    try:
        return catalogue.get(name)
    except ToolNotFoundError:
        similar = [t.name for t in catalogue.search(name.replace("_", " "), limit=5)]
        hint = f"; similar tools: {', '.join(similar)}" if similar else ""
        raise ToolUseError(f"there is no tool named {name!r}{hint}. Use search_tools to find one.") from None


def _visible(context: ToolContext, tool: Tool) -> bool:
    if context.permissions is None:
        return True
    decision = context.permissions.check(tool, context, None)
    return decision.allowed or decision.rule not in _HIDING_RULES


async def _search_tools(arguments: dict[str, Any], context: ToolContext) -> str:
    catalogue = _catalogue(context)
    query, limit = arguments["query"], arguments.get("limit", 10)
    found = [t for t in catalogue.search(query, limit=len(catalogue)) if t.name not in META_TOOL_NAMES
             and _visible(context, t)][:limit]
    context.record(search_query=query, search_found=[t.name for t in found])
    if not found:
        return f"No tool matches {query!r}. Try other words, or search_tools(\"*\") to list them all."
    lines = [f"- {t.name}{f' [{t.category}]' if t.category else ''}: {t.description.splitlines()[0]}"
             for t in found]
    return "\n".join([*lines, "Next: get_tool_help(\"tool_name\") to see a tool's parameters."])


async def _get_tool_help(arguments: dict[str, Any], context: ToolContext) -> str:
    target = _find(_catalogue(context), arguments["tool_name"])
    context.record(reached_tool=target.name)
    return tool_help(target)


async def _use_tool(arguments: dict[str, Any], context: ToolContext) -> Any:
    target = _find(_catalogue(context), arguments["tool_name"])
    raw = arguments.get("arguments")
    if raw is None:
        raw = {}
    if isinstance(raw, str):  # some models send the arguments as a JSON string
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            raise ToolUseError(f"the arguments for {target.name} are not valid JSON ({exc.msg}).\n\n"
                               f"{tool_help(target)}") from None
    if not isinstance(raw, dict):
        raise ToolUseError(f"the arguments for {target.name} must be a JSON object, not {json_kind(raw)}."
                           f"\n\n{tool_help(target)}")
    context.record(reached_tool=target.name, reached_arguments=raw, why_note=f"use_tool reached {target.name}")
    missing = [p for p in target.parameters.get("required") or () if p not in raw]
    if missing:
        raise ToolUseError(f"{target.name} needs the argument(s) {', '.join(missing)}.\n\n{tool_help(target)}")
    try:
        checked = target.check_arguments(raw)
    except ToolArgumentsError as exc:
        raise ToolUseError(f"{exc}\n\n{tool_help(target)}") from None
    checked, limited = apply_tool_limits(target, checked)
    govern(context.permissions, target, checked, context, confirmed=context.confirmed)
    try:
        value = await target.run(checked, context)
    except (PauseRun, PermissionDeniedError):
        raise
    except ToolError as exc:
        raise ToolUseError(f"{target.name} failed: {exc}\n\n{tool_help(target)}") from None
    except Exception as exc:
        raise ToolUseError(f"{target.name} failed: {type(exc).__name__}: {message_of(exc)}\n\n{tool_help(target)}") \
            from None
    value, cut = cap_result(target, value)
    if limited or cut:
        context.record(limits_applied=[*limited, *cut])
    return value


def meta_tools() -> list[Tool]:
    """``search_tools``, ``get_tool_help`` and ``use_tool`` over the catalogue in the execution context."""
    return [
        Tool(SEARCH_TOOLS, "Find tools by keyword (name, description, tags). Returns matching tool names.",
             {"type": "object", "properties": {
                 "query": {"type": "string", "description": "words describing what the tool should do, or *"},
                 "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10}},
              "required": ["query"], "additionalProperties": False},
             _search_tools, category=META_CATEGORY, takes_context=True, durable=True),
        Tool(GET_TOOL_HELP, "Show a tool's parameters and an example call.",
             {"type": "object", "properties": {"tool_name": {"type": "string"}},
              "required": ["tool_name"], "additionalProperties": False},
             _get_tool_help, category=META_CATEGORY, takes_context=True, durable=True),
        Tool(USE_TOOL, "Run a tool found with search_tools, with its arguments as a JSON object.",
             {"type": "object", "properties": {
                 "tool_name": {"type": "string"},
                 "arguments": {"type": ["object", "string"], "description": "the tool's arguments"}},
              "required": ["tool_name"], "additionalProperties": False},
             _use_tool, category=META_CATEGORY, takes_context=True, timeout=None),
    ]

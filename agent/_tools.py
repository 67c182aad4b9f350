"""Tools: what a model can call.

A :class:`Tool` has a name, a description, JSON-schema parameters, an async ``execute`` taking the
validated arguments, an optional progress line shown while it runs, and a ``durable`` flag (a
durable tool may be executed again with the same arguments; a counterfactual or a replay never
executes a non-durable one twice). :func:`tool` derives all of it from a typed Python function and
its docstring. A :class:`ToolRegistry` resolves declarative tool names, so one agent config can
point at fake data in a sandbox and a real backend in production.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import types
import typing
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from tracer import Item, ItemKind

from .errors import ToolArgumentsError, ToolNotFoundError, UserError

Execute = Callable[[dict[str, Any]], Awaitable[Any]]


class PauseRun(Exception):  # noqa: N818 - a control-flow signal, not an error
    """Raised by a tool (or an approval callback) to pause the run and ask a person ``question``.

    The run ends with status ``awaiting``; resuming it with a decision continues from this call:
    for ``kind="answer"`` the decision becomes the tool's result, for ``kind="approval"`` the call
    runs when the decision approves it (``yes``, ``approve``, ``ok``...) and is refused otherwise.
    """

    def __init__(self, question: str, *, kind: str = "answer") -> None:
        super().__init__(question)
        self.question = question
        self.kind = kind


@dataclass
class Tool:
    """A tool the model may call."""

    name: str
    description: str
    parameters: dict[str, Any]
    execute: Execute
    progress: str | Callable[[dict[str, Any]], str] | None = None
    durable: bool = False
    timeout: float | None = 30.0
    close: Callable[[str], Awaitable[None] | None] | None = None
    _validator: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_\-]{1,64}", self.name):
            raise UserError(f"tool name {self.name!r} must be 1-64 letters, digits, '_' or '-'")
        try:
            jsonschema.Draft202012Validator.check_schema(self.parameters)
        except jsonschema.SchemaError as exc:
            raise UserError(f"tool {self.name}: parameters are not a valid JSON schema: {exc.message}") from exc
        self._validator = jsonschema.Draft202012Validator(self.parameters)

    def definition(self) -> Item:
        """The tool as offered to a model (a ``tool_definition`` item)."""
        return Item(
            ItemKind.TOOL_DEFINITION,
            {"name": self.name, "description": self.description, "parameters": self.parameters},
        )

    def progress_line(self, arguments: dict[str, Any]) -> str | None:
        """The line a chat may show while the tool runs."""
        if callable(self.progress):
            return self.progress(arguments)
        return self.progress

    def parse_arguments(self, raw: str) -> dict[str, Any]:
        """The call's arguments, parsed and validated; :class:`ToolArgumentsError` says what is wrong."""
        try:
            value = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            raise ToolArgumentsError(
                f"arguments for {self.name} are not valid JSON ({exc.msg} at char {exc.pos}): {raw[:200]}"
            ) from exc
        if not isinstance(value, dict):
            raise ToolArgumentsError(f"arguments for {self.name} must be a JSON object, got {type(value).__name__}")
        errors = sorted(self._validator.iter_errors(value), key=lambda e: list(e.path))
        if errors:
            details = "; ".join(
                f"{'/'.join(str(p) for p in e.path) or '(root)'}: {e.message}" for e in errors[:5]
            )
            raise ToolArgumentsError(f"arguments for {self.name} do not match its schema: {details}")
        return value


_DOC_ARG = re.compile(r"^\s{2,}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.+)$")


def _docstring_parts(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    doc = inspect.getdoc(fn) or ""
    summary_lines: list[str] = []
    params: dict[str, str] = {}
    in_args = False
    for line in doc.splitlines():
        if line.strip() in ("Args:", "Arguments:", "Parameters:"):
            in_args = True
            continue
        if in_args:
            match = _DOC_ARG.match("  " + line if not line.startswith("  ") else line)
            if match:
                params[match.group(1)] = match.group(2).strip()
                continue
            if line and not line.startswith(" "):
                in_args = False
        if not in_args and not params:
            summary_lines.append(line)
    return " ".join(s.strip() for s in summary_lines if s.strip()), params


def _schema_of(annotation: Any) -> dict[str, Any]:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is str:
        return {"type": "string"}
    if annotation is bool:
        return {"type": "boolean"}
    if annotation is int:
        return {"type": "integer"}
    if annotation is float:
        return {"type": "number"}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (list, tuple, set, frozenset) or annotation in (list, tuple):
        return {"type": "array", "items": _schema_of(args[0]) if args else {}}
    if origin is dict or annotation is dict:
        return {"type": "object"}
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        schema = _schema_of(options[0]) if len(options) == 1 else {"anyOf": [_schema_of(a) for a in options]}
        return schema
    return {}


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    progress: str | Callable[[dict[str, Any]], str] | None = None,
    durable: bool = False,
    timeout: float | None = 30.0,
) -> Any:
    """Make a :class:`Tool` from a typed function (sync or async); usable as ``@tool`` or ``@tool(...)``.

    The parameters' JSON schema comes from the annotations, their descriptions from an ``Args:``
    section of the docstring, and the tool's description from the docstring's first paragraph.
    """

    def build(func: Callable[..., Any]) -> Tool:
        summary, docs = _docstring_parts(func)
        hints = typing.get_type_hints(func)
        properties: dict[str, Any] = {}
        required: list[str] = []
        for pname, param in inspect.signature(func).parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            schema = _schema_of(hints.get(pname, Any))
            if pname in docs:
                schema["description"] = docs[pname]
            if param.default is inspect.Parameter.empty:
                required.append(pname)
            elif param.default is not None:
                schema["default"] = param.default
            properties[pname] = schema
        parameters: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
        if required:
            parameters["required"] = required

        if inspect.iscoroutinefunction(func):
            async def execute(arguments: dict[str, Any]) -> Any:
                return await func(**arguments)
        else:
            async def execute(arguments: dict[str, Any]) -> Any:
                return await asyncio.to_thread(func, **arguments)

        return Tool(
            name=name or func.__name__,
            description=description or summary or func.__name__,
            parameters=parameters,
            execute=execute,
            progress=progress,
            durable=durable,
            timeout=timeout,
        )

    return build(fn) if fn is not None else build


class ToolRegistry:
    """Tools by name. The registry, not the agent config, decides what a tool name does."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.register(t)

    def register(self, t: Tool, *, replace: bool = False) -> Tool:
        """Add a tool; a second tool of the same name is refused unless ``replace``."""
        if t.name in self._tools and not replace:
            raise UserError(f"a tool named {t.name!r} is already registered")
        self._tools[t.name] = t
        return t

    def get(self, name: str) -> Tool:
        """The tool called ``name``."""
        try:
            return self._tools[name]
        except KeyError:
            raise ToolNotFoundError(
                f"no tool named {name!r}; registered: {', '.join(sorted(self._tools)) or 'none'}"
            ) from None

    def resolve(self, names: Iterable[str]) -> list[Tool]:
        """The tools for declarative ``names``, in order; an unknown name is a :class:`UserError`."""
        out = []
        for n in names:
            if n not in self._tools:
                raise UserError(
                    f"tool {n!r} is not in the registry (registered: {', '.join(sorted(self._tools)) or 'none'})"
                )
            out.append(self._tools[n])
        return out

    def names(self) -> list[str]:
        """Every registered name, sorted."""
        return sorted(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)


def result_text(value: Any) -> str:
    """A tool's return value as the text the model sees."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)

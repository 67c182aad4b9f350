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
import enum
import inspect
import json
import logging
import re
import types
import typing
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from tracer import Item, ItemKind

from .errors import ToolArgumentsError, ToolNotFoundError, ToolTimeoutError, UserError

#: execute(arguments) -> result (async, or a plain function returning the result)
Execute = Callable[[dict[str, Any]], Awaitable[Any] | Any]


class PauseRun(Exception):  # a control-flow signal, not an error
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
    """A tool the model may call.

    ``parameters`` is the JSON schema of the arguments (validated before ``execute`` runs).
    ``execute(arguments)`` may be async or plain. ``progress`` is a line (or a function of the
    arguments giving one) a chat may show while the tool runs. ``durable``: executing it again
    with the same arguments is safe. ``timeout`` in seconds (None: no limit). ``close(reason)``
    releases what the tool holds when its agent closes.
    """

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
        """The line a chat may show while the tool runs (None when a progress function fails)."""
        if callable(self.progress):
            try:
                return self.progress(arguments)
            except Exception:  # a broken progress line must not fail the call it describes
                logging.getLogger("footprint.agent").warning("progress line of tool %s failed", self.name,
                                                             exc_info=True)
                return None
        return self.progress

    def signature(self) -> str:
        """A one-line summary of the parameters, e.g. ``city: string (required), days: integer``."""
        properties = self.parameters.get("properties") or {}
        required = set(self.parameters.get("required") or ())
        parts = []
        for pname, schema in properties.items():
            kind = schema.get("type") or ("enum " + "|".join(map(str, schema["enum"])) if "enum" in schema else "any")
            parts.append(f"{pname}: {kind if isinstance(kind, str) else '|'.join(kind)}"
                         f"{' (required)' if pname in required else ''}")
        return ", ".join(parts) or "no parameters"

    def parse_arguments(self, raw: str) -> dict[str, Any]:
        """The call's arguments, parsed and validated; :class:`ToolArgumentsError` says what is wrong."""
        try:
            value = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            raise ToolArgumentsError(
                f"arguments for {self.name} are not valid JSON ({exc.msg} at char {exc.pos}): {raw[:200]}; "
                f"expected a JSON object with {self.signature()}"
            ) from exc
        if not isinstance(value, dict):
            raise ToolArgumentsError(
                f"arguments for {self.name} must be a JSON object, got {type(value).__name__}; "
                f"expected {self.signature()}"
            )
        if _surely_valid(self.parameters, value):
            return value
        errors = sorted(self._validator.iter_errors(value), key=lambda e: list(e.path))
        if errors:
            details = "; ".join(
                f"{'/'.join(str(p) for p in e.path) or '(root)'}: {e.message}" for e in errors[:5]
            )
            raise ToolArgumentsError(
                f"arguments for {self.name} do not match its schema: {details}; expected {self.signature()}"
            )
        return value

    async def run(self, arguments: dict[str, Any]) -> Any:
        """Execute with validated ``arguments`` under the tool's timeout (:class:`ToolTimeoutError`)."""
        if self.timeout is None:
            return await _call(self.execute, arguments)
        deadline = asyncio.timeout(self.timeout)  # no extra task, unlike wait_for
        try:
            async with deadline:
                return await _call(self.execute, arguments)
        except TimeoutError:
            if not deadline.expired():
                raise  # the tool's own timeout (a network call, say): an ordinary failure
            raise ToolTimeoutError(f"{self.name} did not finish within {self.timeout:g} s") from None


# The keywords _surely_valid understands; annotations (description, default, title) change nothing.
_SIMPLE_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "items", "enum",
                              "description", "default", "title"})


def _is_type(kind: str, value: Any) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "null":
        return value is None
    return False


def _surely_valid(schema: Any, value: Any) -> bool:
    """True only when ``value`` certainly matches ``schema``: a fast path for the simple schemas tools use.

    It understands a subset of JSON Schema and is stricter than it (``1.0`` is no integer here);
    False means "not sure", and the full validator decides and explains.
    """
    if not isinstance(schema, dict) or not schema.keys() <= _SIMPLE_KEYWORDS:
        return False
    if "enum" in schema and not any(type(value) is type(option) and value == option for option in schema["enum"]):
        return False
    kind = schema.get("type")
    if kind is not None and not any(_is_type(k, value) for k in (kind if isinstance(kind, list) else (kind,))):
        return False
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        if any(name not in value for name in schema.get("required") or ()):
            return False
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            sub = properties.get(name)
            if sub is None:
                if extra is False or (extra is not True and not _surely_valid(extra, item)):
                    return False
            elif not _surely_valid(sub, item):
                return False
    if isinstance(value, list) and "items" in schema:
        return all(_surely_valid(schema["items"], item) for item in value)
    return True


async def _call(execute: Execute, arguments: dict[str, Any]) -> Any:
    value = execute(arguments)
    if inspect.isawaitable(value):
        value = await value
    return value


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params|Returns?|Yields?|Raises|Examples?|Notes?|See Also):\s*$")
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM = re.compile(r"^:param\s+(?:[\w\[\], |]+\s+)?(\w+):\s*(.*)$")


def _docstring_parts(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """The description (text before the first section) and each parameter's description.

    Reads Google style (``Args:`` then ``name: text``, continuation lines indented deeper) and
    Sphinx style (``:param name: text``).
    """
    doc = inspect.getdoc(fn) or ""
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in doc.splitlines():
        stripped = line.strip()
        header = _SECTION.match(stripped) if not line.startswith(" ") else None
        if header:
            section, current = header.group(1), None
            continue
        sphinx = _SPHINX_PARAM.match(stripped)
        if sphinx:
            section, current = "Sphinx", sphinx.group(1)
            params[current] = sphinx.group(2).strip()
            continue
        if stripped.startswith(":") and section in (None, "Sphinx"):
            section, current = "Sphinx", None  # :returns:, :raises: ... end the description
            continue
        if section is None:
            description.append(stripped)
        elif section in ("Args", "Arguments", "Parameters", "Params"):
            match = _ARG_LINE.match(stripped)
            if match and len(line) - len(line.lstrip()) <= 4:
                current = match.group(1).lstrip("*")
                params[current] = match.group(2).strip()
            elif current and stripped:
                params[current] = f"{params[current]} {stripped}".strip()
        elif section == "Sphinx" and current and stripped:
            params[current] = f"{params[current]} {stripped}".strip()
    return "\n".join(_paragraphs(description)), params


def _paragraphs(lines: list[str]) -> list[str]:
    out: list[str] = []
    block: list[str] = []
    for line in [*lines, ""]:
        if line:
            block.append(line)
        elif block:
            out.append(" ".join(block))
            block = []
    return out


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    kind = schema.get("type")
    if isinstance(kind, str) and set(schema) <= {"type", "items", "additionalProperties"}:
        return {**schema, "type": [kind, "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def _schema_of(annotation: Any) -> dict[str, Any]:
    """The JSON schema of a parameter annotation ({} for Any or a type it cannot describe)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        described = dict(_schema_of(args[0]))
        notes = [a for a in args[1:] if isinstance(a, str)]
        if notes:
            described["description"] = " ".join(notes)
        return described
    simple = {str: "string", bool: "boolean", int: "integer", float: "number"}
    if annotation in simple:
        return {"type": simple[annotation]}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return {"enum": [member.value for member in annotation]}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return {"type": "array", "items": _schema_of(args[0])}
    if origin is tuple and args:
        return {"type": "array", "prefixItems": [_schema_of(a) for a in args], "minItems": len(args),
                "maxItems": len(args)}
    if origin in (list, tuple, set, frozenset) or annotation in (list, tuple, set, frozenset):
        return {"type": "array", "items": _schema_of(args[0]) if args else {}}
    if origin is dict or annotation is dict:
        schema: dict[str, Any] = {"type": "object"}
        if len(args) == 2 and args[1] is not Any:
            schema["additionalProperties"] = _schema_of(args[1])
        return schema
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        inner = _schema_of(options[0]) if len(options) == 1 else {"anyOf": [_schema_of(a) for a in options]}
        return _nullable(inner) if len(options) < len(args) else inner
    return {}


def _enum_params(hints: dict[str, Any]) -> dict[str, type[enum.Enum]]:
    """Parameters annotated with an Enum: their JSON values are turned back into members."""
    out = {}
    for pname, hint in hints.items():
        if typing.get_origin(hint) is typing.Annotated:
            hint = typing.get_args(hint)[0]
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            out[pname] = hint
    return out


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

    The parameters' JSON schema comes from the annotations (``str``, ``int``, ``float``, ``bool``,
    lists, dicts, ``Literal``, ``Enum``, optional types, ``Annotated[T, "description"]``), their
    descriptions from the docstring's ``Args:`` section (or ``:param name:`` lines), and the tool's
    description from the docstring's text before its first section. A sync function runs in a
    worker thread so it cannot block the loop.
    """

    def build(func: Callable[..., Any]) -> Tool:
        summary, docs = _docstring_parts(func)
        hints = typing.get_type_hints(func, include_extras=True)
        properties: dict[str, Any] = {}
        required: list[str] = []
        for pname, param in inspect.signature(func).parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            schema = _schema_of(hints.get(pname, Any))
            if pname in docs and "description" not in schema:
                schema["description"] = docs[pname]
            if param.default is inspect.Parameter.empty:
                required.append(pname)
            elif param.default is not None:
                default = param.default
                schema["default"] = default.value if isinstance(default, enum.Enum) else default
            properties[pname] = schema
        parameters: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
        if required:
            parameters["required"] = required
        enums = _enum_params(hints)

        def kwargs_of(arguments: dict[str, Any]) -> dict[str, Any]:
            if not enums:
                return arguments
            return {k: (enums[k](v) if k in enums and v is not None else v) for k, v in arguments.items()}

        if inspect.iscoroutinefunction(func):
            async def execute(arguments: dict[str, Any]) -> Any:
                return await func(**kwargs_of(arguments))
        else:
            async def execute(arguments: dict[str, Any]) -> Any:
                return await asyncio.to_thread(func, **kwargs_of(arguments))

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

"""Tools: what a model can call.

A :class:`Tool` has a name, a description, JSON-schema parameters, an async ``execute`` taking the
validated arguments, an optional progress line shown while it runs, and a ``durable`` flag (a
durable tool may be executed again with the same arguments; a counterfactual or a replay never
executes a non-durable one twice). Governance metadata rides along: ``requires_confirmation``,
a ``category``, search ``tags`` and ``max_results`` for list-returning tools. :func:`tool`
derives all of it from a typed Python function and its docstring.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import re
import sys
import threading
from collections.abc import Awaitable, Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import Any, TypedDict, Unpack, overload

import jsonschema

from tracer import Item, ItemKind, RedactionPolicy
from tracer.errors import json_kind

from ..errors import ToolArgumentsError, ToolExitedError, ToolTimeoutError, UserError
from ._context import ToolContext
from ._converters import NoOptionFits
from ._mismatches import mismatches
from ._results import MIN_RESULT_CHARS
from ._schema import kind_text, surely_valid
from ._signature import _target, call_arguments, declare
from ._threads import in_thread

#: execute(arguments) -> result, or execute(arguments, context) for a tool that ``takes_context``
#: (async, or a plain function returning the result)
Execute = Callable[..., Awaitable[Any] | Any]


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

    Governance: ``requires_confirmation`` (a person approves each call: the run pauses
    ``awaiting``), ``category`` (a tool group such as ``file_read`` or ``network_read``: see
    :data:`agent.tools.CATEGORIES`), ``tags`` (extra words for tool search, never shown to the model),
    ``max_results`` (a list-returning tool's cap, see :func:`agent.tools.apply_tool_limits`).
    ``max_result_chars``: the most characters of one result the model is shown (None: the agent's
    bound, :data:`agent.tools.DEFAULT_MAX_RESULT_CHARS` unless it sets another); a longer result is
    cut to its head and tail with a note saying how much was left out.
    ``takes_context``: ``execute(arguments, context)`` receives a :class:`ToolContext`.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    execute: Execute
    progress: str | Callable[[dict[str, Any]], str] | None = None
    durable: bool = False
    timeout: float | None = 30.0
    close: Callable[[str], Awaitable[None] | None] | None = None
    requires_confirmation: bool = False
    category: str | None = None
    tags: tuple[str, ...] = ()
    max_results: int | None = None
    takes_context: bool = False
    max_result_chars: int | None = None
    _validator: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_\-]{1,64}", self.name):
            raise UserError(f"tool name {self.name!r} must be 1-64 ASCII letters, digits, '_' or '-'")
        self.tags = tuple(self.tags)
        if self.max_results is not None and self.max_results < 1:
            raise UserError(f"tool {self.name}: max_results must be >= 1, got {self.max_results}")
        check_result_bound(f"tool {self.name}: max_result_chars", self.max_result_chars)
        try:
            json.dumps(self.parameters, allow_nan=False)
        except (TypeError, ValueError) as exc:  # the schema is sent to the model as JSON, and stored
            raise UserError(f"tool {self.name}: parameters must be JSON (a schema a model can be sent): {exc}") from None
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
            parts.append(f"{pname}: {_kind(schema)}{' (required)' if pname in required else ''}")
        extra = self.parameters.get("additionalProperties", False)  # left out: not offered, though JSON Schema allows
        if extra is not False:
            parts.append(f"{'other' if parts else 'any'} arguments: {_kind(extra if isinstance(extra, dict) else {})}")
        return ", ".join(parts) or "no parameters"

    def parse_arguments(self, raw: str) -> dict[str, Any]:
        """The call's arguments, parsed and validated; :class:`ToolArgumentsError` says what is wrong."""
        value = self._read(raw) if raw.strip() else {}
        if isinstance(value, str) and value.lstrip().startswith("{"):  # an object sent as a JSON string, as
            try:                                                        # some models (and servers) do
                value = self._read(value)
            except ToolArgumentsError as exc:
                if not isinstance(exc.__cause__, json.JSONDecodeError):
                    raise  # JSON, but too long or too deep to read
        if not isinstance(value, dict):
            raise ToolArgumentsError(
                f"arguments for {self.name} must be a JSON object, not {json_kind(value)}; "
                f"expected {self.signature()}"
            )
        try:
            return self.check_arguments(value)
        except RecursionError:
            raise ToolArgumentsError(self._too_deep()) from None

    def _read(self, raw: str) -> Any:
        """``raw`` as JSON; :class:`ToolArgumentsError` says why it cannot be read."""
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ToolArgumentsError(
                f"arguments for {self.name} are not valid JSON ({exc.msg} at char {exc.pos}): {raw[:200]}; "
                f"expected a JSON object with {self.signature()}"
            ) from exc
        except ValueError as exc:  # an integer longer than Python reads (sys.get_int_max_str_digits())
            problem = (f"hold an integer of more than {sys.get_int_max_str_digits():,} digits, longer than can be "
                       f"read; send a shorter number" if "digits" in str(exc) else f"cannot be read ({message_of(exc)})")
            raise ToolArgumentsError(
                f"arguments for {self.name} {problem}; expected a JSON object with {self.signature()}") from None
        except RecursionError:
            raise ToolArgumentsError(self._too_deep()) from None

    def _too_deep(self) -> str:
        return (f"arguments for {self.name} are nested too deeply to read (lists or objects inside "
                f"each other hundreds of levels down); expected a JSON object with {self.signature()}")

    def check_arguments(self, value: dict[str, Any]) -> dict[str, Any]:
        """``value`` when it matches the schema; :class:`ToolArgumentsError` names each mismatch."""
        if surely_valid(self.parameters, value):
            return value
        found = mismatches(self._validator, value)
        if found:
            details = "; ".join(f"{path or '(root)'}: {problem}" for path, problem in found)
            raise ToolArgumentsError(
                f"arguments for {self.name} do not match its schema: {details}; expected {self.signature()}"
            )
        return value

    async def run(self, arguments: dict[str, Any], context: ToolContext | None = None) -> Any:
        """Execute with validated ``arguments`` under the tool's timeout (:class:`ToolTimeoutError`).

        A tool that ``takes_context`` receives ``context`` (an empty one when none is given).
        """
        args: tuple[Any, ...] = (arguments, context or ToolContext()) if self.takes_context else (arguments,)
        if self.timeout is None:
            return await _call(self.execute, args)
        deadline = asyncio.timeout(self.timeout)  # no extra task, unlike wait_for
        try:
            async with deadline:
                return await _call(self.execute, args)
        except TimeoutError:
            if not deadline.expired():
                raise  # the tool's own timeout (a network call, say): an ordinary failure
            raise ToolTimeoutError(f"{self.name} did not finish within {self.timeout:g} s") from None


async def _call(execute: Execute, args: tuple[Any, ...]) -> Any:
    """What ``execute`` gives: awaited (a coroutine it returns too); a generator's items as a list
    (a plain one drawn in a worker thread). ``sys.exit`` in it fails the call (:class:`ToolExitedError`)."""
    try:
        value = execute(*args)
        while inspect.isawaitable(value):
            value = await value
        if inspect.isasyncgen(value):
            return [item async for item in value]
        if inspect.isgenerator(value):
            stop = threading.Event()
            try:
                return await in_thread(_drawn, value, stop)
            finally:
                stop.set()  # a timeout (or a cancelled run): an endless generator is not drawn on for ever
    except SystemExit as exc:
        raise ToolExitedError(exc) from None
    return value


def _drawn(generator: Generator[Any, Any, Any], stop: threading.Event) -> list[Any]:
    """A generator's items, until it ends or ``stop`` is set (then it is closed)."""
    items = []
    for item in generator:
        if stop.is_set():
            generator.close()
            break
        items.append(item)
    return items


class ToolOptions(TypedDict, total=False):
    """The keyword arguments of :func:`tool` (for its typed overloads)."""

    name: str | None
    description: str | None
    progress: str | Callable[[dict[str, Any]], str] | None
    durable: bool
    timeout: float | None
    requires_confirmation: bool
    category: str | None
    tags: tuple[str, ...] | list[str]
    max_results: int | None
    max_result_chars: int | None


@overload
def tool(fn: Callable[..., Any], **options: Unpack[ToolOptions]) -> Tool: ...


@overload
def tool(fn: None = None, **options: Unpack[ToolOptions]) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    progress: str | Callable[[dict[str, Any]], str] | None = None,
    durable: bool = False,
    timeout: float | None = 30.0,
    requires_confirmation: bool = False,
    category: str | None = None,
    tags: tuple[str, ...] | list[str] = (),
    max_results: int | None = None,
    max_result_chars: int | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a :class:`Tool` from a typed function (sync or async); usable as ``@tool`` or ``@tool(...)``.

    The parameters' JSON schema comes from the annotations (``str``, ``int``, ``float``, ``bool``,
    lists, tuples, sets, dicts, ``Literal``, ``Enum``, optional types and unions,
    ``Annotated[T, "description"]`` and its constraints (annotated-types', pydantic's ``Field``),
    dataclasses, ``TypedDict``s and pydantic models), their descriptions from the docstring's
    ``Args:`` section (or ``:param name:`` lines), and the tool's description from the docstring's
    text before its first section. The function receives the annotated types: an Enum member, a
    dataclass or pydantic model instance, a tuple or a set (for a union, the first of its types, in
    the order written, that takes the value). ``*args`` is a list of its name. A parameter annotated
    :class:`ToolContext` is not offered to the model: it receives the call's execution context.
    A sync function runs in a worker thread so it cannot block the loop. ``max_result_chars``
    bounds how much of one result the model is shown (see :class:`Tool`).
    """

    def build(func: Callable[..., Any]) -> Tool:
        declared = declare(func, name, _maker_names())
        tool_name = declared.name
        converters, context_param = declared.converters, declared.context_param

        def kwargs_of(arguments: dict[str, Any], context: ToolContext | None) -> dict[str, Any]:
            kwargs = arguments if not converters else {
                k: (_converted(tool_name, k, converters[k], v) if k in converters and v is not None else v)
                for k, v in arguments.items()}
            if context_param is not None:
                kwargs = {**kwargs, context_param: context}
            return kwargs

        if inspect.iscoroutinefunction(_target(func)) or inspect.iscoroutinefunction(func):
            async def execute(arguments: dict[str, Any], context: ToolContext | None = None) -> Any:
                args, kwargs = call_arguments(declared, kwargs_of(arguments, context))
                return await func(*args, **kwargs)
        else:
            async def execute(arguments: dict[str, Any], context: ToolContext | None = None) -> Any:
                args, kwargs = call_arguments(declared, kwargs_of(arguments, context))
                return await in_thread(func, *args, **kwargs)

        return Tool(
            name=tool_name,
            description=description or declared.summary or tool_name,
            parameters=declared.parameters,
            execute=execute,
            progress=progress,
            durable=durable,
            timeout=timeout,
            requires_confirmation=requires_confirmation,
            category=category,
            tags=tuple(tags),
            max_results=max_results,
            takes_context=context_param is not None,
            max_result_chars=max_result_chars,
        )

    return build(fn) if fn is not None else build


def check_result_bound(what: str, bound: int | None) -> None:
    """Refuse a result bound that is not None nor an int of at least :data:`MIN_RESULT_CHARS`."""
    if bound is None:
        return
    if not isinstance(bound, int) or isinstance(bound, bool) or bound < MIN_RESULT_CHARS:
        raise UserError(f"{what} must be None or an int of at least {MIN_RESULT_CHARS} (room for the note "
                        f"saying what was left out), got {bound!r}")


#: What a ``tools=`` argument takes, everywhere in footprint: a :class:`Tool`, or a typed function
#: (sync or async, a method, a callable object, a ``functools.partial``) that :func:`tool` makes one.
ToolLike = Tool | Callable[..., Any]


def as_tool(given: ToolLike, owner: str, index: int | None = None) -> Tool:
    """``given`` as a :class:`Tool`: a Tool as it is, a function made one by :func:`tool`.

    Anything else is a :class:`UserError` naming ``owner`` (``"agent notes"``) and the position.
    """
    where = f"{owner}: tools[{index}]" if index is not None else f"{owner}: the tool"
    if isinstance(given, Tool):
        return given
    if isinstance(given, str):
        raise UserError(f"{where} is the name {given!r}, not a tool; pass names as tool_names=[...] with a "
                        f"registry, or the Tool itself")
    if not callable(given):
        raise UserError(f"{where} is {type(given).__name__} {given!r:.60}, not a Tool or a function")
    return tool(given)


def as_tools(tools: Iterable[ToolLike], owner: str) -> list[Tool]:
    """Each of ``tools`` as a :class:`Tool` (see :func:`as_tool`); a lone Tool or function, or a
    string, is refused as not being a list of them."""
    if isinstance(tools, Tool | str) or (callable(tools) and not isinstance(tools, Iterable)):
        raise UserError(f"{owner}: tools must be a list of tools or functions, not one "
                        f"{type(tools).__name__}; pass [it]")
    return [as_tool(t, owner, n) for n, t in enumerate(tools)]


def _maker_names() -> dict[str, Any]:
    """The local names of the code making the tool (the first frame outside footprint's agent package:
    an Agent given a plain function makes its tool too)."""
    frame = sys._getframe(1)
    while frame.f_back is not None and str(frame.f_globals.get("__name__")).partition(".")[0] == "agent":
        frame = frame.f_back
    return dict(frame.f_locals)


def _converted(tool_name: str, pname: str, convert: Callable[[Any], Any], value: Any) -> Any:
    """``value`` as the parameter's type; a value that cannot be one is the model's to correct."""
    try:
        return convert(value)
    except Exception as exc:  # a date that is no date, a model's own validator...
        raise ToolArgumentsError(f"arguments for {tool_name} do not fit its parameters: {pname}: "
                                 f"{_refusal(exc)}") from None


def _refusal(exc: Exception) -> str:
    """Why a type refused a value: a pydantic ValidationError's problems, each union option's reason."""
    if isinstance(exc, NoOptionFits):
        return "fits none of its types (" + "; ".join(
            f"as {option}: {why if isinstance(why, str) else _refusal(why)}" for option, why in exc.refusals) + ")"
    errors = getattr(exc, "errors", None)  # a pydantic ValidationError lists each problem
    if callable(errors):
        return "; ".join(f"{'/'.join(map(str, e.get('loc', ()))) or '(root)'}: {e.get('msg')}" for e in errors()[:5])
    return message_of(exc)


def _kind(schema: dict[str, Any]) -> str:
    """What a parameter's schema takes, as the signature says it."""
    return kind_text(schema, "|") or ("enum " + "|".join(map(str, schema["enum"])) if "enum" in schema else "any")


#: The longest exception text the model is shown of a failed call (a 2 MB message would fill its context).
MAX_ERROR_TEXT = 4000
_CREDENTIALS = RedactionPolicy()


def message_of(exc: BaseException) -> str:
    """``str(exc)`` as the model may see it: credentials masked (an exception quoting a request's
    ``Authorization`` header or a key must not send it to the model provider, nor have the model
    repeat it), cut to :data:`MAX_ERROR_TEXT` characters; or what can be said of an exception whose
    text cannot be read."""
    try:
        text = str(exc)
    except Exception:  # a broken __str__ must not turn one failed call into a crashed run
        return f"<{type(exc).__name__} whose message could not be read>"
    if len(text) > MAX_ERROR_TEXT:
        text = f"{text[:MAX_ERROR_TEXT]}… ({len(text) - MAX_ERROR_TEXT:,} more characters)"
    return _CREDENTIALS.text(text)

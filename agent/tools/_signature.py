"""Reading a Python callable for :func:`agent.tools.tool`: its name, docstring, parameters and types.

A tool may be made from a function, an async function, a bound method, a static or class method, a
callable instance (its ``__call__``), a :func:`functools.partial` (the arguments it binds are not
offered to the model) or a builtin whose signature Python can read. ``**kwargs: T`` takes any other
argument of type T; ``*args: T`` is offered as a list of T under its name. What cannot be declared —
a builtin without a signature, an annotation that does not resolve, a parameter no JSON value can
stand for, a constraint no JSON schema can say — is a :class:`UserError` naming the tool and the
parameter, when the tool is made.
"""

from __future__ import annotations

import functools
import inspect
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import UserError
from ._constraints import UnsaidConstraint
from ._context import ToolContext
from ._converters import converter_of
from ._docstrings import docstring_parts
from ._schema import NoSchema, annotation_text, nullable, schema_of, with_default


@dataclass
class Declared:
    """What :func:`declare` read: the parameters' JSON schema and how a call's arguments reach ``fn``."""

    name: str
    summary: str
    parameters: dict[str, Any]
    converters: dict[str, Callable[[Any], Any]] = field(default_factory=dict)
    context_param: str | None = None
    positional: tuple[str, ...] = ()  # parameters passed by position, in order (see call_arguments)
    defaults: dict[str, Any] = field(default_factory=dict)  # of the positional ones
    var_positional: str | None = None  # '*args': the model gives them as a list of that name


def declare(fn: Callable[..., Any], name: str | None, names: dict[str, Any] | None = None) -> Declared:
    """Read ``fn``; :class:`UserError` says which tool and parameter cannot be declared, and why.

    ``names``: the local names where the tool is made, for annotations naming a class defined in a
    function (as written under ``from __future__ import annotations``).
    """
    target = _target(fn)
    label = name or _name_of(fn)
    if name is None and not re.fullmatch(r"[A-Za-z0-9_\-]{1,64}", label):
        raise UserError(f"tool({label}): {label!r} is no tool name (1-64 ASCII letters, digits, '_' or '-'); "
                        f"pass tool(..., name='...')")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        raise UserError(
            f"tool {label}: Python cannot read the parameters of {fn!r} (a builtin without a signature); "
            f"wrap it in a function with typed parameters that calls it"
        ) from None
    summary, docs = docstring_parts(target, _own_doc(fn))
    bound = _bound_keywords(fn)
    params = [p for p in signature.parameters.values() if p.name not in bound]
    hints = _hints(target, label, params, names or {})
    properties: dict[str, Any] = {}
    required: list[str] = []
    declared = Declared(label, summary, {})
    extra: Any = False
    star = next((p.name for p in params if p.kind is p.VAR_POSITIONAL), None)
    for param in params:
        hint = hints.get(param.name, Any)
        if param.kind is param.VAR_KEYWORD:  # **kwargs: any other argument, of its annotated type
            extra = _schema(hint, label, param.name) or True
            continue
        if param.kind is param.VAR_POSITIONAL:  # '*args: int': an optional list 'args' of integers
            declared.var_positional = param.name
            hint = list[hint]  # type: ignore[valid-type]
        if _is_context(hint):
            declared.context_param = param.name
            continue
        schema = _schema(hint, label, param.name)
        if param.default is None and not _allows_null(schema):
            schema = nullable(schema)  # 'x: int = None': the model may say null too
        if param.name in docs and "description" not in schema:
            schema["description"] = docs[param.name]
        if param.default is param.empty and param.kind is not param.VAR_POSITIONAL:
            required.append(param.name)
        elif param.default is not None:
            with_default(schema, param.default)
        # before a '*args', every parameter goes by position (else only the positional-only ones)
        if param.kind is param.POSITIONAL_ONLY or (star is not None and param.kind is param.POSITIONAL_OR_KEYWORD):
            declared.positional += (param.name,)
            if param.default is not param.empty:
                declared.defaults[param.name] = param.default
        properties[param.name] = schema
        if (convert := converter_of(hint)) is not None:
            declared.converters[param.name] = convert
    declared.parameters = {"type": "object", "properties": properties, "additionalProperties": extra}
    if required:
        declared.parameters["required"] = required
    return declared


def call_arguments(declared: Declared, kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """The positional and keyword arguments for the function: the positional ones in their order (a
    left-out one as its default), then the items of a ``*args`` list."""
    star = declared.var_positional
    if not declared.positional and star not in kwargs:
        return [], kwargs
    kwargs = dict(kwargs)
    args: list[Any] = []
    for pname in declared.positional:
        if pname in kwargs:
            args.append(kwargs.pop(pname))
        elif pname in declared.defaults:
            args.append(declared.defaults[pname])
        else:
            break  # a required one left out: the function says so
    if star is not None and star in kwargs:
        args.extend(kwargs.pop(star) or ())
    return args, kwargs


def _target(fn: Callable[..., Any]) -> Any:
    """Where the annotations and the docstring of ``fn`` live: a partial's function, an instance's ``__call__``."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.isroutine(fn) or isinstance(fn, type):
        return fn
    return type(fn).__call__  # a callable instance


def _own_doc(fn: Callable[..., Any]) -> str | None:
    """A callable instance's docstring: its class's own, else its ``__call__``'s own ('' when neither
    has one: not object's 'Call self as a function.'). None for anything else: its docstring."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.isroutine(fn) or isinstance(fn, type):
        return None
    cls = type(fn)
    return cls.__dict__.get("__doc__") or getattr(cls.__dict__.get("__call__"), "__doc__", None) or ""


def _name_of(fn: Callable[..., Any]) -> str:
    while isinstance(fn, functools.partial):
        fn = fn.func
    found = getattr(fn, "__name__", None)
    return found if isinstance(found, str) else type(fn).__name__


def _bound_keywords(fn: Callable[..., Any]) -> set[str]:
    """The names a partial binds by keyword: the caller's, not the model's."""
    names: set[str] = set()
    while isinstance(fn, functools.partial):
        names |= set(fn.keywords)
        fn = fn.func
    return names


def _hints(target: Any, label: str, params: list[inspect.Parameter], names: dict[str, Any]) -> dict[str, Any]:
    """The resolved annotations; :class:`UserError` names a parameter whose annotation does not resolve."""
    # the target's own names, then also those where the tool is made (a class defined there)
    for localns in (None, names):
        try:
            return typing.get_type_hints(target, localns=localns, include_extras=True)
        except Exception:  # the next names; else the parameter that fails is found below
            continue
    raw = getattr(target, "__annotations__", None) or {}
    globalns = getattr(target, "__globals__", None) or {}
    hints: dict[str, Any] = {}
    for param in params:
        if param.name not in raw:
            continue
        holder = _holder()
        holder.__annotations__ = {param.name: raw[param.name]}
        try:
            hints.update(typing.get_type_hints(holder, globalns=globalns, localns=names, include_extras=True))
        except Exception as exc:  # any failure to resolve is the user's to fix
            raise UserError(
                f"tool {label}: the annotation of parameter {param.name!r} ({raw[param.name]!r}) cannot be resolved "
                f"({type(exc).__name__}: {exc}); define the type at module level or import it where the function is "
                f"defined"
            ) from None
    return hints  # only the return annotation failed: the tool's parameters do not need it


def _holder() -> Callable[[], None]:
    def holder() -> None: ...
    return holder


def _schema(hint: Any, label: str, pname: str) -> dict[str, Any]:
    try:
        return schema_of(hint)
    except UnsaidConstraint as exc:
        where = "" if exc.annotation is hint else f" (it holds {annotation_text(exc.annotation)})"
        raise UserError(
            f"tool {label}: parameter {pname!r} is annotated {annotation_text(hint)}{where}, whose "
            f"{exc.constraint!r:.80} cannot go into its JSON schema: {exc.why}"
        ) from None
    except NoSchema as exc:
        where = "" if exc.annotation is hint else f" (it holds {annotation_text(exc.annotation)})"
        raise UserError(
            f"tool {label}: parameter {pname!r} is annotated {annotation_text(hint)}{where}, which no JSON argument "
            f"can stand for; annotate it with str, int, float, bool, a list, a dict, a Literal, an Enum, a "
            f"dataclass, a TypedDict or a pydantic model (or bind it with functools.partial)"
        ) from None


def _is_context(hint: Any) -> bool:
    """``ToolContext``, also optional (``ToolContext | None = None``) or ``Annotated``."""
    if typing.get_origin(hint) is typing.Annotated:
        return _is_context(typing.get_args(hint)[0])
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return len(options) == 1 and _is_context(options[0])
    return hint is ToolContext


def _allows_null(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    if not schema.keys() - {"description", "title", "default"}:
        return True  # any value
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(_allows_null(option) for option in schema.get("anyOf", ()))

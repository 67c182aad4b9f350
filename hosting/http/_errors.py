"""JSON error bodies for every failure the HTTP host reports, and the request-size limit.

Every error is ``{"error": {"code": ..., "message": ..., ...}}`` with a 4xx status for bad input
and a 5xx only for the host's own failures — never a traceback.
"""

from __future__ import annotations

import functools
import logging
import re
import sys
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tracer import AmbiguousIdError, NotFoundError, RedactionPolicy, StoreError
from tracer.errors import json_kind

from ..errors import SessionStoreError, TurnRefusedError, UnreadableEnvelopeError, VersionConflictError

log = logging.getLogger("footprint.host")

_HTTP_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
               405: "method_not_allowed", 408: "request_timeout", 413: "too_large", 415: "unsupported_media_type",
               422: "invalid_request"}


def http_code(status: int) -> str:
    """The ``code`` of an error answered with ``status`` and nothing more specific: the API's own
    name for it (a 422 is ``invalid_request`` wherever it comes from), else the status's phrase
    (``bad_gateway``). Never the ``http_error`` that said nothing a client could act on."""
    if status in _HTTP_CODES:
        return _HTTP_CODES[status]
    try:
        return re.sub(r"[^a-z0-9]+", "_", HTTPStatus(status).phrase.lower()).strip("_")
    except ValueError:  # a status HTTP does not define
        return "client_error" if status < 500 else "server_error"


def invalid_request(message: str, *, field: str | None = None) -> RequestValidationError:
    """A route's own check of its input, raised as this and so answered exactly as a field pydantic
    refused: 422 ``invalid_request`` with ``field`` (a body field) and ``details``."""
    return RequestValidationError([{"type": "value_error", "loc": ("body", field) if field else ("body",),
                                    "msg": message, "input": None}])


_MASK = RedactionPolicy()  # an error text may quote a credential (a provider's, a DSN's): masked in every reply


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    """The JSON body of an error response (credentials masked in the message and in every extra
    field: a 422's ``details`` quote the values they refuse)."""
    return {"error": {"code": code, "message": _MASK.text(message),
                      **{k: _MASK.value(v) for k, v in extra.items() if v is not None}}}


def _shown(path: str) -> str:
    """A request path as an error quotes it: at most 200 characters."""
    return path if len(path) <= 200 else path[:200] + "…"


def _field(error: Any) -> str | None:
    """The field an error is about, named the same in a body, a path or a query (``session_id``);
    None when it is about the whole body."""
    return ".".join(str(p) for p in tuple(error.get("loc", ()))[1:]) or None


def _describe(errors: list[Any]) -> str:
    """``field: what is wrong`` for each error."""
    return "; ".join(f"{_field(e) or 'body'}: {_message(e)}" for e in errors[:5])


def _message(error: Any) -> str:
    message = str(error.get("msg", "invalid"))
    # a check of our own (ValueError) says the whole thing; pydantic's "Value error, " prefix adds nothing
    return message.removeprefix("Value error, ")


def error_response(exc: Exception, *, where: str = "") -> JSONResponse:
    """The JSON response for an error the host raised (shared by the app and the turn fast path);
    an internal error is logged here, once, with its traceback (``where``: the request)."""
    if isinstance(exc, TurnRefusedError):
        return JSONResponse(error_body(exc.code, str(exc), session_id=exc.session_id), status_code=exc.http_status)
    if isinstance(exc, VersionConflictError):
        return JSONResponse(error_body("version_conflict", str(exc), session_id=exc.session_id), status_code=409)
    if isinstance(exc, UnreadableEnvelopeError):
        return JSONResponse(error_body("unreadable_session", str(exc), session_id=exc.session_id), status_code=500)
    if isinstance(exc, AmbiguousIdError):  # the id exists more than once over: not a 404, give more of it
        return JSONResponse(error_body("ambiguous_id", str(exc), id=exc.ref, matches=exc.matches), status_code=409)
    if isinstance(exc, NotFoundError):
        return JSONResponse(error_body("not_found", str(exc)), status_code=404)
    if isinstance(exc, SessionStoreError | StoreError):
        log.error("store error: %s", exc)
        return JSONResponse(error_body("store_error", str(exc)), status_code=503)
    log.error("internal error%s: %s: %s", f" on {where}" if where else "", type(exc).__name__, exc, exc_info=exc)
    return JSONResponse(error_body("internal_error", f"the host failed: {type(exc).__name__}: {exc}"), status_code=500)


async def _footprint_error(_: Request, exc: Exception) -> JSONResponse:
    return error_response(exc)


def install_error_handlers(app: FastAPI) -> None:
    """Map footprint errors and framework errors to JSON responses."""

    @app.exception_handler(RequestValidationError)
    async def bad_input(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = list(exc.errors())
        whole_body = next((e for e in errors if tuple(e.get("loc", ())) == ("body",) and e.get("type") in _NOT_AN_OBJECT),
                          None)
        if whole_body is not None:
            return _bad_body(request, whole_body)
        invalid_json = any(e.get("type") == "json_invalid" for e in errors)
        code = "invalid_json" if invalid_json else "invalid_request"
        if invalid_json:
            where = next((e.get("loc", ())[-1] for e in errors if e.get("type") == "json_invalid"), "?")
            error = next((e.get("ctx", {}).get("error") for e in errors if e.get("type") == "json_invalid"), None)
            return JSONResponse(error_body(code, f"the request body is not valid JSON ({error or 'decode error'} "
                                                 f"at character {where})"), status_code=400)
        details = [{"loc": [str(p) for p in e.get("loc", ())], "message": _message(e)} for e in errors[:20]]
        return JSONResponse(error_body(code, _describe(errors), field=_field(errors[0]) if errors else None,
                                       details=details), status_code=422)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        cause = exc.__cause__
        if isinstance(cause, UnicodeDecodeError):  # FastAPI's "There was an error parsing the body"
            return JSONResponse(error_body("invalid_json", f"the request body is not valid JSON: it is not UTF-8 "
                                           f"(byte 0x{cause.object[cause.start]:02x} at position {cause.start})"),
                                status_code=400)
        if isinstance(cause, RecursionError):  # the parser gave up on arrays or objects nested this deep
            return JSONResponse(error_body("invalid_json", "the request body is not valid JSON here: it is nested too "
                                           "deeply to parse"), status_code=400)
        if isinstance(cause, ValueError) and "integer string conversion" in str(cause):
            # Python reads at most sys.get_int_max_str_digits() digits of an integer (CVE-2020-10735)
            return JSONResponse(error_body("invalid_json", f"the request body has an integer of more than "
                                           f"{sys.get_int_max_str_digits()} digits, more than the host reads"),
                                status_code=400)
        if isinstance(cause, ValueError) and not isinstance(cause, UnicodeDecodeError):
            return JSONResponse(error_body("invalid_json", f"the request body could not be read as JSON: "
                                           f"{type(cause).__name__}: {str(cause)[:200]}"), status_code=400)
        code = http_code(exc.status_code)
        headers = dict(exc.headers or {})
        message = str(exc.detail)
        path = _shown(request.url.path)
        if exc.status_code == 404 and message == "Not Found":  # Starlette's, for a path no route has
            message = f"no route {request.method} {path}: the routes are listed in /openapi.json"
        elif exc.status_code == 405 and message == "Method Not Allowed":
            allowed = _methods_of(request)
            if allowed:  # Starlette's Allow names only the first route of the path that matched
                headers = {k: v for k, v in headers.items() if k.lower() != "allow"}
                headers["allow"] = ", ".join(allowed)
                message = f"{path} does not take {request.method}; it takes {', '.join(allowed)}"
            else:
                message = f"{path} does not take {request.method}: /openapi.json lists the methods of each route"
        return JSONResponse(error_body(code, message), status_code=exc.status_code, headers=headers)

    for kind in (TurnRefusedError, VersionConflictError, UnreadableEnvelopeError, SessionStoreError, NotFoundError,
                 StoreError):
        app.add_exception_handler(kind, _footprint_error)

    app.add_middleware(InternalErrorMiddleware)


def _methods_of(request: Request) -> list[str]:
    """Every method the app's OpenAPI schema lists for the request's path, sorted (Starlette's
    Allow header names only those of the first route that matched the path)."""
    try:
        paths = request.app.openapi().get("paths", {})
    except Exception:  # no schema to read: the message points to /openapi.json instead
        return []
    path = request.scope.get("path", "")
    matching = [(template.count("{"), operations) for template, operations in paths.items()
                if _route_pattern(template).fullmatch(path)]
    if not matching:
        return []
    fewest = min(count for count, _ in matching)  # /api/agents/resync is not /api/agents/{agent_id}
    return sorted({method.upper() for count, operations in matching if count == fewest
                   for method in operations if method in _HTTP_METHODS})


_HTTP_METHODS = frozenset({"get", "put", "post", "delete", "options", "head", "patch", "trace"})


@functools.lru_cache(maxsize=256)
def _route_pattern(template: str) -> re.Pattern[str]:
    """``/v1/sessions/{session_id}`` as a pattern of the paths it serves (``{p:path}`` takes slashes)."""
    parts = re.split(r"(\{[^}]+\})", template)
    return re.compile("".join(
        ("(.+)" if part.endswith(":path}") else "([^/]+)") if part.startswith("{") else re.escape(part)
        for part in parts))


#: pydantic's error types for a body that is missing or is not a JSON object (not a field's error)
_NOT_AN_OBJECT = frozenset({"missing", "model_attributes_type", "model_type", "dict_type"})


def _bad_body(request: Request, error: Any) -> JSONResponse:
    """A body that is not a JSON object at all: not sent as JSON (415), missing, or another JSON value."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json" and not content_type.endswith("+json"):
        got = f"got {content_type!r}" if content_type else "it had none"
        return JSONResponse(error_body("unsupported_media_type", f"send the body as a JSON object with "
                                       f"Content-Type: application/json ({got})"), status_code=415)
    if error.get("type") == "missing":
        return JSONResponse(error_body("invalid_request", "the request needs a JSON object body"), status_code=422)
    value = error.get("input")
    return JSONResponse(error_body("invalid_request", f"the body must be a JSON object, not {json_kind(value)}"),
                        status_code=422)


class InternalErrorMiddleware:
    """Answers an unexpected error with the JSON 500 and logs it once.

    Not an ``exception_handler(Exception)``: Starlette runs that one in its outermost middleware,
    which raises the error again after the reply, so the server logged it a second time. An error
    after the reply started cannot be answered: it goes on to the server, which logs it (once).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception as exc:
            if started:
                raise
            await error_response(exc, where=f"{scope['method']} {scope['path']}")(scope, receive, send)


_UTF8 = frozenset({"utf-8", "utf8"})


def foreign_charset(content_type: str) -> str | None:
    """The ``charset`` a JSON ``Content-Type`` names when it is not UTF-8 (None: UTF-8, none given,
    or not JSON). The host reads every JSON body as UTF-8 (RFC 8259 allows nothing else), so a
    body declared Latin-1 would be read as something it is not."""
    media, _, params = content_type.partition(";")
    media = media.strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        return None
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            charset = value.strip().strip('"').strip()
            return None if charset.lower() in _UTF8 else charset
    return None


class CharsetMiddleware:
    """Refuses a JSON body declared in a charset other than UTF-8 with 415, naming the charset."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for name, value in scope.get("headers", ()):
                if name == b"content-type":
                    charset = foreign_charset(value.decode("latin-1"))
                    if charset is not None:
                        shown = charset if len(charset) <= 40 else charset[:40] + "…"
                        response = JSONResponse(error_body(
                            "unsupported_media_type", f"the body is read as UTF-8 JSON, and this one is declared "
                            f"charset={shown}: send it as UTF-8 (charset=utf-8, or no charset)"), status_code=415)
                        await response(scope, receive, send)
                        return
        await self.app(scope, receive, send)


class BodyLimitMiddleware:
    """Refuses request bodies over ``max_bytes`` with 413, by header and while streaming."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_bytes
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    length = -1
                if length > limit or length < 0:
                    response = JSONResponse(
                        error_body("too_large", f"the request body is {length} bytes; the limit is {limit}")
                        if length >= 0 else error_body("bad_request", "invalid Content-Length header"),
                        status_code=413 if length >= 0 else 400,
                    )
                    await response(scope, receive, send)
                    return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise HTTPException(413, f"the request body exceeds the limit of {limit} bytes")
            return message

        await self.app(scope, limited, send)

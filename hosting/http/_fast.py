"""The fast path for ``POST /v1/turns``, the host's one hot route.

FastAPI's per-request machinery (routing, dependency solving, body handling) costs more than a
whole recorded turn of a small agent, so a well-formed turn is served here: the body is read
(within the size limit), validated with the same pydantic model, handed to the host, and the
reply written as JSON. Anything that is not a clean success is handed to the FastAPI app with the
body replayed — a missing token, bad JSON, an oversized body, a wrong content type — so every
error response is the app's own; errors the host raises map through the same
:func:`error_response`. The route stays declared in the app, which is what the OpenAPI spec shows.
The app (:class:`hosting.http._app.HostApp`) calls it ahead of all of FastAPI's middleware.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

from pydantic import ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._standing import StandingAgent
from ._errors import error_response, foreign_charset
from ._models import TurnRequest


class TurnFastPath:
    """Serves well-formed ``POST /v1/turns`` requests directly; anything else goes to ``app``."""

    def __init__(self, app: ASGIApp, host: StandingAgent, *, token: str | None, max_body_bytes: int) -> None:
        self.app = app
        self.host = host
        self.expected_auth = f"Bearer {token}".encode() if token is not None else None
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/v1/turns" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        declared = headers.get(b"content-type", b"")
        content_type = declared.split(b";")[0].strip().lower()
        if b";" in declared and foreign_charset(declared.decode("latin-1")) is not None:
            content_type = b""  # not UTF-8: the app's 415 says so
        authorized = self.expected_auth is None or hmac.compare_digest(
            headers.get(b"authorization", b""), self.expected_auth
        )
        if not authorized or content_type != b"application/json" or not self._length_fits(headers):
            await self.app(scope, receive, send)  # (a body declared too big: the app's 413, before it is read)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            chunks.append(chunk)
            size += len(chunk)
            more = message.get("more_body", False)
            if size > self.max_body_bytes:
                break  # the app's body limit answers 413
        body = b"".join(chunks)
        try:
            if more:
                raise ValueError("over the size limit")
            request = TurnRequest.model_validate_json(body)
        except (ValidationError, ValueError):
            await self.app(scope, _replay(body, more, receive), send)
            return
        try:
            reply = await self.host.handle(request.message, session_id=request.session_id,
                                           decision=request.decision, turn_id=request.turn_id)
        except Exception as exc:
            await error_response(exc, where="POST /v1/turns")(scope, receive, send)
            return
        payload = json.dumps(reply.to_dict(), ensure_ascii=False, separators=(",", ":")).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})

    def _length_fits(self, headers: dict[bytes, bytes]) -> bool:
        """False when the declared Content-Length is over the limit (or not a length)."""
        declared = headers.get(b"content-length")
        if declared is None:
            return True
        try:
            return 0 <= int(declared) <= self.max_body_bytes
        except ValueError:
            return False


def _replay(body: bytes, more: bool, receive: Receive) -> Receive:
    """A receive that gives the app the body already read, then whatever is left of the stream."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            message: dict[str, Any] = {"type": "http.request", "body": body, "more_body": more}
            return message
        return await receive()

    return replayed

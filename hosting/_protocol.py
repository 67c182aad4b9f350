"""The HTTP protocol the host serves with: uvicorn's, answering a request it cannot parse in the
host's own JSON error format, and giving a client a bounded time to send a request.

A request that is not valid HTTP (a ``Content-Length`` that is not a number, a broken request
line or header) never reaches the app: uvicorn's parser refuses it and answers a plain-text
``Invalid HTTP request received.``. Every other bad input gets ``{"error": {"code", "message"}}``,
so a client would need a second way to read errors for this one. The classes below are uvicorn's
own protocols (httptools when it is installed, as uvicorn's ``auto`` picks, else h11) with that
answer changed: a 400 ``bad_request`` JSON body, and the connection closed as before.

uvicorn waits for ever for a request's headers and body: a connection that sends half a request
line and stops (or trickles a byte now and then) holds a socket and a file descriptor as long as
the client likes, and a few thousand of them leave the host no descriptors for its own files.
So a request must arrive whole — headers and body — within ``request_timeout`` seconds of its
first byte (or of the connection being made); past it the host answers 408 ``request_timeout`` in
JSON and closes the connection. The time a turn then runs is not counted: only the sending.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

#: Seconds a client has to send a whole request (``footprint serve --request-timeout``).
DEFAULT_REQUEST_TIMEOUT = 60.0

_MESSAGE = ("the request is not valid HTTP ({detail}): a request line or header could not be parsed, "
            "such as a Content-Length that is not a number")


def _body(detail: str) -> bytes:
    text = _MESSAGE.format(detail=detail.rstrip(".") or "refused by the HTTP parser")
    return json.dumps({"error": {"code": "bad_request", "message": text}}, separators=(",", ":")).encode()


def _timeout_response(timeout: float) -> bytes:
    body = json.dumps({"error": {"code": "request_timeout", "message": (
        f"the request did not arrive whole within {timeout:g} seconds of its first byte (its headers and "
        f"body): send a request at once, not piece by piece")}}, separators=(",", ":")).encode()
    return (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body)


class _RequestDeadline:
    """The timer of the request a connection is receiving: started at its first byte (or when the
    connection is made), stopped once the request has arrived whole."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self.handle: asyncio.TimerHandle | None = None

    def start(self, loop: asyncio.AbstractEventLoop, expired: Any) -> None:
        if self.timeout is not None and self.handle is None:
            self.handle = loop.call_later(self.timeout, expired)

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None


def json_error_protocol(request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT) -> type[Any]:
    """uvicorn's HTTP protocol class (as ``http="auto"`` picks it) answering unparsable requests in
    JSON, and a request not sent whole within ``request_timeout`` seconds with a 408 (None: no limit)."""
    try:
        import httptools  # noqa: F401  (what uvicorn's "auto" uses when it is there)
    except ImportError:
        return _h11_protocol(request_timeout)
    return _httptools_protocol(request_timeout)


def _expire(protocol: Any, deadline: _RequestDeadline, cycle: Any, bytes_seen: bool) -> None:
    """The request of ``protocol`` ran out of time: a 408 unless nothing of it came (a connection
    that sent nothing is closed, as an idle keep-alive one is) or the app already answered; the app,
    if it was reading the body, sees the client go away."""
    deadline.handle = None
    transport = protocol.transport
    if transport is None or transport.is_closing():
        return
    if cycle is not None:
        if not cycle.response_started:
            transport.write(_timeout_response(deadline.timeout or 0.0))
        cycle.disconnected = True  # whatever the app sends now is dropped
        cycle.message_event.set()  # and its receive() answers http.disconnect
    elif bytes_seen:
        transport.write(_timeout_response(deadline.timeout or 0.0))
    transport.close()


def _h11_protocol(request_timeout: float | None) -> type[Any]:
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class JsonErrorH11Protocol(H11Protocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._deadline = _RequestDeadline(request_timeout)
            self._bytes_seen = False

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._deadline.start(self.loop, self._expired)

        def data_received(self, data: bytes) -> None:
            self._bytes_seen = self._bytes_seen or bool(data)
            super().data_received(data)
            self._watch()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._watch()

        def connection_lost(self, exc: Exception | None) -> None:
            self._deadline.stop()
            super().connection_lost(exc)

        def _watch(self) -> None:
            """Time the request being received; none while the app has it whole (a turn may run long)."""
            state = self.conn.their_state
            if state is h11.SEND_BODY or (state is h11.IDLE and self._request_begun()):
                self._deadline.start(self.loop, self._expired)
            else:
                self._deadline.stop()
                if state is not h11.IDLE:
                    self._bytes_seen = False

        def _request_begun(self) -> bool:
            # between requests of a keep-alive connection uvicorn's own keep-alive timeout closes an
            # idle one; a request has begun once a byte of it is buffered
            data, _closed = self.conn.trailing_data
            return bool(data)

        def _expired(self) -> None:
            cycle = self.cycle if self.conn.their_state is h11.SEND_BODY else None
            _expire(self, self._deadline, cycle, self._bytes_seen or self._request_begun())

        def send_400_response(self, msg: str) -> None:
            body = _body(msg)
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                       (b"connection", b"close")]
            for event in (h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
                          h11.Data(data=body), h11.EndOfMessage()):
                output = self.conn.send(event)
                if output:
                    self.transport.write(output)
            self.transport.close()

    return JsonErrorH11Protocol


def _httptools_protocol(request_timeout: float | None) -> type[Any]:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class JsonErrorHttpToolsProtocol(HttpToolsProtocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._deadline = _RequestDeadline(request_timeout)
            self._receiving_body = False
            self._bytes_seen = False

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._deadline.start(self.loop, self._expired)

        def data_received(self, data: bytes) -> None:
            self._bytes_seen = self._bytes_seen or bool(data)
            self._deadline.start(self.loop, self._expired)  # (a no-op while it runs)
            super().data_received(data)

        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            self._receiving_body = True

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._receiving_body = self._bytes_seen = False
            self._deadline.stop()

        def connection_lost(self, exc: Exception | None) -> None:
            self._deadline.stop()
            super().connection_lost(exc)

        def _expired(self) -> None:
            _expire(self, self._deadline, self.cycle if self._receiving_body else None, self._bytes_seen)

        def send_400_response(self, msg: str) -> None:
            body = _body(msg)
            head = [b"HTTP/1.1 400 Bad Request\r\n"]
            for name, value in self.server_state.default_headers:
                head += [name, b": ", value, b"\r\n"]
            head += [b"content-type: application/json\r\n", b"content-length: ", str(len(body)).encode(), b"\r\n",
                     b"connection: close\r\n\r\n"]
            self.transport.write(b"".join(head) + body)
            self.transport.close()

    return JsonErrorHttpToolsProtocol

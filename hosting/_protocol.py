"""The HTTP protocol the host serves with: uvicorn's, answering a request it cannot parse in the
host's own JSON error format.

A request that is not valid HTTP (a ``Content-Length`` that is not a number, a broken request
line or header) never reaches the app: uvicorn's parser refuses it and answers a plain-text
``Invalid HTTP request received.``. Every other bad input gets ``{"error": {"code", "message"}}``,
so a client would need a second way to read errors for this one. The classes below are uvicorn's
own protocols (httptools when it is installed, as uvicorn's ``auto`` picks, else h11) with only
that answer changed: a 400 ``bad_request`` JSON body, and the connection closed as before.
"""

from __future__ import annotations

import json
from typing import Any

_MESSAGE = ("the request is not valid HTTP ({detail}): a request line or header could not be parsed, "
            "such as a Content-Length that is not a number")


def _body(detail: str) -> bytes:
    text = _MESSAGE.format(detail=detail.rstrip(".") or "refused by the HTTP parser")
    return json.dumps({"error": {"code": "bad_request", "message": text}}, separators=(",", ":")).encode()


def json_error_protocol() -> type[Any]:
    """uvicorn's HTTP protocol class (as ``http="auto"`` picks it) answering unparsable requests in JSON."""
    try:
        import httptools  # noqa: F401  (what uvicorn's "auto" uses when it is there)
    except ImportError:
        return _h11_protocol()
    return _httptools_protocol()


def _h11_protocol() -> type[Any]:
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class JsonErrorH11Protocol(H11Protocol):
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


def _httptools_protocol() -> type[Any]:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class JsonErrorHttpToolsProtocol(HttpToolsProtocol):
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

"""Running the HTTP host with uvicorn, with a shutdown that loses no turn.

On SIGTERM (or SIGINT) the host stops taking turns at once (new ones get 503), gives running
turns ``shutdown_grace`` seconds to finish, then stops the rest and stores them as interrupted —
the session's next request finishes them — and finally flushes the session store and the
recordings. Only then does the process exit.

Once the server has started, everything alive (modules, classes, the app, the host) is moved out
of the cyclic garbage collector's reach (:func:`freeze_startup_heap`): those objects live as long
as the process, and a full collection that walks them all stalls every request in flight for tens
of milliseconds.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
import sys
import time
from types import FrameType
from typing import Any

import uvicorn

from ._durable import DurableHost
from ._protocol import DEFAULT_REQUEST_TIMEOUT, json_error_protocol
from ._standing import StandingAgent
from .errors import HostFailedError
from .http import create_app

log = logging.getLogger("footprint.host")


def freeze_startup_heap() -> None:
    """Collect garbage once, then exempt every object alive now from later collections (:func:`gc.freeze`).

    A full (generation 2) collection walks every container object in the process; in a host that
    is above all the modules, classes and models imported at startup — 100,000+ objects, tens of
    milliseconds, during which no request is served. Called once the server has started, so only
    what serving creates is walked afterwards. (An object frozen here is never collected even if
    it later becomes unreachable in a cycle: fine for what lives as long as the process.)
    """
    gc.collect()
    gc.freeze()


#: How often, at most, the host says it is out of file descriptors (seconds).
OUT_OF_DESCRIPTORS_EVERY = 10.0


def raise_open_files_limit() -> None:
    """Raise this process's soft limit on open files to its hard limit (as Go and nginx do).

    Every connection costs a descriptor; a soft limit of 1,024 (the usual default) left a host
    refusing connections past about a thousand at once, while the hard limit allowed far more.
    """
    if sys.platform == "win32":
        return
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):  # not allowed here: the limit stays as it was
            pass


class _OutOfDescriptors:
    """The event loop's exception handler: asyncio's "socket.accept() out of system resource"
    (EMFILE) said once per :data:`OUT_OF_DESCRIPTORS_EVERY` seconds in a line, not as a traceback.

    Out of descriptors, asyncio (3.11, 3.12) logs the error with its traceback once for each of the
    listen backlog's 2,048 accept attempts per tick: a host at its limit wrote 55,000 tracebacks
    (22 MB) to stderr in five seconds. New connections wait in the backlog meanwhile and are
    accepted once descriptors are free; every other loop error goes to the default handler.
    """

    def __init__(self) -> None:
        self.said_at = float("-inf")
        self.since = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if context.get("message") != "socket.accept() out of system resource" or not isinstance(exc, OSError):
            loop.default_exception_handler(context)
            return
        self.since += 1
        now = time.monotonic()
        if now - self.said_at >= OUT_OF_DESCRIPTORS_EVERY:
            log.warning("cannot accept connections: %s (%d times since last said); new connections wait until "
                        "open ones close: raise the open-files limit (ulimit -n) or lower --request-timeout",
                        exc.strerror or exc, self.since)
            self.said_at, self.since = now, 0


class _Server(uvicorn.Server):
    """A uvicorn server that freezes its startup heap, and starts the host's drain the moment a
    stop signal arrives."""

    def __init__(self, config: uvicorn.Config, host: StandingAgent, grace: float) -> None:
        super().__init__(config)
        self._host = host
        self._grace = grace
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self._host.on_failed.append(self._host_failed)
        await super().startup(sockets=sockets)
        if self.started:
            freeze_startup_heap()

    def _host_failed(self) -> None:
        """A store failed for good: stop serving (``serve`` then says so, and the process exits non-zero)."""
        self.should_exit = True

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._loop is not None and not self._host.draining:
            # signal handlers run between bytecodes: hand the drain to the loop
            self._loop.call_soon_threadsafe(self._host.begin_shutdown, self._grace)
        super().handle_exit(sig, frame)
        # uvicorn re-raises a captured signal after serving, which would kill the process before
        # the caller closes its stores; the shutdown is graceful, so the process exits normally
        self._captured_signals.clear()


def serve(
    host: StandingAgent,
    *,
    bind: str = "127.0.0.1",
    port: int = 8080,
    token: str | None = None,
    shutdown_grace: float = 10.0,
    max_body_bytes: int = 1_048_576,
    log_level: str = "info",
    sock: socket.socket | None = None,
    on_started: Any = None,
    gateway: Any = None,
    durable: DurableHost | None = None,
    request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT,
) -> None:
    """Serve ``host`` (a ``gateway`` of stored agents, ``durable`` sessions) over HTTP until SIGTERM/SIGINT;
    returns once everything is flushed.

    A client has ``request_timeout`` seconds to send a whole request (headers and body; None: for
    ever); past it the host answers 408 ``request_timeout`` and closes the connection.

    Raises :class:`HostFailedError` when the host stopped because a store failed and could not be
    reopened (``footprint serve`` then exits non-zero, so a supervisor restarts it).
    """
    app = create_app(host, token=token, shutdown_grace=shutdown_grace, max_body_bytes=max_body_bytes,
                     gateway=gateway, durable=durable)
    config = uvicorn.Config(
        app, host=bind, port=port, log_level=log_level, lifespan="on",
        # uvicorn waits this long for open requests; the host's own grace stops turns before it
        timeout_graceful_shutdown=int(shutdown_grace) + 15, access_log=False,
        # a request uvicorn cannot parse is answered in the host's JSON too, and one that does not
        # arrive in time with a 408 (uvicorn would wait for ever: a slow client's socket held)
        http=json_error_protocol(request_timeout),
    )
    server = _Server(config, host, shutdown_grace)

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(_OutOfDescriptors())
        task = asyncio.ensure_future(server.serve([sock] if sock is not None else None))
        if on_started is not None:
            while not server.started and not task.done():
                await asyncio.sleep(0.01)
            if server.started:
                on_started(server)
        await task

    raise_open_files_limit()
    asyncio.run(main())
    if host.failed is not None:
        raise HostFailedError(f"the host stopped: {host.failed}; start it again (a supervisor restarts it)")

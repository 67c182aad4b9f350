"""The HTTP host: an ASGI app (FastAPI, with its OpenAPI spec at /openapi.json and /docs).

    POST   /v1/turns                          send a turn: {message, session_id?, decision?, turn_id?}
    POST   /v1/turns/stream                   the same, its events as Server-Sent Events
    POST   /v1/sessions/{session_id}/decision resume a paused session: {decision}
    GET    /v1/sessions                       sessions: {session_id, active, running, last_activity, status}
    GET    /v1/sessions/{session_id}          one session's stored state
    DELETE /v1/sessions/{session_id}          forget a session
    GET    /v1/sessions/{session_id}/runs     a session's recorded runs (404 for a session never seen)
    GET    /v1/recordings/...                 the read API for recordings (see _recordings.py)
    GET    /v1/health                         liveness (never needs the token)
    ...    /v1/durable/...                    durable sessions: steer, send, abort, compact, events (_durable.py)
    /api/agents, /api/memory                  the agents gateway, when given one (see _agents.py)

With a token configured, every other route wants ``Authorization: Bearer <token>``, except the
spec itself (/openapi.json, /docs, /redoc), which describes the API and carries no data.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.types import Receive, Scope, Send

from tracer import Run, Store, run_to_dict

from .._durable import DurableHost
from .._reply import TurnReply
from .._standing import StandingAgent
from ..errors import HostingError
from ..gateway import Gateway
from ._agents import mount_agents_api
from ._durable import durable_router
from ._errors import BodyLimitMiddleware, CharsetMiddleware, error_body, install_error_handlers
from ._fast import TurnFastPath
from ._models import (
    ERROR_RESPONSES,
    DecisionRequest,
    HealthReply,
    SessionsReply,
    TurnReplyModel,
    TurnRequest,
    refuse_in_ids,
)
from ._params import SessionId
from ._recordings import recordings_router

DEFAULT_MAX_BODY = 1_048_576
_bearer = HTTPBearer(auto_error=False, description="The token given to `footprint serve --token`.")


class HostApp(FastAPI):
    """The host's FastAPI app; a well-formed ``POST /v1/turns`` is served ahead of FastAPI's own layers.

    FastAPI wraps every request in its error, telemetry and body-limit middleware and asks whether
    OpenTelemetry is configured (a few environment lookups) each time; for the host's one hot
    route that costs more than the route. The fast path (:class:`TurnFastPath`) hands anything
    that is not a clean turn to the full app, and while FastAPI's telemetry is on (checked once a
    second) every request takes the full path, so turns are still traced.
    """

    turn_fast_path: TurnFastPath | None = None
    _fp_traced_checked_until = 0.0
    _fp_traced = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        fast = self.turn_fast_path
        if (fast is not None and scope["type"] == "http" and scope["path"] == "/v1/turns"
                and scope["method"] == "POST" and not self._fp_is_traced()):
            if self.root_path:
                scope["root_path"] = self.root_path
            await fast(scope, receive, send)
            return
        await super().__call__(scope, receive, send)

    async def through_fastapi(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The request through FastAPI's middleware and routing (the fast path's fallback)."""
        await super().__call__(scope, receive, send)

    def _fp_is_traced(self) -> bool:
        now = time.monotonic()
        if now >= self._fp_traced_checked_until:
            telemetry = getattr(self, "_native_telemetry", None)  # FastAPI's own; absent in other versions
            try:
                self._fp_traced = telemetry is not None and bool(telemetry.enabled())
            except Exception:
                self._fp_traced = True  # unsure: take the full path
            self._fp_traced_checked_until = now + 1.0
        return self._fp_traced


def create_app(
    host: StandingAgent | None = None,
    *,
    recordings: Store | None = None,
    token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY,
    shutdown_grace: float = 10.0,
    close_host: bool = True,
    durable: DurableHost | None = None,
    gateway: Gateway | None = None,
) -> FastAPI:
    """The ASGI app serving ``host`` (turns and sessions), ``recordings`` (the read API) and
    ``gateway`` (stored agents under ``/api/agents``).

    ``recordings`` defaults to the host's recordings store (or the gateway's). The app's lifespan
    closes the host on shutdown (``close_host``): running turns get ``shutdown_grace`` seconds,
    then are stored as interrupted; the stores are flushed. A gateway is started (default agents
    seeded) with the app and closed with it.
    """
    if host is None and recordings is None and durable is None and gateway is None:
        raise ValueError("create_app needs a standing agent host, a recordings store, durable sessions, "
                         "a gateway, or some of them")
    if recordings is None and host is None and gateway is not None and gateway.recorder is not None:
        recordings = gateway.recorder.store if gateway.recorder.enabled else None

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if host is not None:
            await host.start()  # finish what a dead process left before the first turn (and
            # before durable sessions start new runs)
        if durable is not None:
            await durable.resume_unfinished()  # sessions a restart cut off go on
        if gateway is not None:
            await gateway.start()
        yield
        if durable is not None:
            await durable.close(shutdown_grace)
        if gateway is not None and close_host:
            await gateway.close()
        if host is not None and close_host:
            await host.close(shutdown_grace)

    app = HostApp(
        title="footprint standing-agent host",
        version="1",
        summary="Turns, sessions and the recordings of a footprint agent host.",
        lifespan=lifespan,
        responses=ERROR_RESPONSES,
    )
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes)
    app.add_middleware(CharsetMiddleware)  # (added last: it runs first, before the body is read)
    if host is not None:  # it reads the raw body and hands anything odd to the full app
        app.turn_fast_path = TurnFastPath(app.through_fastapi, host=host, token=token, max_body_bytes=max_body_bytes)
    install_error_handlers(app)

    def get_recordings() -> Store:
        store = recordings if recordings is not None else (host.recordings if host is not None else None)
        if store is None:
            raise HTTPException(404, "this host records no runs (its agent has no recorder)")
        return store

    @app.get("/v1/health", response_model=HealthReply, tags=["host"], summary="Liveness and load")
    async def health() -> Any:
        if host is None:
            return {"status": "ok", "shape": "none", "durability": "-", "sessions_store": "-",
                    "active_sessions": 0, "running_turns": 0, "draining": False}
        figures = host.health()
        # a failed host says so with a 503 (a load balancer takes it out; it exits to be restarted)
        return JSONResponse(figures, status_code=503) if figures["status"] == "failed" else figures

    guard = bearer_guard(token)
    if token is not None:
        refuse_in_ids(token)
    app.include_router(recordings_router(get_recordings), dependencies=guard)
    if host is not None:
        app.include_router(_host_router(host, get_recordings), dependencies=guard)
    if durable is not None:
        app.include_router(durable_router(durable), dependencies=guard)
    if gateway is not None:
        mount_agents_api(app, gateway, guard)
    return app


def bearer_guard(token: str | None) -> list[Any]:
    """The route dependencies that require ``Authorization: Bearer <token>`` (none without a token)."""
    if token is None:
        return []  # no token: no per-request auth work
    expected = token.encode()

    async def authorized(credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> None:
        if credentials is None or credentials.scheme.lower() != "bearer":
            raise HTTPException(401, "this host wants `Authorization: Bearer <token>`",
                                headers={"WWW-Authenticate": "Bearer"})
        if not hmac.compare_digest(credentials.credentials.encode(), expected):
            raise HTTPException(401, "the bearer token is not this host's", headers={"WWW-Authenticate": "Bearer"})

    return [Depends(authorized)]


def _host_router(host: StandingAgent, get_recordings: Any) -> APIRouter:
    router = APIRouter(prefix="/v1", tags=["turns"])

    @router.post("/turns", response_model=TurnReplyModel, summary="Send a turn (or a decision) and wait for the reply")
    async def send_turn(body: TurnRequest) -> JSONResponse:
        reply = await host.handle(body.message, session_id=body.session_id, decision=body.decision,
                                  turn_id=body.turn_id)
        return JSONResponse(reply.to_dict())  # already the documented shape: no second validation

    @router.post(
        "/sessions/{session_id}/decision", response_model=TurnReplyModel,
        summary="Resume a session paused on a question with a person's decision",
    )
    async def decide(session_id: SessionId, body: DecisionRequest) -> JSONResponse:
        reply = await host.handle(session_id=session_id, decision=body.decision, turn_id=body.turn_id)
        return JSONResponse(reply.to_dict())

    @router.post(
        "/turns/stream", summary="Send a turn and stream its events as Server-Sent Events",
        response_class=StreamingResponse,
        responses={200: {"content": {"text/event-stream": {}},
                         "description": "events: turn, recovering, text, inference, tool_started, "
                                        "tool_finished, then reply (or error)"}},
    )
    async def stream_turn(body: TurnRequest) -> StreamingResponse:
        queue: asyncio.Queue[tuple[str, dict[str, Any]] | None] = asyncio.Queue()
        task = asyncio.ensure_future(host.handle(
            body.message, session_id=body.session_id, decision=body.decision, turn_id=body.turn_id,
            emit=lambda event, data: queue.put_nowait((event, data)),
        ))
        task.add_done_callback(lambda _: queue.put_nowait(None))
        first = await queue.get()
        if first is None:
            task.result()  # refused or unreadable before any event: a plain JSON error response

        async def events() -> AsyncIterator[bytes]:
            item = first
            while item is not None:
                yield _sse(*item)
                item = await queue.get()
            try:
                reply: TurnReply = task.result()
                yield _sse("reply", reply.to_dict())
            except HostingError as exc:
                yield _sse("error", error_body(getattr(exc, "code", "host_error"), str(exc))["error"])
            except Exception as exc:
                yield _sse("error", error_body("internal_error", f"{type(exc).__name__}: {exc}")["error"])

        if first is None:
            return StreamingResponse(_one(_sse("reply", task.result().to_dict())), media_type="text/event-stream")
        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    @router.get("/sessions", response_model=SessionsReply, summary="Sessions, latest activity first")
    async def sessions(limit: Annotated[int, Query(ge=1, le=10_000)] = 1000) -> dict[str, Any]:
        return {"sessions": await host.sessions_overview(limit=limit)}

    @router.get("/sessions/{session_id}", summary="One session's stored state")
    async def session(session_id: SessionId) -> dict[str, Any]:
        info = await host.session_info(session_id)
        if info is None:
            raise HTTPException(404, f"no session {session_id!r} is stored")
        return info

    @router.delete("/sessions/{session_id}", summary="Forget a session")
    async def delete_session(session_id: SessionId) -> JSONResponse:
        if not await host.delete_session(session_id):
            raise HTTPException(404, f"no session {session_id!r} is stored")
        return JSONResponse({"deleted": session_id})

    @router.get("/sessions/{session_id}/runs", summary="A session's recorded runs, oldest first")
    async def session_runs(session_id: SessionId) -> dict[str, Any]:
        store = get_recordings()
        runs = await asyncio.to_thread(_session_runs, store, session_id)
        # a session never seen is 404, as on the other session routes; one forgotten since (DELETE)
        # or stored with no recorded run yet still answers, as its runs are recorded
        if not runs and await host.session_info(session_id) is None:
            raise HTTPException(404, f"no session {session_id!r} is stored and no run of it is recorded")
        return {"runs": [run_to_dict(r) for r in runs]}

    return router


def _session_runs(store: Store, session_id: str) -> list[Run]:
    if not store.read_only:
        store.flush()  # rows recorded under `exit` durability may still sit in the writer's queue
    return store.session_runs(session_id)


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n".encode()


async def _one(chunk: bytes) -> AsyncIterator[bytes]:
    yield chunk

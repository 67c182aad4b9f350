"""The bus host: ChannelAgents on one bus, served over HTTP.

    POST /v1/bus/messages   a message arrived on a source -> who claimed or shared it
    POST /v1/bus/tasks      work assigned through a source -> the same
    GET  /v1/bus/outbound   what the agents send, as Server-Sent Events (send_text, send_trace)
    GET  /v1/bus/status     the agents in priority order, and the newest failures

The agents start in the order given, which is their priority (the first that claims an event
takes it). An optional heartbeat source ticks every ``heartbeat_seconds``. Outbound events go to
the given transports and to every connected ``/v1/bus/outbound`` stream; a stream that falls
behind by ``outbound_buffer`` events loses the oldest, never blocks the agents.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI, HTTPException, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from agent.bus import (
    Bus,
    ChannelAgent,
    DeliveryReport,
    InboundEvent,
    MessageEvent,
    OutboundEvent,
    TaskEvent,
    Transport,
    heartbeats,
)

from .http._errors import BodyLimitMiddleware, install_error_handlers
from .http._models import ERROR_RESPONSES


class BusHost:
    """Runs ``agents`` (in priority order) on a bus fed over HTTP and by an optional heartbeat."""

    def __init__(
        self,
        agents: Sequence[ChannelAgent],
        *,
        heartbeat_seconds: float | None = None,
        transports: Sequence[Transport] = (),
        outbound_buffer: int = 1000,
    ) -> None:
        names = [a.name for a in agents]
        if len(set(names)) != len(names):
            raise ValueError(f"bus agents need distinct names, got {names}")
        self.agents = list(agents)
        self.heartbeat_seconds = heartbeat_seconds
        self.transports = list(transports)
        self.outbound_buffer = outbound_buffer
        self.bus: Bus | None = None
        self._streams: set[asyncio.Queue[OutboundEvent]] = set()

    async def start(self) -> Bus:
        """Start the agents on a new bus (once)."""
        if self.bus is not None:
            return self.bus
        bus = self.bus = Bus()
        for transport in self.transports:
            bus.add_transport(transport)
        bus.add_transport(self._fan_out)
        for agent in self.agents:
            agent.start(bus)
        if self.heartbeat_seconds:
            bus.listen(heartbeats(self.heartbeat_seconds), name="heartbeat")
        return bus

    def publish(self, event: InboundEvent) -> DeliveryReport:
        """Deliver one inbound event; the report says who claimed or shared it."""
        if self.bus is None:
            raise RuntimeError("the bus host is not started")
        return self.bus.publish(event)

    def _fan_out(self, event: OutboundEvent) -> None:
        for queue in list(self._streams):
            if queue.full():
                queue.get_nowait()  # a slow reader loses the oldest event, the agents never wait
            queue.put_nowait(event)

    @asynccontextmanager
    async def outbound(self) -> AsyncIterator[asyncio.Queue[OutboundEvent]]:
        """A queue of every outbound event from now on, while the context is open."""
        queue: asyncio.Queue[OutboundEvent] = asyncio.Queue(maxsize=self.outbound_buffer)
        self._streams.add(queue)
        try:
            yield queue
        finally:
            self._streams.discard(queue)

    def status(self) -> dict[str, Any]:
        """The agents in priority order, whether each is busy, and the newest failures."""
        failures = list(self.bus.failures)[-20:] if self.bus is not None else []
        return {
            "agents": [{"name": a.name, "busy": a.busy, "binding": a.binding.describe()} for a in self.agents],
            "failures": [f.describe() for f in failures],
        }

    async def close(self) -> None:
        """Stop the heartbeat, let the agents finish what they are doing, unsubscribe them."""
        if self.bus is None:
            return
        await self.bus.close()
        for agent in self.agents:
            agent.stop()
        self.bus = None


class MessageIn(BaseModel):
    """A message that arrived on a source."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(..., min_length=1, max_length=200)
    endpoint: str = Field(..., min_length=1, max_length=500, description="The conversation there (a chat id, a number).")
    sender_id: str = Field(..., min_length=1, max_length=500)
    text: str = Field(..., max_length=100_000)
    message_id: str | None = Field(None, max_length=200)
    timestamp: float | None = Field(None, description="When it was written (Unix time); default now.")
    sender_name: str | None = Field(None, max_length=200)


class TaskIn(BaseModel):
    """Work assigned through a source."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(..., min_length=1, max_length=200)
    task: str = Field(..., min_length=1, max_length=200)
    text: str = Field(..., max_length=100_000)
    task_id: str | None = Field(None, max_length=200)
    payload: dict[str, Any] = Field(default_factory=dict)
    reply_to: str | None = Field(None, max_length=500)


def _report(report: DeliveryReport) -> dict[str, Any]:
    return {"handled": report.handled, "claimed_by": report.claimed_by, "shared_with": list(report.shared_with),
            "failed": list(report.failed)}


def create_bus_app(host: BusHost, *, token: str | None = None, max_body_bytes: int = 1_048_576) -> FastAPI:
    """The bus host as an ASGI app (the app's lifespan starts and closes the bus)."""
    from .http._app import bearer_guard

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await host.start()
        yield
        await host.close()

    app = FastAPI(title="footprint bus host", version="1", lifespan=lifespan, responses=ERROR_RESPONSES)
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes)
    install_error_handlers(app)
    router = APIRouter(prefix="/v1/bus", tags=["bus"], dependencies=bearer_guard(token))

    def publish(event: InboundEvent) -> dict[str, Any]:
        if host.bus is None:
            raise HTTPException(503, "the bus host is not running")
        return _report(host.publish(event))

    @router.post("/messages", summary="Deliver a message to the agents")
    async def message(body: MessageIn) -> dict[str, Any]:
        return publish(MessageEvent(
            body.source, body.endpoint, body.sender_id, body.message_id or uuid.uuid4().hex, body.text,
            body.timestamp if body.timestamp is not None else time.time(), body.sender_name,
        ))

    @router.post("/tasks", summary="Assign a task to the agents")
    async def task(body: TaskIn) -> dict[str, Any]:
        return publish(TaskEvent(body.source, body.task, body.task_id or uuid.uuid4().hex, body.text, time.time(),
                                 body.payload, body.reply_to))

    @router.get("/status", summary="The agents in priority order and the newest failures")
    async def status() -> dict[str, Any]:
        return host.status()

    @router.get("/outbound", summary="What the agents send, as Server-Sent Events",
                response_class=StreamingResponse, responses={200: {"content": {"text/event-stream": {}}}})
    async def outbound(request: Request) -> StreamingResponse:
        async def events() -> AsyncIterator[bytes]:
            async with host.outbound() as queue:
                yield b": connected\n\n"
                while not await request.is_disconnected():
                    try:
                        event = await asyncio.wait_for(queue.get(), timeout=15)
                    except TimeoutError:
                        yield b": keep-alive\n\n"
                        continue
                    kind = "send_trace" if hasattr(event, "kind") else "send_text"
                    data = json.dumps(dataclasses.asdict(event), ensure_ascii=False)
                    yield f"event: {kind}\ndata: {data}\n\n".encode()

        return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    app.include_router(router)
    return app


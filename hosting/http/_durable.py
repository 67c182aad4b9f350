"""The HTTP routes of durable sessions (mounted when the host serves a :class:`~hosting.DurableHost`).

    POST /v1/durable/{session_id}/steer     queue a steering message: {text, provider?, model?, effort?, service_tier?}
    POST /v1/durable/{session_id}/send      queue a message for when the agent would stop (same body)
    POST /v1/durable/{session_id}/abort     cancel the active turn (queued messages stay)
    POST /v1/durable/{session_id}/compact   compact the conversation (waits for the active turn)
    GET  /v1/durable/{session_id}           the session's queues, calls owed, history size
    GET  /v1/durable/{session_id}/events    the session's events as Server-Sent Events
    GET  /v1/durable                        every session this host has loaded, with queue lengths

``steer``/``send`` answer 202 once the message is durable — not when it is answered; follow the
``events`` stream (``TurnDone``) for that.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, HTTPException
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent.durable import InferenceSettings
from agent.durable.errors import CompactionError, SettingsError

from .._durable import DurableHost, DurableSessionError
from ..errors import SessionNotFoundError
from ._errors import invalid_request
from ._models import MAX_MESSAGE_CHARS
from ._params import SessionId

KEEPALIVE_SECONDS = 15.0


class QueueRequest(BaseModel):
    """A message for a durable session, with the inference settings it switches to (optional)."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(..., min_length=1, max_length=MAX_MESSAGE_CHARS, description="The user's message.")
    provider: str | None = Field(None, min_length=1, max_length=200, description="A provider registry id.")
    model: str | None = Field(None, min_length=1, max_length=200)
    effort: str | None = Field(None, description="minimal, low, medium or high")
    service_tier: str | None = Field(None, description="auto, default, flex or priority")

    @field_validator("text")
    @classmethod
    def _not_blank(cls, text: str) -> str:
        if not text.strip():
            raise ValueError("text must not be blank: send the message's words")
        return text


#: the settings a queued message may carry (a SettingsError about one is reported on that field)
_SETTINGS = ("provider", "model", "effort", "service_tier")


def _settings_field(error: SettingsError, body: QueueRequest) -> str | None:
    """The body field a settings error is about: the given setting its message names first."""
    message = str(error)
    named = [(message.find(name), name) for name in _SETTINGS if getattr(body, name) is not None and name in message]
    return min(named)[1] if named else None


class QueuedReply(BaseModel):
    """The message is durable in its queue."""

    session_id: str
    queue: str
    key: str


def durable_router(durable: DurableHost) -> APIRouter:
    """The routes above, over ``durable``."""
    router = APIRouter(prefix="/v1/durable", tags=["durable sessions"])

    async def require_stored(session_id: str, what: str) -> None:
        """404 for a session never stored (acting on it would create it, empty)."""
        if not await durable.stored(session_id):
            raise SessionNotFoundError(session_id, what=what, listing="GET /v1/durable")

    async def queue(session_id: str, which: str, body: QueueRequest) -> JSONResponse:
        try:
            settings = InferenceSettings(body.provider, body.model, body.effort, body.service_tier)
            key = await durable.queue(session_id, which, body.text, settings)
        except SettingsError as exc:  # an unknown effort, a provider the host lacks: the client's to fix
            raise invalid_request(str(exc), field=_settings_field(exc, body)) from exc
        except DurableSessionError as exc:
            raise HTTPException(503, str(exc)) from exc
        return JSONResponse({"session_id": session_id, "queue": which, "key": key}, status_code=202)

    @router.post("/{session_id}/steer", status_code=202, response_model=QueuedReply,
                 summary="Queue a message that joins after the current response and its tool batch")
    async def steer(session_id: SessionId, body: QueueRequest) -> JSONResponse:
        return await queue(session_id, "steering", body)

    @router.post("/{session_id}/send", status_code=202, response_model=QueuedReply,
                 summary="Queue a message that joins once the agent would otherwise stop")
    async def send(session_id: SessionId, body: QueueRequest) -> JSONResponse:
        return await queue(session_id, "send", body)

    @router.post("/{session_id}/abort", summary="Cancel the active turn; queued messages stay",
                 responses={404: {"description": "No durable session with this id is stored."}})
    async def abort(session_id: SessionId) -> dict[str, Any]:
        await require_stored(session_id, "so there is no turn to abort")
        return {"session_id": session_id, "aborted": await durable.abort(session_id)}

    @router.post("/{session_id}/compact", summary="Compact the conversation through the provider",
                 responses={404: {"description": "No durable session with this id is stored."}})
    async def compact(session_id: SessionId) -> dict[str, Any]:
        await require_stored(session_id, "so there is nothing to compact")
        try:
            await durable.compact(session_id)
        except CompactionError as exc:
            raise HTTPException(502, str(exc)) from exc
        except DurableSessionError as exc:
            raise HTTPException(503, str(exc)) from exc
        return {"session_id": session_id, "compacted": True, **durable.describe(session_id)}

    @router.get("", summary="The durable sessions loaded in this host")
    async def overview() -> dict[str, Any]:
        return {"sessions": durable.overview()}

    @router.get("/{session_id}", summary="A durable session's queues and state",
                responses={404: {"description": "No durable session with this id is stored."}})
    async def describe(session_id: SessionId) -> dict[str, Any]:
        await require_stored(session_id, "so it has no queues or state")
        return durable.describe(session_id)

    @router.get("/{session_id}/events", response_class=StreamingResponse,
                responses={200: {"content": {"text/event-stream": {}}}},
                summary="The session's events (queued, consumed, text, tools, turn done) as Server-Sent Events")
    async def events(session_id: SessionId) -> StreamingResponse:
        try:
            subscription = durable.subscribe(session_id)
        except DurableSessionError as exc:
            raise HTTPException(503, str(exc)) from exc

        async def stream() -> AsyncIterator[bytes]:
            try:
                yield b": subscribed\n\n"
                while True:
                    try:
                        event = await asyncio.wait_for(subscription.get(), KEEPALIVE_SECONDS)
                    except TimeoutError:
                        yield b": keep-alive\n\n"
                        continue
                    if event is None:
                        return
                    yield (f"event: {event['type']}\n"
                           f"data: {json.dumps(event, ensure_ascii=False, default=str)}\n\n").encode()
            finally:
                durable.unsubscribe(session_id, subscription)

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    return router

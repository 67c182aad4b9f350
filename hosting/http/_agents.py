"""The REST API of the agents gateway, mounted by :func:`hosting.create_app` when given a gateway.

    POST   /api/agents                       create a stored agent (stored only; built on first use)
    GET    /api/agents                       list them: {agents, total}
    GET    /api/agents/{agent_id}            one agent
    PATCH  /api/agents/{agent_id}            change fields (its cached instance is dropped)
    DELETE /api/agents/{agent_id}            delete it (running turns still finish)
    POST   /api/agents/resync                reload the default agents file
    POST   /api/agents/select                the agent whose trigger keywords match a message
    POST   /api/agents/{agent_id}/chat       a turn through the standing host
    GET    /api/agents/{agent_id}/runs       its recent recorded runs
    GET    /api/memory/{user_id}             a user's personal memory records
    PUT    /api/memory/{user_id}/{kind}/{name}   add or replace a record
    POST   /api/memory/{user_id}/{kind}      add a goal or memory under a fresh name
    DELETE /api/memory/{user_id}/{kind}/{name}   remove a record

Bad input gets a 4xx JSON error naming the field: ``{"error": {"code": "invalid_agent", "field":
"temperature", "message": ...}}``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Body, FastAPI, Path, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from agent import memory_record
from agent.errors import PersonalMemoryError
from tracer import run_to_dict
from tracer.errors import quoted

from ..gateway import AgentDefinition, Gateway, GatewayError
from ..gateway._definition import ID_PATTERN, NOT_A_BOOL
from ..gateway.errors import GatewayRequestError, MemoryRecordNotFoundError
from ._errors import error_body
from ._models import MAX_MESSAGE_CHARS, SessionIdText, TurnIdText, TurnReplyModel, UserIdText
from ._params import Offset, UserId

#: a stored agent's id in a path: the pattern published, the check (and its message) _checked_id's
AgentId = Annotated[str, Path(description="1-64 lowercase ASCII letters, digits, _ or -, a letter or digit first",
                              json_schema_extra={"pattern": ID_PATTERN})]

_DEFINITION_SCHEMA = AgentDefinition.model_json_schema(by_alias=True)
#: what PATCH takes: any subset of the create fields (the merged definition is checked whole)
_CHANGE_SCHEMA = {k: v for k, v in _DEFINITION_SCHEMA.items() if k != "required"}


class AgentConfigModel(BaseModel):
    """A stored agent's config blob."""

    maxTokens: int
    temperature: float
    maxTurns: int
    maxToolCalls: int
    tools: list[str]
    toolGroups: list[str]
    emoji: str | None = None
    category: str | None = None
    description: str | None = None
    triggers: list[str] = []


class AgentModel(BaseModel):
    """A stored agent."""

    id: str
    name: str
    systemPrompt: str
    provider: str = Field(description="A provider name, or `default` (resolved on first use).")
    model: str = Field(description="A model name, or `default`.")
    config: AgentConfigModel
    createdAt: float = Field(description="Unix time.")
    updatedAt: float = Field(description="Unix time.")


class AgentsReply(BaseModel):
    """GET /api/agents."""

    agents: list[AgentModel]
    total: int


class ResyncReply(BaseModel):
    """POST /api/agents/resync: agent ids by what happened to them (``kept``: stored, not in the file)."""

    created: list[str]
    updated: list[str]
    unchanged: list[str]
    kept: list[str]


class ChatRequest(BaseModel):
    """A turn of a stored agent."""

    model_config = ConfigDict(extra="forbid")

    message: str = Field("", max_length=MAX_MESSAGE_CHARS)
    session_id: SessionIdText | None = Field(None, description="The conversation to continue; omit to start a new one.")
    user_id: UserIdText | None = Field(None, description="Whose personal memory is injected (none when omitted).")
    decision: str | None = Field(None, min_length=1, max_length=MAX_MESSAGE_CHARS,
                                 description="The answer to the question a paused session asked.")
    turn_id: TurnIdText | None = None


class ChatReply(TurnReplyModel):
    """How the stored agent's turn ended."""

    agent_id: str


class SelectRequest(BaseModel):
    """Choose an agent for a message by its trigger keywords."""

    model_config = ConfigDict(extra="forbid")

    message: str = Field(..., min_length=1, max_length=MAX_MESSAGE_CHARS)


class SelectReply(BaseModel):
    """The chosen agent (null when no keyword matched) and the keywords that matched."""

    agent: AgentModel | None
    matched: list[str]


class MemoryRecordBody(BaseModel):
    """A personal memory record's content."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(..., max_length=4_000)
    status: str = Field("active", description="active | done | dropped (goals only)")
    importance: Annotated[float, NOT_A_BOOL] = Field(0.5, description="0 to 1 (memories: ranks them for relevance)")


class MemoryRecordModel(BaseModel):
    """A stored personal memory record; ``source`` is what injected items' origins name."""

    user_id: str
    kind: str
    name: str
    key: str
    text: str
    status: str
    importance: float
    updated_at: float
    source: str


class MemoryReply(BaseModel):
    """GET /api/memory/{user_id}."""

    user_id: str
    records: list[MemoryRecordModel]


def mount_agents_api(app: FastAPI, gateway: Gateway, dependencies: list[Any]) -> None:
    """Add the gateway's routes and the error handlers that turn its errors into JSON."""
    app.include_router(agents_router(gateway), dependencies=dependencies)
    app.include_router(memory_router(gateway), dependencies=dependencies)

    async def gateway_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, GatewayError)
        return JSONResponse(error_body(exc.code, str(exc), field=getattr(exc, "field", None)),
                            status_code=exc.http_status)

    async def memory_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, PersonalMemoryError)
        return JSONResponse(error_body("invalid_memory_record", str(exc), field=exc.field), status_code=422)

    app.add_exception_handler(GatewayError, gateway_error)
    app.add_exception_handler(PersonalMemoryError, memory_error)


def _definition_body(description: str, schema: dict[str, Any] = _DEFINITION_SCHEMA) -> dict[str, Any]:
    return {"requestBody": {"required": True, "description": description,
                            "content": {"application/json": {"schema": schema}}}}


def agents_router(gateway: Gateway) -> APIRouter:
    """The ``/api/agents`` routes."""
    router = APIRouter(prefix="/api/agents", tags=["agents"])
    not_found: dict[int | str, dict[str, Any]] = {404: {"description": "No stored agent has this id."}}

    @router.post("", status_code=201, response_model=AgentModel, summary="Create a stored agent",
                 openapi_extra=_definition_body("name, systemPrompt, provider, model and the config fields"),
                 responses={409: {"description": "The id or name is taken."},
                            422: {"description": "A field is invalid (the error names it)."}})
    async def create(body: dict[str, Any] = Body(...)) -> JSONResponse:  # noqa: B008 - FastAPI's idiom
        record = await gateway.create(body)
        return JSONResponse(record.to_dict(), status_code=201)

    @router.get("", response_model=AgentsReply, summary="Stored agents, by name")
    async def list_agents(limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
                          offset: Offset = 0) -> dict[str, Any]:
        records = await gateway.list(limit=limit, offset=offset)
        return {"agents": [r.to_dict() for r in records], "total": await gateway.repository.count()}

    @router.post("/resync", response_model=ResyncReply, summary="Reload the default agents file",
                 description="Updates the file's stored agents, creates the missing ones, deletes none.")
    async def resync() -> dict[str, Any]:
        return (await gateway.resync()).to_dict()

    @router.post("/select", response_model=SelectReply, summary="Choose an agent for a message by its triggers")
    async def select(body: SelectRequest) -> dict[str, Any]:
        chosen = await gateway.choose(body.message)
        return {"agent": chosen[0].to_dict() if chosen else None, "matched": chosen[1] if chosen else []}

    @router.get("/{agent_id}", response_model=AgentModel, summary="One stored agent", responses=not_found)
    async def get_agent(agent_id: AgentId) -> dict[str, Any]:
        return (await gateway.get(_checked_id(agent_id))).to_dict()

    @router.patch("/{agent_id}", response_model=AgentModel, summary="Change a stored agent's fields",
                  description="Any subset of the create fields; the merged definition is checked as a whole "
                              "and the agent's cached instance is dropped (running turns finish first).",
                  openapi_extra=_definition_body("the fields to change", _CHANGE_SCHEMA), responses=not_found)
    async def patch_agent(agent_id: AgentId, body: dict[str, Any] = Body(...)) -> dict[str, Any]:  # noqa: B008
        return (await gateway.update(_checked_id(agent_id), body)).to_dict()

    @router.delete("/{agent_id}", summary="Delete a stored agent", responses=not_found)
    async def delete_agent(agent_id: AgentId) -> dict[str, Any]:
        await gateway.delete(_checked_id(agent_id))
        return {"deleted": agent_id}

    @router.post("/{agent_id}/chat", response_model=ChatReply, responses=not_found,
                 summary="Send a turn to a stored agent (built on first use) and wait for the reply")
    async def chat(agent_id: AgentId, body: ChatRequest) -> JSONResponse:
        if body.decision is None and not body.message.strip():
            raise GatewayRequestError("message", "give a non-empty `message` (or a `decision` for a paused session)")
        if body.decision is not None and body.session_id is None:
            raise GatewayRequestError("decision", "a `decision` needs the `session_id` of the paused session")
        reply = await gateway.chat(_checked_id(agent_id), body.message, session_id=body.session_id,
                                   user_id=body.user_id, decision=body.decision, turn_id=body.turn_id)
        # already the documented shape: no second validation on the turn path
        return JSONResponse({**reply.to_dict(), "agent_id": agent_id})

    @router.get("/{agent_id}/runs", summary="A stored agent's recent recorded runs, newest first",
                responses=not_found)
    async def runs(agent_id: AgentId, limit: Annotated[int, Query(ge=1, le=1000)] = 50) -> dict[str, Any]:
        await gateway.get(_checked_id(agent_id))
        found = await gateway.recent_runs(agent_id, limit=limit)
        return {"runs": [run_to_dict(r) for r in found]}

    return router


def memory_router(gateway: Gateway) -> APIRouter:
    """The ``/api/memory`` routes: users' personal memory."""
    router = APIRouter(prefix="/api/memory", tags=["memory"])

    @router.get("/{user_id}", response_model=MemoryReply, summary="A user's personal memory records")
    async def records(user_id: UserId) -> dict[str, Any]:
        return {"user_id": user_id, "records": [r.to_dict() for r in await gateway.memory.records(user_id)]}

    @router.put("/{user_id}/{kind}/{name}", response_model=MemoryRecordModel, summary="Add or replace a record")
    async def put(user_id: UserId, kind: str, name: str, body: MemoryRecordBody) -> dict[str, Any]:
        record = memory_record(user_id, kind, body.text, name=name, status=body.status, importance=body.importance)
        return (await gateway.memory.put(record)).to_dict()

    @router.post("/{user_id}/{kind}", response_model=MemoryRecordModel, status_code=201,
                 summary="Add a goal or memory under a fresh name")
    async def add(user_id: UserId, kind: str, body: MemoryRecordBody) -> JSONResponse:
        record = memory_record(user_id, kind, body.text, status=body.status, importance=body.importance)
        return JSONResponse((await gateway.memory.put(record)).to_dict(), status_code=201)

    @router.delete("/{user_id}/{kind}/{name}", summary="Remove a record")
    async def delete(user_id: UserId, kind: str, name: str) -> dict[str, Any]:
        if not await gateway.memory.delete(user_id, f"{kind}/{name}"):
            raise MemoryRecordNotFoundError(f"user {user_id!r} has no {kind} record {name!r}")
        return {"deleted": f"{kind}/{name}"}

    return router


def _checked_id(agent_id: str) -> str:
    if not re.fullmatch(ID_PATTERN, agent_id):
        raise GatewayRequestError("agent_id", f"agent id {quoted(agent_id)} must be 1-64 lowercase ASCII letters, digits, _ or -, starting with a letter or digit")
    return agent_id

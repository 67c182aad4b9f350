"""Errors raised by the agents gateway.

    FootprintError (tracer.errors)
    └── HostingError (hosting.errors)
        └── GatewayError
            ├── AgentDefinitionError   an agent definition is invalid (``field`` names what, ``http_status`` 422)
            ├── AgentNotFoundError     no stored agent has this id (404)
            ├── AgentConflictError     the id or name is already taken (409)
            ├── GatewayRequestError    a request that is valid JSON but asks for nothing runnable (422)
            ├── MemoryRecordNotFoundError  a personal memory record that is not stored (404)
            ├── SeedFileError          the default-agents file cannot be read or is invalid
            └── AgentStoreError        the agents repository cannot be reached, read or written (503)
"""

from __future__ import annotations

from ..errors import HostingError


class GatewayError(HostingError):
    """An error of the agents gateway; ``code`` and ``http_status`` say how the REST API reports it."""

    code = "gateway_error"
    http_status = 400


class AgentDefinitionError(GatewayError):
    """An agent definition is invalid; ``field`` names the field (``config.temperature``, ``tools[2]``)."""

    code = "invalid_agent"
    http_status = 422

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field


class AgentNotFoundError(GatewayError):
    """No stored agent has this id."""

    code = "agent_not_found"
    http_status = 404

    def __init__(self, agent_id: str) -> None:
        super().__init__(f"no stored agent has the id {agent_id[:100]!r} (GET /api/agents lists them)")
        self.agent_id = agent_id


class AgentConflictError(GatewayError):
    """Another stored agent already has this id or name."""

    code = "agent_conflict"
    http_status = 409


class GatewayRequestError(GatewayError):
    """A request that is well-formed but asks for nothing runnable; ``field`` names the field."""

    code = "invalid_request"
    http_status = 422

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class MemoryRecordNotFoundError(GatewayError):
    """A personal memory record that is not stored."""

    code = "not_found"
    http_status = 404


class SeedFileError(GatewayError):
    """The default-agents seed file cannot be read, or an agent in it is invalid (the message says where)."""

    code = "invalid_seed_file"
    http_status = 500


class AgentStoreError(GatewayError):
    """The agents repository cannot be reached, read or written."""

    code = "agent_store_error"
    http_status = 503

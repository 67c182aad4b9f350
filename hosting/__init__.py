"""footprint's standing-agent host: an agent that stays up and remembers, served over HTTP.

``standing_agent`` composes an agent (one shared instance, or a factory for one per session) with
a session store and a durability mode; ``create_app`` serves it as an ASGI app; ``serve`` runs it
with graceful shutdown; ``RecordingsClient`` reads the host's recordings from another process;
``BusHost`` serves bus agents (``agent.bus.ChannelAgent``) over HTTP.

Each name is imported from its module when first used (tracer._lazy), so ``footprint serve --help``,
or a program that needs only the client, imports neither FastAPI nor the bus host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracer._lazy import lazy_exports

if TYPE_CHECKING:
    from ._bus_host import BusHost, create_bus_app
    from ._client import RecordingsClient
    from ._durable import DurableHost, DurableSessionError
    from ._pool import AgentPool
    from ._reply import TurnReply
    from ._standing import StandingAgent, standing_agent
    from .errors import (
        AwaitingDecisionError,
        HostAuthError,
        HostClientError,
        HostFailedError,
        HostingError,
        HostShuttingDownError,
        NotAwaitingError,
        SessionBusyError,
        SessionNotFoundError,
        SessionStoreError,
        TurnIdReusedError,
        TurnRefusedError,
        UnreadableEnvelopeError,
        VersionConflictError,
    )
    from .http import create_app
    from .sessions import (
        DuckDBPersistence,
        DuckDBSessions,
        Envelope,
        InMemorySessions,
        PostgresPersistence,
        PostgresSessions,
        SessionStore,
        SessionSummary,
    )

#: each public name and the module that defines it, imported when the name is first used
_EXPORTS: dict[str, str] = {
    "AgentPool": "._pool",
    "AwaitingDecisionError": ".errors",
    "BusHost": "._bus_host",
    "DuckDBPersistence": ".sessions",
    "DuckDBSessions": ".sessions",
    "DurableHost": "._durable",
    "DurableSessionError": "._durable",
    "Envelope": ".sessions",
    "HostAuthError": ".errors",
    "HostClientError": ".errors",
    "HostFailedError": ".errors",
    "HostShuttingDownError": ".errors",
    "HostingError": ".errors",
    "InMemorySessions": ".sessions",
    "NotAwaitingError": ".errors",
    "PostgresPersistence": ".sessions",
    "PostgresSessions": ".sessions",
    "RecordingsClient": "._client",
    "SessionBusyError": ".errors",
    "SessionNotFoundError": ".errors",
    "SessionStore": ".sessions",
    "SessionStoreError": ".errors",
    "SessionSummary": ".sessions",
    "StandingAgent": "._standing",
    "TurnIdReusedError": ".errors",
    "TurnRefusedError": ".errors",
    "TurnReply": "._reply",
    "UnreadableEnvelopeError": ".errors",
    "VersionConflictError": ".errors",
    "create_app": ".http",
    "create_bus_app": "._bus_host",
    "standing_agent": "._standing",
}

__all__ = [
    "AgentPool",
    "AwaitingDecisionError",
    "BusHost",
    "DuckDBPersistence",
    "DuckDBSessions",
    "DurableHost",
    "DurableSessionError",
    "Envelope",
    "HostAuthError",
    "HostClientError",
    "HostFailedError",
    "HostShuttingDownError",
    "HostingError",
    "InMemorySessions",
    "NotAwaitingError",
    "PostgresPersistence",
    "PostgresSessions",
    "RecordingsClient",
    "SessionBusyError",
    "SessionNotFoundError",
    "SessionStore",
    "SessionStoreError",
    "SessionSummary",
    "StandingAgent",
    "TurnIdReusedError",
    "TurnRefusedError",
    "TurnReply",
    "UnreadableEnvelopeError",
    "VersionConflictError",
    "create_app",
    "create_bus_app",
    "standing_agent",
]

if not TYPE_CHECKING:  # (mypy reads the imports above; a module __getattr__ would let any name through)
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

"""footprint's standing-agent host: an agent that stays up and remembers, served over HTTP.

``standing_agent`` composes an agent (one shared instance, or a factory for one per session) with
a session store and a durability mode; ``create_app`` serves it as an ASGI app; ``serve`` runs it
with graceful shutdown; ``RecordingsClient`` reads the host's recordings from another process;
``BusHost`` serves bus agents (``agent.bus.ChannelAgent``) over HTTP.
"""

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

"""Durable agent sessions: steer and send queues, append-only persistence, crash resume, compaction.

:class:`DurableAgent` runs the ordinary agent loop (:mod:`agent._loop`) with its turn input and
every step made durable through a :class:`SessionPersistence` — in memory here, DuckDB and
PostgreSQL in ``hosting.sessions``: one storage design for every session.
"""

from ._agent import AgentState, DurableAgent
from ._events import Compacted, MessageQueued, MessagesConsumed, SessionEvent, Settled, TurnDone
from ._hooks import (
    Compact,
    DurableFeature,
    DurableHooks,
    FeatureAction,
    ModelChange,
    Send,
    SessionContext,
    Steer,
    merge_features,
)
from ._memory import InMemoryPersistence
from ._persistence import PersistenceContext, SessionPersistence, SessionRecord
from ._providers import AgentProviders
from ._settings import InferenceSettings
from ._tools import typed_tool

__all__ = [
    "AgentProviders",
    "AgentState",
    "Compact",
    "Compacted",
    "DurableAgent",
    "DurableFeature",
    "DurableHooks",
    "FeatureAction",
    "InMemoryPersistence",
    "InferenceSettings",
    "MessageQueued",
    "MessagesConsumed",
    "ModelChange",
    "PersistenceContext",
    "Send",
    "SessionContext",
    "SessionEvent",
    "SessionPersistence",
    "SessionRecord",
    "Settled",
    "Steer",
    "TurnDone",
    "merge_features",
    "typed_tool",
]

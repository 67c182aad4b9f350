"""Bus agent types: agents that hear a host's merged inbound stream and answer through its transports.

    sources ──┐
              ├──► Bus.publish ──► agents, in the order they were started: ignore | share | claim
    heartbeat ┘                         │
                                        ▼
                                   Bus.send ──► the host's transports

:class:`ChannelAgent` is the base (binding match, claim or share, staleness, error isolation);
:class:`ConversationalAgent` keeps an :class:`agent.Agent` per conversation with its history in a
:class:`ConversationStore`; :class:`SummaristAgent` watches and summarises; :class:`WebChatAgent`
reads its chat back every turn and remembers the tool calls behind its replies for a few turns.
Transport and endpoint names are opaque strings: the host turns outbound events into real sends.
"""

from ._assistants import MarketingAgent, PersonalAssistantAgent, assistant_persona, marketing_persona
from ._binding import AgentBinding, SourceBinding
from ._bus import Bus, BusFailure, BusSubscriber, DeliveryReport, Transport, Verdict, heartbeats
from ._channel import DEFAULT_STALE_AFTER, ChannelAgent
from ._conversational import ConversationalAgent, ConversationStore, InMemoryConversationStore
from ._events import HeartbeatEvent, InboundEvent, MessageEvent, OutboundEvent, SendText, SendTrace, TaskEvent
from ._remembered import (
    MAX_REMEMBERED_CHATS,
    MAX_REMEMBERED_TOOL_TURNS,
    RememberedToolExchanges,
    ToolExchange,
    complete_exchange,
    place_exchanges,
)
from ._summarist import SummaristAgent, Summary
from ._webchat import ChatTranscriptSource, FinishedToolCall, TranscriptLine, WebChatAgent, WebChatTurn
from .errors import BadEventError, BindingError, BusError, ConversationUnreadableError, RunFailedError

__all__ = [
    "DEFAULT_STALE_AFTER",
    "MAX_REMEMBERED_CHATS",
    "MAX_REMEMBERED_TOOL_TURNS",
    "AgentBinding",
    "BadEventError",
    "BindingError",
    "Bus",
    "BusError",
    "BusFailure",
    "BusSubscriber",
    "ChannelAgent",
    "ChatTranscriptSource",
    "ConversationStore",
    "ConversationUnreadableError",
    "ConversationalAgent",
    "DeliveryReport",
    "FinishedToolCall",
    "HeartbeatEvent",
    "InMemoryConversationStore",
    "InboundEvent",
    "MarketingAgent",
    "MessageEvent",
    "OutboundEvent",
    "PersonalAssistantAgent",
    "RememberedToolExchanges",
    "RunFailedError",
    "SendText",
    "SendTrace",
    "SourceBinding",
    "SummaristAgent",
    "Summary",
    "TaskEvent",
    "ToolExchange",
    "TranscriptLine",
    "Transport",
    "Verdict",
    "WebChatAgent",
    "WebChatTurn",
    "assistant_persona",
    "complete_exchange",
    "heartbeats",
    "marketing_persona",
    "place_exchanges",
]

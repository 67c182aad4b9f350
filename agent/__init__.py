"""footprint's agent framework: the Agent, its loop, tools, memory, prompt composer and providers.

Every run an Agent makes is recorded through ``tracer`` with the origin of every context item.
"""

from ._agent import Agent, Approval, ModelSettings
from ._events import (
    AgentEvent,
    InferenceFinished,
    PauseState,
    RunFinished,
    RunResult,
    TextDeltaEvent,
    ToolFinished,
    ToolStarted,
)
from ._facts import Fact, FactStore, InMemoryFacts
from ._hooks import Feature, Hooks, RunContext
from ._injector import MemoryInjector
from ._memory import Conversation, ConversationMemory, LeftBehind, MemoryStats, estimate_item_tokens
from ._personal import (
    RECORD_KINDS,
    InMemoryPersonalMemory,
    MemoryRecord,
    PersonalMemory,
    check_user_id,
    memory_record,
)
from ._prompt import ComposedPrompt, PromptComposer, PromptContext, Section
from .tools import PauseRun, Tool, ToolContext, ToolRegistry, result_text, tool

__all__ = [
    "RECORD_KINDS",
    "Agent",
    "AgentEvent",
    "Approval",
    "ComposedPrompt",
    "Conversation",
    "ConversationMemory",
    "Fact",
    "FactStore",
    "Feature",
    "Hooks",
    "InMemoryFacts",
    "InMemoryPersonalMemory",
    "InferenceFinished",
    "LeftBehind",
    "MemoryInjector",
    "MemoryRecord",
    "MemoryStats",
    "ModelSettings",
    "PauseRun",
    "PauseState",
    "PersonalMemory",
    "PromptComposer",
    "PromptContext",
    "RunContext",
    "RunFinished",
    "RunResult",
    "Section",
    "TextDeltaEvent",
    "Tool",
    "ToolContext",
    "ToolFinished",
    "ToolRegistry",
    "ToolStarted",
    "check_user_id",
    "estimate_item_tokens",
    "memory_record",
    "result_text",
    "tool",
]

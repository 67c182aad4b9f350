"""footprint's agent framework: the Agent, its loop, tools, memory, prompt composer and providers.

Every run an Agent makes is recorded through ``tracer`` with the origin of every context item.

Each name is imported from its module when first used (tracer._lazy), so a command's ``--help``,
or a program that needs one of them, does not import the whole framework.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracer._lazy import lazy_exports

if TYPE_CHECKING:
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

#: each public name and the module that defines it, imported when the name is first used
_EXPORTS: dict[str, str] = {
    "RECORD_KINDS": "._personal",
    "Agent": "._agent",
    "AgentEvent": "._events",
    "Approval": "._agent",
    "ComposedPrompt": "._prompt",
    "Conversation": "._memory",
    "ConversationMemory": "._memory",
    "Fact": "._facts",
    "FactStore": "._facts",
    "Feature": "._hooks",
    "Hooks": "._hooks",
    "InMemoryFacts": "._facts",
    "InMemoryPersonalMemory": "._personal",
    "InferenceFinished": "._events",
    "LeftBehind": "._memory",
    "MemoryInjector": "._injector",
    "MemoryRecord": "._personal",
    "MemoryStats": "._memory",
    "ModelSettings": "._agent",
    "PauseRun": ".tools",
    "PauseState": "._events",
    "PersonalMemory": "._personal",
    "PromptComposer": "._prompt",
    "PromptContext": "._prompt",
    "RunContext": "._hooks",
    "RunFinished": "._events",
    "RunResult": "._events",
    "Section": "._prompt",
    "TextDeltaEvent": "._events",
    "Tool": ".tools",
    "ToolContext": ".tools",
    "ToolFinished": "._events",
    "ToolRegistry": ".tools",
    "ToolStarted": "._events",
    "check_user_id": "._personal",
    "estimate_item_tokens": "._memory",
    "memory_record": "._personal",
    "result_text": ".tools",
    "tool": ".tools",
}

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

if not TYPE_CHECKING:  # (mypy reads the imports above; a module __getattr__ would let any name through)
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

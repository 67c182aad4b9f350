"""Chatting with a persona: an Agent built from it, its conversation resumed, every run recorded."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

from agent import Agent, AgentEvent, ConversationMemory, RunFinished, RunResult, ToolRegistry
from agent.demo import default_provider as demo_provider
from agent.providers import Provider
from tracer import ItemKind, Recorder, RedactionPolicy

from ._personas import Persona, PersonaStore
from ._tools import sandbox_registry


def default_provider() -> Provider:
    """The real model with ``OPENAI_API_KEY`` set (``FOOTPRINT_MODEL`` picks it); else the offline demo model."""
    return demo_provider()


@dataclass(frozen=True)
class ChatLine:
    """One line of a conversation as the chat shows it."""

    role: str  # user | assistant | tool
    text: str


class SandboxChat:
    """A chat with one persona. Its conversation is resumed from the store and saved after each turn."""

    def __init__(
        self,
        persona: Persona,
        personas: PersonaStore,
        *,
        provider: Provider | None = None,
        registry: ToolRegistry | None = None,
        recorder: Recorder | None = None,
    ) -> None:
        self.persona = persona
        self.personas = personas
        self.memory = ConversationMemory()
        conversation = personas.load_conversation(persona.id)
        if conversation is not None:
            conversation.id = persona.conversation_id
            conversation.system_prompt = persona.persona  # an edited persona takes effect at once
            self.memory.put(conversation)
        self.resumed = conversation is not None and bool(conversation.messages)
        recorder = recorder if recorder is not None else Recorder(personas.store)
        # what the chat keeps is masked as the recordings are: a credential pasted into a message
        # reaches neither the model nor the saved conversation (as on the host)
        self.redaction: RedactionPolicy = recorder.redaction
        self.agent = Agent(
            persona.name, provider=provider or default_provider(), persona=persona.persona,
            discloses_ai=persona.discloses_ai, tool_names=persona.tools, registry=registry or sandbox_registry(),
            memory=self.memory, conversation_id=persona.conversation_id, session_id=persona.conversation_id,
            recorder=recorder,
        )

    def history(self) -> list[ChatLine]:
        """The conversation so far (tool calls shown by name)."""
        lines: list[ChatLine] = []
        for ci in self.memory.require(self.persona.conversation_id).messages:
            kind = ci.item.kind
            if kind == ItemKind.USER:
                lines.append(ChatLine("user", ci.item.text))
            elif kind == ItemKind.ASSISTANT and ci.item.text:
                lines.append(ChatLine("assistant", ci.item.text))
            elif kind == ItemKind.TOOL_CALL:
                lines.append(ChatLine("tool", ci.item.text))
        return lines

    async def stream(self, message: str) -> AsyncIterator[AgentEvent]:
        """Send ``message``; yields the run's events, the last being :class:`RunFinished`. Saves after."""
        try:
            async for event in self.agent.stream(self.redaction.text(message)):
                yield event
        finally:
            await self.save()

    async def send(self, message: str) -> RunResult:
        """Send ``message`` and return the run's result."""
        result: RunResult | None = None
        async for event in self.stream(message):
            if isinstance(event, RunFinished):
                result = event.result
        assert result is not None
        return result

    async def save(self) -> None:
        """Save the conversation and commit the recorded runs (in a thread: it is database work)."""
        await asyncio.to_thread(self.save_now)

    def save_now(self) -> None:
        """Save the conversation and commit the recorded runs, blocking."""
        self.personas.save_conversation(self.persona.id, self.memory.require(self.persona.conversation_id),
                                        self.redaction)
        self.personas.store.flush()

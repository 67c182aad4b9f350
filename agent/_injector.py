"""The memory injector: a user's personal memory turned into prompt pieces that name their records.

    injector = MemoryInjector(personal_memory)
    agent = Agent("assistant", provider=..., facts=injector, user_id="alice")

As the agent's fact store, the injector gives the loop, for each message, the user's profile
(identity, facts, communication style, interests, timezone), their custom instructions, autonomy
level and active goals, and those earlier memories that are relevant to the message. Each becomes a
``memory`` item of its own whose origin names the record (``personal:alice/fact/home_city``), so
`why` and blame can point at the exact record that shaped an answer; the prompt composer puts each
under its section (memories and goals right after the base prompt, then the profile, the
instructions, and the autonomy guideline).

:meth:`MemoryInjector.inject_memory` and :meth:`~MemoryInjector.create_agent_prompt` compose a
prompt the same way outside a run; :meth:`~MemoryInjector.relevant_context` gives just the
memories and goals relevant to a query, as text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from ._facts import Fact, FactStore
from ._personal import RECORD_KINDS, MemoryRecord, PersonalMemory, memory_record
from ._prompt import ComposedPrompt, PromptComposer, PromptContext, autonomy_text

_WORDS = re.compile(r"[a-z0-9]+")
#: Words too common to make a memory relevant to a question.
_STOP = frozenset("a an and are at be do does for from have how i in is it me my of on or the to was what when "
                  "where which who why will with you your".split())


def record_text(record: MemoryRecord) -> str:
    """The line a record contributes to the prompt."""
    label = record.name.replace("_", " ")
    return {
        "identity": f"{label.capitalize()}: {record.text}",
        "fact": record.text,
        "communication_style": f"Prefers ({label}): {record.text}",
        "interest": f"Interested in: {record.text}",
        "timezone": f"Time zone: {record.text}",
        "goal": f"- {record.text}",
        "memory": f"- {record.text}",
        "custom_instruction": f"- {record.text}",
        "autonomy_level": autonomy_text(record.text),
    }[record.kind]


def as_fact(record: MemoryRecord) -> Fact:
    """The record as a fact for the prompt composer: keyed by the record's source."""
    return Fact(record.source, record_text(record), record.updated_at, source="personal_memory",
                section=RECORD_KINDS[record.kind])


def _words(text: str) -> set[str]:
    return {w for w in _WORDS.findall(text.lower()) if w not in _STOP and len(w) > 1}


class MemoryInjector(FactStore):
    """Injects a user's personal memory into an agent's prompt, one named item per record.

    ``max_memories``: at most this many earlier memories are injected per message, the most
    relevant first (shared words with the message, weighed by importance); a memory that shares no
    word with the message is left out. Profile records, instructions, the autonomy level and active
    goals are always injected.
    """

    def __init__(self, memory: PersonalMemory, *, max_memories: int = 5, composer: PromptComposer | None = None) -> None:
        self.memory = memory
        self.max_memories = max_memories
        self.composer = composer or PromptComposer()

    # ------------------------------------------------------------------ the fact store the loop asks

    async def facts(self, user_id: str) -> list[Fact]:
        """Every active record of the user as a fact (goals done or dropped left out)."""
        return [as_fact(r) for r in await self.memory.records(user_id) if r.status == "active"]

    async def facts_for(self, user_id: str, query: str) -> list[Fact]:
        """The facts to inject when answering ``query``: the profile and rules, plus relevant memories."""
        return [as_fact(r) for r in await self.selected(user_id, query)]

    async def selected(self, user_id: str, query: str) -> list[MemoryRecord]:
        """The records injected for ``query``: profile order, then the relevant memories (most relevant first)."""
        records = [r for r in await self.memory.records(user_id) if r.status == "active"]
        memories = self._relevant([r for r in records if r.kind == "memory"], query)
        return [*(r for r in records if r.kind != "memory"), *memories]

    async def remember(self, user_id: str, fact: Fact) -> None:
        """Store ``fact`` as a ``fact`` record named by its key."""
        await self.memory.put(memory_record(user_id, "fact", fact.text, name=fact.key))

    async def forget(self, user_id: str, key: str) -> bool:
        """Remove the record ``kind/name`` (a bare name means a ``fact`` record)."""
        return await self.memory.delete(user_id, key if "/" in key else f"fact/{key}")

    # ------------------------------------------------------------------ composing outside a run

    async def inject_memory(
        self, base_prompt: str, user_id: str | None = None, query: str = "", *,
        tool_summaries: Sequence[tuple[str, str]] = (), capabilities: Sequence[str] = (),
        now: datetime | None = None, timezone_name: str | None = None,
    ) -> ComposedPrompt:
        """``base_prompt`` composed with the user's memory (none without ``user_id``).

        The result's pieces are the prompt sections and one ``memory`` piece per record, each
        naming its record as ``source``; ``text`` is the prompt as a model would see it.
        """
        facts = await self.facts_for(user_id, query) if user_id is not None else []
        if timezone_name is None and user_id is not None:
            timezone_name = next((r.text for r in await self.memory.records(user_id) if r.kind == "timezone"), None)
        return self.composer.compose(PromptContext(
            base=base_prompt, facts=facts, tool_summaries=tool_summaries, capabilities=capabilities,
            now=now, timezone_name=timezone_name,
        ))

    async def create_agent_prompt(
        self, agent_name: str, agent_description: str, user_id: str | None = None, query: str = "",
    ) -> str:
        """A system prompt for an agent described in a sentence, with the user's memory injected."""
        base = f"You are {agent_name.strip()}. {agent_description.strip()}".strip()
        return (await self.inject_memory(base, user_id, query)).text

    async def relevant_context(self, user_id: str, query: str) -> str | None:
        """The user's memories relevant to ``query`` and their active goals, as text; None when none."""
        records = [r for r in await self.memory.records(user_id) if r.status == "active"]
        memories = self._relevant([r for r in records if r.kind == "memory"], query)
        goals = [r for r in records if r.kind == "goal"]
        parts = []
        if memories:
            parts.append("Relevant memories:\n" + "\n".join(record_text(r) for r in memories))
        if goals:
            parts.append("Active goals:\n" + "\n".join(record_text(r) for r in goals))
        return "\n\n".join(parts) or None

    def _relevant(self, memories: list[MemoryRecord], query: str) -> list[MemoryRecord]:
        asked = _words(query)
        scored = []
        for record in memories:
            shared = len(asked & _words(record.text))
            if shared:
                scored.append((shared * (0.5 + record.importance), record.updated_at, record))
        scored.sort(key=lambda entry: (-entry[0], -entry[1], entry[2].name))
        return [record for _, _, record in scored[: self.max_memories]]

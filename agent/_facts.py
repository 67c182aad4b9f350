"""Memory facts: what an agent knows about a user, injected into the prompt.

A fact has a key (``profile.home_city``), text, and when it was last written. Injected facts enter
the context as ``memory`` items whose origin names the key, so `why` and `blame` can point at the
exact fact that misled a model. ``section`` says which prompt section a fact belongs to
(:data:`agent._prompt.FACT_SECTIONS`: the user profile by default).

A store may also choose facts by the message being answered (:meth:`FactStore.facts_for`); the
agent's loop asks that way, so a store can inject only what is relevant to the question.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Fact:
    """One remembered fact about a user."""

    key: str
    text: str
    updated_at: float = field(default_factory=time.time)
    source: str = "memory"
    section: str = "user_profile"


class FactStore(ABC):
    """Where facts are kept (per user)."""

    @abstractmethod
    async def facts(self, user_id: str) -> list[Fact]:
        """Every fact about ``user_id``, in a stable order."""

    async def facts_for(self, user_id: str, query: str) -> list[Fact]:
        """The facts to inject when answering ``query`` (default: every fact about the user)."""
        return await self.facts(user_id)

    @abstractmethod
    async def remember(self, user_id: str, fact: Fact) -> None:
        """Add or replace a fact (by key)."""

    @abstractmethod
    async def forget(self, user_id: str, key: str) -> bool:
        """Remove a fact; True when it existed."""


class InMemoryFacts(FactStore):
    """Facts kept in a dict (tests, demos, the sandbox)."""

    def __init__(self, facts: dict[str, Iterable[Fact]] | None = None) -> None:
        self._facts: dict[str, dict[str, Fact]] = {}
        for user, items in (facts or {}).items():
            self._facts[user] = {f.key: f for f in items}

    async def facts(self, user_id: str) -> list[Fact]:
        """Every fact about ``user_id``, sorted by key."""
        return sorted(self._facts.get(user_id, {}).values(), key=lambda f: f.key)

    async def remember(self, user_id: str, fact: Fact) -> None:
        """Add or replace a fact."""
        self._facts.setdefault(user_id, {})[fact.key] = fact

    async def forget(self, user_id: str, key: str) -> bool:
        """Remove a fact."""
        return self._facts.get(user_id, {}).pop(key, None) is not None

"""Memory facts: what an agent knows about a user, injected into the prompt.

A fact has a key (``profile.home_city``), text, and when it was last written. Injected facts enter
the context as ``memory`` items whose origin names the key, so `why` and `blame` can point at the
exact fact that misled a model.
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


class FactStore(ABC):
    """Where facts are kept (per user)."""

    @abstractmethod
    async def facts(self, user_id: str) -> list[Fact]:
        """Every fact about ``user_id``, in a stable order."""

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

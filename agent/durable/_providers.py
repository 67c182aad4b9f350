"""The provider registry of durable sessions, and which provider/model changes keep a conversation.

A session is configured with serialisable values only — a provider *registry id*, a model name,
an effort and a service tier — and resolves the live provider from an :class:`AgentProviders`
registry when it needs one. Each provider is registered with a *compatibility type*: the
conversation format it understands. Whether a change of provider or model keeps the history is
decided by :func:`is_compatible`:

- the same provider id with another model: compatible (one provider serves many models);
- another provider id of the *same* type: incompatible (the history may carry what only the old
  provider instance can read back — its response ids, its cache);
- another provider of another type: compatible only when the pair is in the registry's matrix
  (by default ``openai`` <-> ``replay``: a replay provider serves recorded OpenAI conversations);
- an id that is not registered: incompatible.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent.providers import Provider

#: The compatibility types footprint's own providers are registered with.
PROVIDER_TYPES = ("openai", "replay", "demo", "test")
DEFAULT_COMPATIBLE = (("openai", "replay"),)


class AgentProviders:
    """A mutable registry of provider instances under caller-chosen ids, each with its type.

    The same provider class may be registered under several ids (two accounts, two base URLs).
    ``compatible`` lists the pairs of *different* types whose conversations carry over.
    """

    def __init__(self, compatible: Iterable[tuple[str, str]] = DEFAULT_COMPATIBLE) -> None:
        self._providers: dict[str, tuple[Provider, str]] = {}
        self._matrix = {frozenset(pair) for pair in compatible}

    def add(self, id: str, provider: Provider, type: str) -> AgentProviders:
        """Register ``provider`` under ``id`` with compatibility ``type`` (replacing an earlier one)."""
        if not id:
            raise ValueError("a provider needs a non-empty registry id")
        if not type:
            raise ValueError(f"provider {id!r} needs a compatibility type (e.g. {', '.join(PROVIDER_TYPES)})")
        self._providers[id] = (provider, type)
        return self

    def get(self, id: str) -> Provider | None:
        """The provider registered under ``id``, or None."""
        entry = self._providers.get(id)
        return entry[0] if entry else None

    def type_of(self, id: str) -> str | None:
        """The compatibility type ``id`` was registered with, or None."""
        entry = self._providers.get(id)
        return entry[1] if entry else None

    def ids(self) -> list[str]:
        """Every registered id, in registration order."""
        return list(self._providers)

    def is_compatible(self, old_id: str, new_id: str) -> bool:
        """True when a conversation held with ``old_id`` may go on with ``new_id`` (see the module)."""
        old_type, new_type = self.type_of(old_id), self.type_of(new_id)
        if old_type is None or new_type is None:
            return False
        if old_id == new_id:
            return True
        if old_type == new_type:
            return False
        return frozenset((old_type, new_type)) in self._matrix

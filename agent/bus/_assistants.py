"""Two ready-made conversational agents: thin configurations of :class:`ConversationalAgent`.

:class:`PersonalAssistantAgent` speaks for one person (its owner) with the owner's tools — a
calendar, errands; :class:`MarketingAgent` answers prospective customers about one brand's offer.
Each only writes a persona; everything else (history in a store, recorded runs, claim or share,
silence without a reply channel) is the conversational agent's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..providers import Provider
from ..tools import ToolLike
from ._binding import AgentBinding
from ._conversational import ConversationalAgent


def assistant_persona(owner: str) -> str:
    """The personal assistant's default persona for ``owner``."""
    return (
        f"You are {owner}'s personal assistant. You answer on {owner}'s behalf, briefly and politely. "
        f"Use your tools to check facts such as {owner}'s availability before stating them, never promise "
        f"anything a tool has not confirmed, and ask before committing {owner} to a meeting, a payment or "
        f"anything else that cannot be undone."
    )


def marketing_persona(brand: str, offer: str | None = None) -> str:
    """The marketing agent's default persona for ``brand`` (and what it offers, when given)."""
    about = f" What {brand} offers: {offer}" if offer else ""
    return (
        f"You answer people interested in {brand}. Be friendly and concrete, and make only claims the "
        f"offer below or your tools support: never invent prices, discounts or availability. When someone "
        f"wants to buy or asks for something you cannot answer, offer to put them in touch with a person."
        f"{about}"
    )


class PersonalAssistantAgent(ConversationalAgent):
    """Speaks for ``owner`` with the owner's ``tools`` (``persona`` replaces the default one)."""

    def __init__(
        self,
        name: str,
        binding: AgentBinding,
        *,
        provider: Provider,
        owner: str,
        tools: Sequence[ToolLike] = (),
        persona: str | None = None,
        **options: Any,
    ) -> None:
        super().__init__(name, binding, provider=provider, persona=persona or assistant_persona(owner),
                         tools=tools, **options)
        self.owner = owner


class MarketingAgent(ConversationalAgent):
    """Answers prospective customers of ``brand`` about ``offer`` (``persona`` replaces the default one)."""

    def __init__(
        self,
        name: str,
        binding: AgentBinding,
        *,
        provider: Provider,
        brand: str,
        offer: str | None = None,
        tools: Sequence[ToolLike] = (),
        persona: str | None = None,
        **options: Any,
    ) -> None:
        super().__init__(name, binding, provider=provider, persona=persona or marketing_persona(brand, offer),
                         tools=tools, **options)
        self.brand = brand
        self.offer = offer

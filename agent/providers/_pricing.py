"""Prices per million tokens, to put a cost on every recorded run.

Figures are list prices in US dollars as published by the providers; a model missing here costs
0.0 and a user can pass a table of their own to the agent.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._base import Usage


@dataclass(frozen=True)
class Price:
    """Dollars per million input, cached-input and output tokens."""

    input: float
    output: float
    cached_input: float | None = None


PRICES: dict[str, Price] = {
    "gpt-4o": Price(2.50, 10.00, 1.25),
    "gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "gpt-4.1": Price(2.00, 8.00, 0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "o3-mini": Price(1.10, 4.40, 0.55),
    "o4-mini": Price(1.10, 4.40, 0.275),
}


def cost_of(model: str, usage: Usage, prices: dict[str, Price] | None = None) -> float:
    """The dollar cost of ``usage`` on ``model`` (longest matching name prefix; 0.0 when unknown)."""
    table = prices if prices is not None else PRICES
    price = table.get(model)
    if price is None:
        matches = [name for name in table if model.startswith(name)]
        if not matches:
            return 0.0
        price = table[max(matches, key=len)]
    cached = min(usage.cached_tokens, usage.input_tokens)
    cached_rate = price.cached_input if price.cached_input is not None else price.input
    return (
        (usage.input_tokens - cached) * price.input + cached * cached_rate + usage.output_tokens * price.output
    ) / 1_000_000

"""Memory facts: the in-memory fact store."""

from __future__ import annotations

from agent import Fact, InMemoryFacts


async def test_facts_per_user_sorted_by_key() -> None:
    facts = InMemoryFacts({"u1": [Fact("profile.name", "Ada"), Fact("profile.city", "Berlin")]})
    assert [f.key for f in await facts.facts("u1")] == ["profile.city", "profile.name"]
    assert await facts.facts("nobody") == []


async def test_remember_replaces_by_key_and_forget_removes() -> None:
    facts = InMemoryFacts()
    await facts.remember("u1", Fact("profile.city", "Berlin"))
    await facts.remember("u1", Fact("profile.city", "Paris"))
    assert [f.text for f in await facts.facts("u1")] == ["Paris"]
    assert await facts.forget("u1", "profile.city") is True
    assert await facts.forget("u1", "profile.city") is False
    assert await facts.facts("u1") == []

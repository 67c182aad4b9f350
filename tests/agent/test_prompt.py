"""PromptComposer: sections in order, one item per section or fact, and the length cap."""

from __future__ import annotations

from datetime import UTC, datetime

from agent import Fact, PromptComposer, PromptContext

FULL = PromptContext(
    base="You are Ada, a travel assistant.",
    facts=[Fact("profile.city", "The user lives in Berlin."), Fact("profile.diet", "The user is vegetarian.")],
    custom_instructions=["Answer in English.", "Never book without asking."],
    tool_summaries=[("search_flights", "Find flights.")],
    workspace="/home/ada",
    capabilities=["web browsing"],
    autonomy="supervised",
    now=datetime(2025, 3, 14, 9, 30, tzinfo=UTC),
    conversation={"messages": 4},
    extra_sections=[("feature:memory", "Remember what matters.")],
)


def test_sections_come_in_order_each_as_its_own_item() -> None:
    composed = PromptComposer().compose(FULL)
    assert [(p.section, p.origin_kind, p.source) for p in composed.pieces] == [
        ("base", "prompt_section", "base"),
        ("user_profile", "prompt_section", "user_profile"),
        ("user_profile", "memory", "profile.city"),
        ("user_profile", "memory", "profile.diet"),
        ("custom_instructions", "prompt_section", "custom_instructions"),
        ("feature:memory", "prompt_section", "feature:memory"),
        ("tools", "prompt_section", "tools"),
        ("workspace", "prompt_section", "workspace"),
        ("capabilities", "prompt_section", "capabilities"),
        ("autonomy", "prompt_section", "autonomy"),
        ("time", "prompt_section", "time"),
        ("conversation", "prompt_section", "conversation"),
    ]
    assert composed.dropped == []
    facts = [p.item for p in composed.pieces if p.origin_kind == "memory"]
    assert [(f.kind, f.body) for f in facts] == [
        ("memory", {"text": "The user lives in Berlin.", "key": "profile.city"}),
        ("memory", {"text": "The user is vegetarian.", "key": "profile.diet"}),
    ]
    text = composed.text
    assert text.startswith("You are Ada, a travel assistant.")
    assert "- Never book without asking." in text and "- search_flights: Find flights." in text
    assert "Now: Friday 2025-03-14 09:30 (UTC)." in text
    assert "ask before payments, deletions or messages to others." in text


def test_disclosure() -> None:
    discloses = PromptComposer().compose(PromptContext(base="You are Ada.")).text
    assert "say plainly that you are an AI assistant" in discloses
    stays = PromptComposer().compose(PromptContext(base="You are Ada.", discloses_ai=False)).text
    assert "do not volunteer that you are an AI" in stays and "plainly" not in stays


def test_only_given_sections_appear() -> None:
    composed = PromptComposer().compose(PromptContext(base="Base."))
    assert [p.section for p in composed.pieces] == ["base"]


def test_length_cap_drops_sections_from_the_end_and_keeps_the_base() -> None:
    full = PromptComposer().compose(FULL)
    no_time_or_conversation = len("\n\n".join(p.item.text for p in full.pieces[:-2]))
    capped = PromptComposer(max_length=no_time_or_conversation).compose(FULL)
    assert [p.section for p in capped.dropped] == ["time", "conversation"]
    assert capped.pieces == full.pieces[:-2]
    assert len(capped.text) <= no_time_or_conversation


def test_a_cap_below_the_base_still_keeps_the_base() -> None:
    capped = PromptComposer(max_length=5).compose(FULL)
    assert [p.section for p in capped.pieces] == ["base"]
    # the profile's facts are dropped with their section, as memory items
    assert [(p.section, p.origin_kind) for p in capped.dropped[:3]] == [
        ("user_profile", "prompt_section"), ("user_profile", "memory"), ("user_profile", "memory")]


def test_unknown_autonomy_level_is_used_as_given() -> None:
    text = PromptComposer().compose(PromptContext(base="B", autonomy="Ask me about money only.")).text
    assert "## Autonomy: Ask me about money only." in text

"""The prompt composer: the system prompt assembled from named sections.

Sections, in order: base (the persona), remembered memories, active goals, user profile, custom
instructions, tools (the tools offered, or — with meta-tools — the categories and the three-step
search / help / use workflow), workspace, capabilities, autonomy, time, conversation. Every memory
fact is a ``memory`` item of its own under its section's heading (a fact's ``section``: memories,
goals, user_profile, custom_instructions or autonomy); an ``autonomy`` fact replaces the agent's own
autonomy setting, as a user's profile decides how freely an agent may act for them. Each section enters the
context as its own ``prompt_section`` item whose origin names the section, so a section (or a
single memory fact) can be traced, diffed and removed in a counterfactual. When the composed text
exceeds ``max_length``, sections are dropped from the end — the base is always kept — and the
dropped ones are recorded as "not in context".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tracer import Item, ItemKind

from ._facts import Fact
from .errors import UserError

DROPPED_BY_LENGTH_CAP = "prompt_length_cap"
SECTION_ORDER = (
    "base", "user_profile", "custom_instructions", "tools", "workspace", "capabilities", "autonomy", "time",
    "conversation",
)

#: Sections a memory fact can belong to, in prompt order, with the heading each starts with.
FACT_SECTIONS = {
    "memories": "## What you remember from earlier conversations",
    "goals": "## The user's active goals",
    "user_profile": "## What you know about the user",
    "custom_instructions": "## Instructions you must always follow",
    "autonomy": "",
}

AUTONOMY_GUIDELINES = {
    "manual": "Ask before every action that changes anything; suggest, do not act.",
    "assisted": "Act on clear, low-risk requests; ask before anything irreversible or costly.",
    "supervised": "Act on your own for routine work; ask before payments, deletions or messages to others.",
    "autonomous": "Act on your own; report what you did. Ask only when the request is ambiguous.",
}


@dataclass
class PromptContext:
    """What the composer may draw on; every field but ``base`` is optional."""

    base: str
    discloses_ai: bool = True
    facts: Sequence[Fact] = ()
    custom_instructions: Sequence[str] = ()
    tool_summaries: Sequence[tuple[str, str]] = ()
    tool_categories: dict[str, int] | None = None  # set: the tools are reached through meta-tools
    workspace: str | None = None
    capabilities: Sequence[str] = ()
    autonomy: str | None = None
    now: datetime | None = None
    timezone_name: str | None = None
    conversation: dict[str, Any] = field(default_factory=dict)
    extra_sections: Sequence[tuple[str, str]] = ()


@dataclass(frozen=True)
class Section:
    """One composed piece: a prompt section or a memory fact, with the source its origin names."""

    item: Item
    origin_kind: str  # "prompt_section" or "memory"
    source: str
    section: str


@dataclass
class ComposedPrompt:
    """The composer's result: the pieces sent, and the pieces the length cap dropped."""

    pieces: list[Section]
    dropped: list[Section]

    @property
    def text(self) -> str:
        """The system prompt as the model sees it."""
        return "\n\n".join(p.item.text for p in self.pieces)


class PromptComposer:
    """Assembles a system prompt from sections, with an optional length cap."""

    def __init__(self, *, max_length: int | None = None) -> None:
        if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int)
                                       or max_length < 1):
            raise UserError(f"PromptComposer: max_length must be a whole number of characters >= 1 (or None), "
                            f"not {max_length!r}")
        self.max_length = max_length

    def compose(self, ctx: PromptContext) -> ComposedPrompt:
        """The pieces of the system prompt for ``ctx``."""
        sections: list[list[Section]] = []

        def section(name: str, text: str) -> Section:
            return Section(Item(ItemKind.PROMPT_SECTION, {"text": text, "section": name}), "prompt_section", name, name)

        base = ctx.base.strip()
        if ctx.discloses_ai:
            base += "\n\nIf asked, say plainly that you are an AI assistant."
        else:
            base += "\n\nStay in character; do not volunteer that you are an AI."
        sections.append([section("base", base)])
        grouped: dict[str, list[Section]] = {}
        for fact in ctx.facts:
            name = fact.section if fact.section in FACT_SECTIONS else "user_profile"
            grouped.setdefault(name, []).append(
                Section(Item(ItemKind.MEMORY, {"text": fact.text, "key": fact.key}), "memory", fact.key, name))
        for name in ("memories", "goals", "user_profile"):
            if name in grouped:
                sections.append([section(name, FACT_SECTIONS[name]), *grouped[name]])
        if ctx.custom_instructions or "custom_instructions" in grouped:
            rules = "".join(f"\n- {r}" for r in ctx.custom_instructions)
            sections.append([section("custom_instructions", FACT_SECTIONS["custom_instructions"] + rules),
                             *grouped.get("custom_instructions", [])])
        for name, text in ctx.extra_sections:
            sections.append([section(name, text)])
        if ctx.tool_categories is not None:
            sections.append([section("tools", _meta_tools_section(ctx.tool_categories))])
        elif ctx.tool_summaries:
            lines = "\n".join(f"- {n}: {d}" for n, d in ctx.tool_summaries)
            sections.append([section("tools", f"## Tools you can call\n{lines}\nCall a tool when it can answer "
                                              f"better than you can from memory.")])
        if ctx.workspace:
            sections.append([section("workspace", f"## Workspace\nFiles may be read and written only under {ctx.workspace}.")])
        if ctx.capabilities:
            sections.append([section("capabilities", "## Capabilities\n" + "\n".join(f"- {c}" for c in ctx.capabilities))])
        if "autonomy" in grouped:
            sections.append(grouped["autonomy"])
        elif ctx.autonomy:
            sections.append([section("autonomy", autonomy_text(ctx.autonomy))])
        if ctx.now is not None:
            now = ctx.now if ctx.now.tzinfo else ctx.now.replace(tzinfo=UTC)
            tz = ctx.timezone_name or now.tzname() or "UTC"
            sections.append([section("time", f"## Time\nNow: {now:%A %Y-%m-%d %H:%M} ({tz}).")])
        if ctx.conversation:
            details = "\n".join(f"- {k}: {v}" for k, v in ctx.conversation.items())
            sections.append([section("conversation", f"## Conversation\n{details}")])
        kept = sections
        dropped: list[Section] = []
        if self.max_length is not None:
            kept = list(sections)
            while len(kept) > 1 and _length(kept) > self.max_length:
                dropped = kept.pop() + dropped
        return ComposedPrompt([p for group in kept for p in group], dropped)


def _meta_tools_section(categories: dict[str, int]) -> str:
    total = sum(categories.values())
    kinds = ", ".join(f"{c or 'other'} ({n})" for c, n in categories.items()) or "none"
    return (f"## Tools\nYou can reach {total} tools ({kinds}). They are not listed here: find and use them "
            f"in three steps.\n"
            f"1. search_tools(\"keyword\") finds tools by what they do.\n"
            f"2. get_tool_help(\"tool_name\") shows a tool's parameters and an example.\n"
            f"3. use_tool(\"tool_name\", {{arguments}}) runs it. If the call fails, the error includes the "
            f"tool's parameters: fix the call and try again.")


def autonomy_text(level: str) -> str:
    """The autonomy section's text for ``level`` (a known level gets its guideline)."""
    return f"## Autonomy: {level}\n{AUTONOMY_GUIDELINES.get(level, level)}"


def _length(groups: list[list[Section]]) -> int:
    pieces = [p for g in groups for p in g]
    return sum(len(p.item.text) for p in pieces) + 2 * max(0, len(pieces) - 1)

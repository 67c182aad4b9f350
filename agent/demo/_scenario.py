"""The demo scenario: loading it from fixtures/, its calendar tool, and the agent it runs."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tracer import Recorder

from .._agent import Agent
from .._facts import Fact, InMemoryFacts
from .._memory import ConversationMemory
from ..errors import UserError
from ..providers import Provider
from ..providers._demo import OfflineDemoModel
from ..tools import Tool, ToolRegistry, tool

SCENARIOS = Path(__file__).parent  # installed with the package: `footprint demo` works from pip
DEMO_SESSION_PREFIX = "maya-"

_CALENDAR: dict[str, dict[str, Any]] = {}


@dataclass(frozen=True)
class Scenario:
    """A demo scenario as read from its JSON file."""

    name: str
    agent: str
    persona: str
    user_id: str
    clock: datetime
    timezone: str
    facts: list[Fact]
    calendar: dict[str, dict[str, Any]]
    turns: list[dict[str, Any]]
    culprit: str
    description: str


def load_scenario(path: str | os.PathLike[str] | None = None) -> Scenario:
    """Read a scenario (default: the personal-assistant one); a UserError names a bad file."""
    file = Path(path) if path else SCENARIOS / "personal_assistant.json"
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        facts = [
            Fact(f["key"], f["text"], datetime.fromisoformat(f["updated_at"]).timestamp(), "profile")
            for f in data["facts"]
        ]
        return Scenario(
            name=data["name"], agent=data["agent"], persona=data["persona"], user_id=data["user_id"],
            clock=datetime.fromisoformat(data["clock"]), timezone=data["timezone"], facts=facts,
            calendar=data["calendar"], turns=data["turns"], culprit=data["culprit"],
            description=data.get("description", ""),
        )
    except FileNotFoundError:
        raise UserError(f"demo scenario {file} not found") from None
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise UserError(f"demo scenario {file} is malformed: {exc!r}") from exc


@tool(progress="Checking the calendar…", durable=True)
async def check_availability(date: str) -> dict[str, Any]:
    """Look up the user's free slots on a day.

    Args:
        date: the day to check: today, tomorrow, or a weekday name
    """
    calendar = _CALENDAR or load_scenario().calendar
    entry = calendar.get(date.strip().lower())
    if entry is None:
        return {"day": date, "free": [], "note": "no calendar data for that day"}
    return {"day": entry["day"], "free": list(entry["free"])}


def demo_registry() -> ToolRegistry:
    """The tools the demo and the persona sandbox offer (the seed's fake ``check_availability``)."""
    return ToolRegistry([check_availability])


def default_provider() -> Provider:
    """The real model when OPENAI_API_KEY is set (OPENAI_BASE_URL for compatible servers); else the offline demo model."""
    if os.environ.get("OPENAI_API_KEY"):
        from ..providers._openai import OpenAIProvider

        return OpenAIProvider(os.environ.get("FOOTPRINT_MODEL") or "gpt-4o-mini")
    return OfflineDemoModel()


def build_demo_agent(
    scenario: Scenario,
    *,
    provider: Provider,
    recorder: Recorder | None = None,
    session_id: str | None = None,
    memory: ConversationMemory | None = None,
    tools: list[Tool] | None = None,
) -> Agent:
    """The scenario's personal assistant: persona, stale profile facts, the calendar tool, a fixed clock."""
    _CALENDAR.clear()
    _CALENDAR.update(scenario.calendar)
    return Agent(
        scenario.agent,
        provider=provider,
        persona=scenario.persona,
        tools=tools if tools is not None else [check_availability],
        facts=InMemoryFacts({scenario.user_id: scenario.facts}),
        user_id=scenario.user_id,
        memory=memory,
        conversation_id=session_id,
        session_id=session_id,
        clock=lambda: scenario.clock,
        recorder=recorder,
        model=getattr(provider, "model", "") or "",
    )

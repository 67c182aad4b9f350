"""The sandbox's tools: one fake, ``check_availability``, to exercise tool calls with no backend."""

from __future__ import annotations

from typing import Any

from agent import Tool, ToolRegistry, tool

_SLOTS = {
    "today": ["16:00"],
    "tomorrow": ["10:00", "15:30"],
    "monday": ["09:00", "14:00"],
    "tuesday": ["11:00"],
    "wednesday": [],
    "thursday": ["10:30", "13:00", "17:00"],
    "friday": ["09:30"],
    "saturday": [],
    "sunday": [],
}


@tool(progress="Checking the calendar…", durable=True)
async def check_availability(date: str) -> dict[str, Any]:
    """Look up free slots in the calendar on a day (fake data: the sandbox has no real calendar).

    Args:
        date: the day to check: today, tomorrow, or a weekday name
    """
    day = date.strip().lower()
    if day not in _SLOTS:
        return {"date": date, "free": [], "note": "the sandbox calendar only knows today, tomorrow and weekdays"}
    return {"date": day, "free": list(_SLOTS[day])}


def sandbox_tools() -> list[Tool]:
    """The tools a sandbox persona may be given."""
    return [check_availability]


def sandbox_registry() -> ToolRegistry:
    """A registry of the sandbox tools (persona configs name tools; the registry decides what they do)."""
    return ToolRegistry(sandbox_tools())

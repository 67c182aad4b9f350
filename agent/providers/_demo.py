"""The offline demo model: deterministic, reads its context, and says so.

It is not a language model. It follows a handful of readable rules over the context it is sent —
the latest user message, the memory facts in the system prompt, the conversation and any tool
results — so that what it answers depends on what it saw: remove a context item and its answer can
change. Every run it makes carries the label ``offline-demo``.

Like many real models, it trusts a fact stated in its system prompt over something the user said
earlier in the conversation. The demo is built around that habit.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator

from tracer import ItemKind

from ._base import (
    ModelRequest,
    ModelResponse,
    Provider,
    ResponseDone,
    StreamEvent,
    TextDelta,
    ToolCall,
    Usage,
)

MODEL_NAME = "offline-demo"
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_AVAILABILITY = re.compile(r"\b(free|slot|slots|availab\w*|calendar|schedule|busy)\b", re.I)
_FACT_CITY = re.compile(r"\blives? in ([A-Z][\w\-]+)")
_SAID_CITY = re.compile(r"\b(?:moved to|live in|living in|now in|relocated to) ([A-Z][\w\-]+)")
_MEET_WITH = re.compile(r"\bwith ([A-Z][a-z]+)")


def _texts(request: ModelRequest, *kinds: str) -> list[str]:
    return [ci.item.text for ci in request.context if ci.item.kind in kinds]


def home_city(request: ModelRequest) -> tuple[str | None, str]:
    """Where the user lives as this model sees it, and where it read that ("memory" or "conversation")."""
    for text in _texts(request, ItemKind.MEMORY):
        match = _FACT_CITY.search(text)
        if match:
            return match.group(1), "memory"
    for text in reversed(_texts(request, ItemKind.USER)):
        match = _SAID_CITY.search(text)
        if match:
            return match.group(1), "conversation"
    return None, "nowhere"


def _turn(request: ModelRequest) -> tuple[str, list[dict[str, object]]]:
    """The latest user message and the tool results that came after it."""
    user = ""
    results: list[dict[str, object]] = []
    for ci in request.context:
        if ci.item.kind == ItemKind.USER:
            user, results = str(ci.item.body.get("text", "")), []
        elif ci.item.kind == ItemKind.TOOL_RESULT:
            results.append(dict(ci.item.body))
    return user, results


def _days(text: str) -> list[str]:
    lowered = text.lower()
    found = [d for d in ("today", "tomorrow", *_WEEKDAYS) if re.search(rf"\b{d}\b", lowered)]
    return found or ["tomorrow"]


def _availability_answer(user: str, results: list[dict[str, object]], request: ModelRequest) -> str:
    parts = []
    first_slot = None
    for result in results:
        if result.get("is_error"):
            parts.append(f"I could not read your calendar ({result.get('content')}).")
            continue
        try:
            data = json.loads(str(result.get("content", "")))
        except json.JSONDecodeError:
            parts.append(f"The calendar said: {result.get('content')}.")
            continue
        slots = data.get("free") or []
        day = data.get("day") or data.get("date") or "that day"
        if slots:
            first_slot = first_slot or (day, slots[0])
            parts.append(f"You're free {day} at {' and '.join(slots)}.")
        else:
            parts.append(f"You have no free slot {day}.")
    answer = " ".join(parts)
    if re.search(r"\b(meet|where|café|cafe|coffee|lunch)\b", user, re.I):
        who = _MEET_WITH.search(user)
        name = who.group(1) if who else "them"
        city, _ = home_city(request)
        when = f" at {first_slot[1]}" if first_slot else ""
        if city:
            answer += f" How about meeting {name}{when} at a café near your home in {city}?"
        else:
            answer += f" Where would you like to meet {name}?"
    return answer


class OfflineDemoModel(Provider):
    """A deterministic rule-following stand-in for a model; every run it makes is labelled."""

    name = "offline-demo"
    type = "local"
    labels = ("offline-demo",)
    model = MODEL_NAME

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer by the rules in the module docstring."""
        user, results = _turn(request)
        offered = {d.get("name") for d in request.tool_definitions()}
        tool_calls: tuple[ToolCall, ...] = ()
        if results:
            text = _availability_answer(user, results, request)
        elif _AVAILABILITY.search(user) and "check_availability" in offered:
            days = _days(user)
            tool_calls = tuple(
                ToolCall(f"call_{i + 1}_{day}", "check_availability", json.dumps({"date": day}))
                for i, day in enumerate(days)
            )
            text = ""
        elif _SAID_CITY.search(user):
            city = _SAID_CITY.search(user).group(1)  # type: ignore[union-attr]
            text = f"Congratulations on the move to {city}! I'll keep that in mind."
        elif re.search(r"where do i live|my (home|city)", user, re.I):
            city, source = home_city(request)
            text = f"You live in {city} (from {source})." if city else "You haven't told me where you live."
        elif re.search(r"are you (an? )?(ai|bot|human)", user, re.I):
            text = "I'm the offline demo model: a few deterministic rules, not a real AI model."
        else:
            text = (
                f"(offline demo model) I read your message: {user!r}. I can check your availability "
                f"and suggest where to meet; set OPENAI_API_KEY for a real model."
            )
        chars_in = sum(len(ci.item.text) for ci in request.context)
        chars_out = len(text) + sum(len(c.arguments) for c in tool_calls)
        return ModelResponse(
            text=text, tool_calls=tool_calls, finish_reason="tool_calls" if tool_calls else "stop",
            usage=Usage((chars_in + 3) // 4, (chars_out + 3) // 4), model=MODEL_NAME,
            response_id=f"demo-{request.key[:12]}", provider=self.name,
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """The same answer, streamed word by word."""
        response = await self.complete(request)
        for word in re.findall(r"\S+\s*", response.text):
            yield TextDelta(word)
        yield ResponseDone(response)

    async def list_models(self) -> list[str]:
        """The one model it offers."""
        return [MODEL_NAME]

"""Builders for bus tests: messages, a recording transport, a fixed clock.

Test modules cannot import each other (no ``__init__.py``), so the builders are fixtures.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from agent.bus import MessageEvent, OutboundEvent


def make_message(
    text: str = "hi", *, source: str = "whatsapp", endpoint: str = "+48100", sender: str = "anna",
    message_id: str | int = "1", age: float = 0.0, **extra: Any,
) -> MessageEvent:
    """A message written ``age`` seconds ago (by the real clock)."""
    return MessageEvent(source, endpoint, sender, str(message_id), text, time.time() - age, **extra)


@pytest.fixture
def message() -> Callable[..., MessageEvent]:
    """:func:`make_message` as a fixture."""
    return make_message


class Sent(list[OutboundEvent]):
    """A transport that keeps what it is sent."""

    def __call__(self, event: OutboundEvent) -> None:
        self.append(event)

    def texts(self) -> list[str]:
        return [e.text for e in self]


@pytest.fixture
def sent() -> Sent:
    """A recording transport."""
    return Sent()

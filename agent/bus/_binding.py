"""What an agent hears on the bus, and how it answers there.

An :class:`AgentBinding` lists :class:`SourceBinding`\\ s — a source name plus exactly one of an
endpoint, an endpoint prefix or a task name — and says whether the agent hears the heartbeat. Each
source binding says whether the agent *claims* what arrives there (nobody started later sees it)
or *shares* it (handles it and lets it pass on), and on which channel an answer goes out; without
a reply channel the agent stays silent there.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ._events import InboundEvent, MessageEvent, TaskEvent
from .errors import BindingError


@dataclass(frozen=True)
class SourceBinding:
    """One place an agent listens: ``source`` plus one of ``endpoint``, ``prefix`` or ``task``.

    ``prefix=""`` hears every endpoint of the source. ``claim`` (default) takes the event away from
    agents started later; ``claim=False`` shares it. ``reply_channel`` is the channel an answer is
    sent on (to the message's endpoint); ``None`` keeps the agent silent there.
    """

    source: str
    endpoint: str | None = None
    prefix: str | None = None
    task: str | None = None
    claim: bool = True
    reply_channel: str | None = None

    def __post_init__(self) -> None:
        if not self.source:
            raise BindingError("a source binding needs a source name")
        given = [name for name in ("endpoint", "prefix", "task") if getattr(self, name) is not None]
        if len(given) != 1:
            raise BindingError(
                f"source binding {self.source!r} must give exactly one of endpoint, prefix or task "
                f"(got {', '.join(given) or 'none'}); use prefix='' to hear every endpoint"
            )

    def matches(self, event: InboundEvent) -> bool:
        """True when ``event`` arrived where this binding listens (a heartbeat never matches a source)."""
        if isinstance(event, TaskEvent):
            return event.source == self.source and self.task == event.task
        if not isinstance(event, MessageEvent) or event.source != self.source or self.task is not None:
            return False
        if self.endpoint is not None:
            return event.endpoint == self.endpoint
        return event.endpoint.startswith(self.prefix or "")

    @property
    def silent(self) -> bool:
        """True when the agent never answers what arrives here."""
        return self.reply_channel is None

    def describe(self) -> str:
        """A short description, e.g. ``whatsapp:+48* claim -> whatsapp``."""
        if self.endpoint is not None:
            where = f"{self.source}:{self.endpoint}"
        elif self.task is not None:
            where = f"{self.source} task {self.task}"
        else:
            where = f"{self.source}:{self.prefix}*"
        answer = f" -> {self.reply_channel}" if self.reply_channel else " (silent)"
        return f"{where} {'claim' if self.claim else 'share'}{answer}"


@dataclass(frozen=True, init=False)
class AgentBinding:
    """The sources an agent hears, in order (the first that matches an event decides), and the heartbeat."""

    sources: tuple[SourceBinding, ...]
    heartbeat: bool

    def __init__(self, sources: Iterable[SourceBinding] = (), *, heartbeat: bool = False) -> None:
        sources = tuple(sources)
        for source in sources:
            if not isinstance(source, SourceBinding):
                raise BindingError(f"an agent binding takes SourceBinding objects, got {type(source).__name__}")
        if not sources and not heartbeat:
            raise BindingError("an agent binding hears nothing: give at least one source or heartbeat=True")
        object.__setattr__(self, "sources", sources)
        object.__setattr__(self, "heartbeat", heartbeat)

    def route(self, event: InboundEvent) -> SourceBinding | None:
        """The first source binding that matches ``event``, or None."""
        for source in self.sources:
            if source.matches(event):
                return source
        return None

    def describe(self) -> str:
        """Every source on its own line, then whether the heartbeat is heard."""
        lines = [s.describe() for s in self.sources]
        if self.heartbeat:
            lines.append("heartbeat")
        return "\n".join(lines)

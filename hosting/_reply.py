"""What a turn replies: how it ended (answered, awaiting a person, failed, cancelled, interrupted)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tracer import RedactionPolicy


@dataclass
class TurnReply:
    """How a turn ended.

    ``status`` is ``answered``, ``awaiting`` (paused on ``question``: unfinished work, never a
    failure — send the answer as a ``decision``), ``failed`` (``error`` says why) or
    ``cancelled``; ``interrupted`` when the host stopped during the turn and stored it to finish
    on the session's next request. ``recovered`` describes an interrupted turn this request
    finished first; ``replayed`` is True when a ``turn_id`` that already ran got its stored reply.
    """

    status: str
    session_id: str | None
    run_id: str | None
    answer: str = ""
    question: str | None = None
    error: str | None = None
    recovered: dict[str, Any] | None = None
    replayed: bool = False
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        """True when the turn answered."""
        return self.status == "answered"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (the HTTP reply body)."""
        # by hand: dataclasses.asdict deep-copies, and this runs once per turn
        return {"status": self.status, "session_id": self.session_id, "run_id": self.run_id,
                "answer": self.answer, "question": self.question, "error": self.error,
                "recovered": self.recovered, "replayed": self.replayed}

    def masked(self, policy: RedactionPolicy) -> TurnReply:
        """This reply with credentials masked in its texts (what the host sends and stores)."""
        return TurnReply(
            self.status, self.session_id, self.run_id, answer=policy.text(self.answer),
            question=None if self.question is None else policy.text(self.question),
            error=None if self.error is None else policy.text(self.error),
            recovered=None if self.recovered is None else policy.value(self.recovered),
            replayed=self.replayed, extra=self.extra,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TurnReply:
        """From :meth:`to_dict`'s form."""
        return cls(
            str(data.get("status") or "answered"), data.get("session_id"), data.get("run_id"),
            answer=data.get("answer") or "", question=data.get("question"), error=data.get("error"),
            recovered=data.get("recovered"), replayed=bool(data.get("replayed")),
        )

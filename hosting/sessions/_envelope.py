"""The envelope: everything the host keeps about one session, as it holds it in memory.

A session's conversation (its messages as context items, and ``agent.Conversation``'s other
fields), the paused run when the session waits for a person (``agent.PauseState.to_dict()``), the
marker of the turn in flight or last finished, tool results persisted while a tool batch was still
running (``sync`` durability), a version for optimistic concurrency, and timestamps. An envelope's
parts are read-only by convention (a store may hand out copies that share them); the host builds
new ones to save.

Stores do not keep envelopes whole: they keep a session's messages as records appended one by one
and the rest as one small value (see :mod:`hosting.sessions._records`). An envelope therefore
knows which of its messages are already stored (``stored``, the messages at ``version``), so a
save appends only the new ones. :meth:`Envelope.decode` reads the whole-envelope text earlier
versions stored (``footprint.session/1``), which stores migrate on open.

An envelope may hold only the conversation's recent messages: ``older`` (a recorder's receipt,
:class:`tracer.Recorded`) names the first ``older.count``, which a recorded call's window left out,
and ``messages`` are the ones after them (the store has them all). A host's cache keeps envelopes
so (:meth:`Envelope.trimmed`): what a long session holds is its window, not its history.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from typing import Any

from agent import Conversation, LeftBehind, PauseState
from tracer import ContextItem

from ..errors import UnreadableEnvelopeError

FORMAT = "footprint.session/1"  # the whole-envelope text of earlier versions


@dataclass
class SessionSummary:
    """One line of :meth:`SessionStore.list`: enough to list sessions without reading conversations."""

    session_id: str
    version: int
    created_at: float
    updated_at: float
    status: str | None  # the status of the session's last run (answered, awaiting, failed, ...)


@dataclass
class Envelope:
    """A session as stored: conversation, pause, turn marker, version and timestamps.

    ``version`` is the version the envelope was loaded at (0: never saved). A store saves it only
    when the stored version still equals it, and returns the saved envelope at ``version + 1``.
    ``turn`` marks the turn in flight (``state="running"``), interrupted by a shutdown
    (``"interrupted"``) or finished (``"done"``, with its reply).
    """

    session_id: str
    conversation: dict[str, Any]
    pause: dict[str, Any] | None = None
    version: int = 0
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    status: str | None = None
    last_run_id: str | None = None
    turn: dict[str, Any] | None = None
    tool_results: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the conversation's messages as parsed context items (immutable), when known: parsing them
    # again re-hashes every item, the most expensive part of hydrating a long conversation
    messages: tuple[ContextItem, ...] | None = field(default=None, repr=False, compare=False)
    # the messages as stored at ``version`` (what a save appends after); None: not known here
    stored: tuple[ContextItem, ...] | None = field(default=None, repr=False, compare=False)
    # the first older.count messages, not held (``messages`` come after them); see the module's docstring
    older: LeftBehind | None = field(default=None, repr=False, compare=False)
    stored_at: int = field(default=0, repr=False, compare=False)  # the messages before ``stored``
    # the recorder's receipt for the messages the last call's window left out (they may be let go)
    recorded: LeftBehind | None = field(default=None, repr=False, compare=False)

    # ------------------------------------------------------------------ reading the parts

    def conversation_obj(self) -> Conversation:
        """The conversation as an :class:`agent.Conversation` (a fresh object each call).

        ``conversation`` (the dict) is read-only by convention: an envelope shares it with copies.
        """
        if self.messages is None:
            return Conversation.from_dict(self.conversation)
        data = self.conversation
        return Conversation(
            id=str(data["id"]), system_prompt=data.get("system_prompt"), messages=list(self.messages),
            metadata=dict(data.get("metadata") or {}), created_at=float(data.get("created_at") or 0.0),
            updated_at=float(data.get("updated_at") or 0.0), older=self.older, recorded=self.recorded,
        )

    @property
    def offset(self) -> int:
        """How many messages come before the ones held (those ``older`` names)."""
        return self.older.count if self.older is not None else 0

    def trimmed(self) -> tuple[Envelope, tuple[ContextItem, ...]]:
        """This (saved or loaded) envelope holding only the messages after those ``recorded`` names,
        and the messages it let go of (none when it holds no more than that)."""
        recorded, held = self.recorded, self.held()
        cut = recorded.count - self.offset if recorded is not None else 0
        if recorded is None or cut < 0 or cut > len(held) or self.stored is not held:
            return self, ()
        if cut == 0:  # (nothing more left out, and the recorder's latest receipt names it)
            return (self if recorded is self.older else self.replace(older=recorded)), ()
        rest = held[cut:]
        return self.replace(messages=rest, stored=rest, older=recorded, stored_at=recorded.count), held[:cut]

    def pause_state(self) -> PauseState | None:
        """The paused run, when the session waits for a person."""
        return None if self.pause is None else PauseState.from_dict(self.pause)

    def copy(self) -> Envelope:
        """A shallow copy: the parts (conversation, pause, turn, results) are read-only and shared."""
        new = object.__new__(Envelope)
        new.__dict__.update(self.__dict__)
        return new

    def replace(self, **changes: Any) -> Envelope:
        """A shallow copy with ``changes`` (fields, as :func:`dataclasses.replace` takes them)."""
        unknown = changes.keys() - _FIELDS
        if unknown:
            raise TypeError(f"Envelope has no field(s) {', '.join(sorted(unknown))}")
        new = self.copy()
        new.__dict__.update(changes)
        return new

    def successor(
        self, conversation: Conversation, *, pause: dict[str, Any] | None, status: str | None,
        last_run_id: str | None, turn: dict[str, Any] | None, tool_results: dict[str, dict[str, Any]],
    ) -> Envelope:
        """The envelope to save next for this session, holding ``conversation`` as it stands now.

        Version and timestamps are this envelope's (a store saves it against this version), and
        so are the messages it holds as stored: a save appends only what came after them.
        """
        data = Conversation(conversation.id, conversation.system_prompt, [], conversation.metadata,
                            conversation.created_at, conversation.updated_at).to_dict()
        return Envelope(self.session_id, data, pause, self.version, self.created_at, self.updated_at,
                        status=status, last_run_id=last_run_id, turn=turn, tool_results=tool_results,
                        messages=tuple(conversation.messages), stored=self.held() if self.version else (),
                        older=conversation.older, stored_at=self.offset if self.version else 0,
                        recorded=conversation.recorded)

    def held(self) -> tuple[ContextItem, ...]:
        """The messages this envelope holds (parsed from ``conversation`` when they are not at hand)."""
        if self.messages is None:
            self.messages = tuple(Conversation.from_dict(self.conversation).messages)
        return self.messages

    @property
    def message_count(self) -> int:
        """How many messages the conversation has (held or not)."""
        return self.offset + len(self.held())

    @property
    def awaiting(self) -> bool:
        """True when the session is paused on a question."""
        return self.pause is not None

    def summary(self) -> SessionSummary:
        """The list line of this envelope."""
        return SessionSummary(self.session_id, self.version, self.created_at, self.updated_at, self.status)

    # ------------------------------------------------------------------ the form earlier versions stored

    @classmethod
    def decode(cls, session_id: str, text: str | bytes, *, version: int, updated_at: float) -> Envelope:
        """An envelope from the whole-envelope text earlier versions stored (``footprint.session/1``).

        :class:`UnreadableEnvelopeError` names the session when it cannot be read.

        The conversation and the pause state are parsed here, so a store that returns an envelope
        returns one the host can run.
        """
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise UnreadableEnvelopeError(session_id, f"not JSON: {exc}") from exc
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise UnreadableEnvelopeError(session_id, f"not a {FORMAT} envelope")
        conversation = data.get("conversation")
        try:
            parsed = Conversation.from_dict(conversation)  # type: ignore[arg-type]
        except ValueError as exc:
            raise UnreadableEnvelopeError(session_id, f"its conversation is malformed: {exc}") from exc
        pause = data.get("pause")
        if pause is not None:
            try:
                if not isinstance(pause, dict):
                    raise ValueError("the paused run is not an object")
                PauseState.from_dict(pause)
            except (ValueError, TypeError) as exc:
                raise UnreadableEnvelopeError(session_id, f"its paused run is malformed: {exc}") from exc
        turn = data.get("turn")
        results = data.get("tool_results") or {}
        if (turn is not None and not isinstance(turn, dict)) or not isinstance(results, dict):
            raise UnreadableEnvelopeError(session_id, "its turn marker or tool results are malformed")
        stored_id = data.get("session_id")
        if stored_id != session_id:
            raise UnreadableEnvelopeError(session_id, f"the envelope belongs to session {stored_id!r}")
        envelope = cls(
            session_id=session_id,
            conversation=conversation,  # type: ignore[arg-type]
            pause=pause,
            version=version,
            created_at=float(data.get("created_at") or updated_at),
            updated_at=updated_at,
            status=data.get("status"),
            last_run_id=data.get("last_run_id"),
            turn=turn,
            tool_results=results,
            messages=tuple(parsed.messages),
        )
        return envelope


_FIELDS = frozenset(f.name for f in dataclasses.fields(Envelope) if f.init)

"""The envelope: everything a session store keeps about one session.

A session's conversation (``agent.Conversation.to_dict()``), the paused run when the session waits
for a person (``agent.PauseState.to_dict()``), the marker of the turn in flight or last finished,
tool results persisted while a tool batch was still running (``sync`` durability), a version for
optimistic concurrency, and timestamps. Stores keep it as JSON text and never interpret it beyond
:meth:`Envelope.decode`, which is where "unreadable" is decided. An envelope's parts are read-only
by convention (a store may hand out copies that share them); the host builds new ones to save.

A session is saved after every turn, and its conversation only grows, so the stored form is built
incrementally: :meth:`Envelope.successor` keeps the message dicts of the messages it already held,
and :meth:`Envelope.encode` keeps the JSON text of each message dict it encoded (checked by
identity), so saving a long conversation encodes only its new messages. The text is the same as
encoding the whole envelope at once.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent import Conversation, PauseState
from tracer import ContextItem, context_item_to_dict

from ..errors import UnreadableEnvelopeError

FORMAT = "footprint.session/1"


def _make_dumps() -> Callable[[Any], str]:
    """``json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str)``, without its per-call setup.

    json builds a new C encoder on every call, which costs more than encoding a small dict; this
    one is built once (without the circular-reference check: an envelope's parts come from JSON).
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    try:
        c_encoder = make(None, str, json.encoder.encode_basestring, None, ":", ",", False, False, True)  # type: ignore[misc]
    except TypeError:  # no C accelerator (another Python), or another signature: the plain call
        return json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode

    def dumps(obj: Any) -> str:
        return "".join(c_encoder(obj, 0))

    return dumps


_dumps = _make_dumps()


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
    # the message dicts last encoded and their JSON texts (a cache: reused when a dict is the same object)
    _texts: tuple[tuple[Any, ...], tuple[str, ...]] | None = field(default=None, init=False, repr=False,
                                                                   compare=False)

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
            updated_at=float(data.get("updated_at") or 0.0),
        )

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

        Version and timestamps are this envelope's (a store saves it against this version). The
        messages this envelope already held — the same objects, at the same places — keep their
        stored form, so only the messages added since are converted (and later encoded).
        """
        messages = tuple(conversation.messages)
        data = Conversation(conversation.id, conversation.system_prompt, [], conversation.metadata,
                            conversation.created_at, conversation.updated_at).to_dict()
        held = self.messages
        held_dicts = self.conversation.get("messages") if held is not None else None
        kept = 0
        if held is not None and isinstance(held_dicts, list) and len(held_dicts) == len(held):
            limit = min(len(held), len(messages))
            while kept < limit and messages[kept] is held[kept]:
                kept += 1
            data["messages"] = held_dicts[:kept] + [context_item_to_dict(m) for m in messages[kept:]]
        else:
            data["messages"] = [context_item_to_dict(m) for m in messages]
        new = Envelope(self.session_id, data, pause, self.version, self.created_at, self.updated_at,
                       status=status, last_run_id=last_run_id, turn=turn, tool_results=tool_results,
                       messages=messages)
        new._texts = self._texts
        return new

    @property
    def awaiting(self) -> bool:
        """True when the session is paused on a question."""
        return self.pause is not None

    def summary(self) -> SessionSummary:
        """The list line of this envelope."""
        return SessionSummary(self.session_id, self.version, self.created_at, self.updated_at, self.status)

    # ------------------------------------------------------------------ the stored form

    def encode(self) -> str:
        """The JSON text a store keeps (version and timestamps are kept beside it, too).

        The same text as :meth:`encode_whole`; the conversation's messages are encoded one by one,
        and the text of a message dict encoded before (by this envelope or the one it came from)
        is reused.
        """
        conversation = self.conversation
        messages = conversation.get("messages") if type(conversation) is dict else None
        if type(messages) is not list or next(reversed(conversation)) != "messages":
            return self.encode_whole()  # not the shape Conversation.to_dict makes: in one go
        head = {k: v for k, v in conversation.items() if k != "messages"}
        texts = ",".join(self._message_texts(messages))
        conversation_text = _dumps(head)[:-1] + ("," if head else "") + '"messages":[' + texts + "]}"
        rest = _dumps({
            "pause": self.pause, "status": self.status, "last_run_id": self.last_run_id, "turn": self.turn,
            "tool_results": self.tool_results, "created_at": self.created_at,
        })
        return (_dumps({"format": FORMAT, "session_id": self.session_id})[:-1] + ',"conversation":'
                + conversation_text + "," + rest[1:])

    def _message_texts(self, dicts: Sequence[Any]) -> tuple[str, ...]:
        known_dicts, known_texts = self._texts or ((), ())
        texts = tuple(
            known_texts[i] if i < len(known_dicts) and known_dicts[i] is d else _dumps(d)
            for i, d in enumerate(dicts)
        )
        self._texts = (tuple(dicts), texts)
        return texts

    def encode_whole(self) -> str:
        """The JSON text a store keeps, encoded in one go by :func:`json.dumps` (what :meth:`encode` equals)."""
        return json.dumps(
            {
                "format": FORMAT,
                "session_id": self.session_id,
                "conversation": self.conversation,
                "pause": self.pause,
                "status": self.status,
                "last_run_id": self.last_run_id,
                "turn": self.turn,
                "tool_results": self.tool_results,
                "created_at": self.created_at,
            },
            ensure_ascii=False,
            separators=(",", ":"),
            default=str,
        )

    @classmethod
    def decode(cls, session_id: str, text: str | bytes, *, version: int, updated_at: float) -> Envelope:
        """An envelope from its stored text; :class:`UnreadableEnvelopeError` names the session otherwise.

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

"""Personas of the sandbox: saved agents (name, persona, disclosure, tools) and their conversations."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from agent import Conversation
from tracer import RedactionPolicy, Store, new_id

from ..errors import SandboxError
from ._kv import KeyValue

PERSONAS = "sandbox.persona"
CONVERSATIONS = "sandbox.conversation"
FIELDS = ("name", "persona", "discloses_ai", "tools")


#: The longest persona name (the sandbox's forms take no more, so nothing typed is lost to a refusal).
MAX_NAME = 64


@dataclass(frozen=True)
class Persona:
    """A saved agent of the sandbox."""

    id: str
    name: str
    persona: str
    discloses_ai: bool = True
    tools: tuple[str, ...] = ()
    created_at: float = 0.0
    updated_at: float = 0.0
    session: str = ""

    @property
    def conversation_id(self) -> str:
        """The id of its conversation, also the session id of every run it records.

        Made from the name it had when created (so the runs table shows who it was) and kept
        when the persona is renamed, so its conversation and recorded runs stay one session.
        """
        return self.session or f"sandbox-{self.id}"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form it is saved in."""
        return {
            "format": "footprint.persona/1", "id": self.id, "name": self.name, "persona": self.persona,
            "discloses_ai": self.discloses_ai, "tools": list(self.tools), "created_at": self.created_at,
            "updated_at": self.updated_at, "session": self.conversation_id,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Persona:
        """A persona from its saved form; a SandboxError names what is wrong."""
        try:
            return cls(
                id=str(data["id"]), name=str(data["name"]), persona=str(data["persona"]),
                discloses_ai=bool(data.get("discloses_ai", True)), tools=tuple(data.get("tools") or ()),
                created_at=float(data.get("created_at") or 0.0), updated_at=float(data.get("updated_at") or 0.0),
                session=str(data.get("session") or ""),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise SandboxError(f"a saved persona is malformed ({exc!r}); delete it and create it again") from exc


class PersonaStore:
    """Create, list, edit and delete personas, and keep each one's conversation, in a store."""

    def __init__(
        self, store: Store, *, known_tools: Iterable[str] = (), clock: Callable[[], float] = time.time
    ) -> None:
        self.kv = KeyValue(store)
        self.known_tools = tuple(known_tools)
        self._clock = clock

    @property
    def store(self) -> Store:
        """The store it saves to."""
        return self.kv.store

    def list(self) -> list[Persona]:
        """Every persona, by name."""
        return sorted((Persona.from_dict(v) for _, v in self.kv.items(PERSONAS)), key=lambda p: p.name.lower())

    def get(self, persona_id: str) -> Persona:
        """The persona with ``persona_id``."""
        value = self.kv.get(PERSONAS, persona_id)
        if value is None:
            raise SandboxError(f"no persona {persona_id} in {self.store.path} (it may have been deleted)")
        return Persona.from_dict(value)

    def find(self, name: str) -> Persona | None:
        """The persona called ``name`` (any case), or None."""
        wanted = name.strip().lower()
        return next((p for p in self.list() if p.name.lower() == wanted), None)

    def _check(self, persona: Persona) -> Persona:
        name = persona.name.strip()
        if not name:
            raise SandboxError("a persona needs a name")
        if len(name) > MAX_NAME:
            raise SandboxError(f"the name {name[:20]!r}… is {len(name)} characters; keep it to {MAX_NAME}")
        other = self.find(name)
        if other is not None and other.id != persona.id:
            raise SandboxError(f"there is already a persona called {other.name!r}; pick another name")
        if not persona.persona.strip():
            raise SandboxError(f"persona {name!r} needs a persona text (who it is and how it talks)")
        unknown = [t for t in persona.tools if self.known_tools and t not in self.known_tools]
        if unknown:
            raise SandboxError(
                f"persona {name!r}: unknown tool(s) {', '.join(unknown)}; the sandbox has "
                f"{', '.join(self.known_tools) or 'none'}"
            )
        return replace(persona, name=name, persona=persona.persona.strip())

    def create(self, name: str, persona: str, *, discloses_ai: bool = True, tools: Iterable[str] = ()) -> Persona:
        """Save a new persona."""
        now = self._clock()
        persona_id = new_id("p")
        slug = re.sub(r"[^a-z0-9]+", "-", name.strip().lower()).strip("-")[:12] or "persona"
        record = self._check(Persona(persona_id, name, persona, discloses_ai, tuple(tools), now, now,
                                     session=f"{slug}-{persona_id[-4:]}"))
        self.kv.put(PERSONAS, record.id, record.to_dict())
        return record

    def update(self, persona_id: str, **changes: Any) -> Persona:
        """Change some of ``name``, ``persona``, ``discloses_ai``, ``tools``."""
        unknown = set(changes) - set(FIELDS)
        if unknown:
            raise SandboxError(f"a persona has no field {', '.join(sorted(unknown))} (fields: {', '.join(FIELDS)})")
        if "tools" in changes:
            changes["tools"] = tuple(changes["tools"])
        record = self._check(replace(self.get(persona_id), **changes, updated_at=self._clock()))
        self.kv.put(PERSONAS, record.id, record.to_dict())
        return record

    def delete(self, persona_id: str) -> Persona:
        """Remove a persona and its conversation (the runs it recorded stay in the store)."""
        record = self.get(persona_id)
        self.kv.delete(PERSONAS, persona_id)
        self.kv.delete(CONVERSATIONS, persona_id)
        return record

    def load_conversation(self, persona_id: str) -> Conversation | None:
        """The persona's saved conversation, or None when it has not chatted yet."""
        value = self.kv.get(CONVERSATIONS, persona_id)
        if value is None:
            return None
        try:
            return Conversation.from_dict(value)
        except ValueError as exc:
            raise SandboxError(
                f"the saved conversation of persona {persona_id} is unreadable ({exc}); it was not resumed"
            ) from exc

    def save_conversation(self, persona_id: str, conversation: Conversation,
                          redaction: RedactionPolicy | None = None) -> None:
        """Save the persona's conversation (replacing the last save), masked by ``redaction`` (the
        default policy when None): no credential a message or a reply holds is kept."""
        policy = redaction if redaction is not None else RedactionPolicy()
        self.kv.put(CONVERSATIONS, persona_id, policy.value(conversation.to_dict()))

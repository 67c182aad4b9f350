"""Personal memory: what an assistant knows about each user, as named records.

A user's memory is a set of :class:`MemoryRecord`, each of one kind:

    identity             who the user is (name, pronouns, occupation, ...), one record per field
    fact                 a fact about the user ("lives in Berlin")
    communication_style  how they like to be answered (tone, length, language, ...)
    interest             something they care about
    timezone             their IANA time zone (one record)
    goal                 something they are working towards; ``status`` active, done or dropped
    memory               something remembered from an earlier conversation; ``importance`` 0-1
    custom_instruction   a rule every answer must follow
    autonomy_level       how freely an agent may act for them: manual, assisted, supervised, autonomous

A record is named by ``kind/name`` within its user, and its :attr:`MemoryRecord.source`
(``personal:<user>/<kind>/<name>``) is what the origin of every context item built from it names,
so `why` and blame lead back to the exact record. :class:`PersonalMemory` is the store interface;
:class:`InMemoryPersonalMemory` keeps records in a dict, and the host's gateway keeps them in its
database.
"""

from __future__ import annotations

import re
import time
import uuid
import zoneinfo
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from tracer import RedactionPolicy
from tracer.errors import quoted

from ._prompt import AUTONOMY_GUIDELINES
from .errors import PersonalMemoryError

_POLICY = RedactionPolicy()  # the credential masking every store applies before it keeps anything
_NOT_A_SECRET = ("looks like a credential (an API key or a token): names and ids are stored and shown as given, "
                 "so use one that is not a secret")

#: Every record kind, in the order a profile lists them, with the prompt section it is injected into.
RECORD_KINDS: dict[str, str] = {
    "identity": "user_profile",
    "fact": "user_profile",
    "communication_style": "user_profile",
    "interest": "user_profile",
    "timezone": "user_profile",
    "goal": "goals",
    "memory": "memories",
    "custom_instruction": "custom_instructions",
    "autonomy_level": "autonomy",
}
#: Kinds a user has at most one of (their record's name is the kind itself).
SINGLE_KINDS = frozenset({"timezone", "autonomy_level"})
GOAL_STATUSES = ("active", "done", "dropped")
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@\-]{0,99}$")
USER_PATTERN = NAME_PATTERN
MAX_TEXT = 4_000


@dataclass(frozen=True)
class MemoryRecord:
    """One named piece of a user's personal memory (see the module docstring for the kinds)."""

    user_id: str
    kind: str
    name: str
    text: str
    status: str = "active"
    importance: float = 0.5
    updated_at: float = field(default_factory=time.time)

    @property
    def key(self) -> str:
        """``kind/name``: the record's name within its user."""
        return f"{self.kind}/{self.name}"

    @property
    def source(self) -> str:
        """What the origin of an item built from this record names: ``personal:<user>/<kind>/<name>``."""
        return f"personal:{self.user_id}/{self.kind}/{self.name}"

    def to_dict(self) -> dict[str, object]:
        """The JSON-ready form (what the gateway's REST API returns)."""
        return {"user_id": self.user_id, "kind": self.kind, "name": self.name, "key": self.key, "text": self.text,
                "status": self.status, "importance": self.importance, "updated_at": self.updated_at,
                "source": self.source}


def memory_record(
    user_id: str, kind: str, text: str, *, name: str | None = None, status: str = "active",
    importance: float = 0.5, updated_at: float | None = None,
) -> MemoryRecord:
    """A validated record; a :class:`PersonalMemoryError` names the field that is wrong.

    ``name`` may be omitted for the single kinds (timezone, autonomy_level) and for goals and
    memories (a fresh id is given).
    """
    check_user_id(user_id)
    if kind not in RECORD_KINDS:
        raise PersonalMemoryError("kind", f"kind {str(kind)[:40]!r} is not one of {', '.join(RECORD_KINDS)}")
    if kind in SINGLE_KINDS:
        if name not in (None, kind):
            raise PersonalMemoryError("name", f"{_a(kind)} {kind} record is named {kind!r}, not {name!r}")
        name = kind
    elif name is None:
        if kind not in ("goal", "memory"):
            raise PersonalMemoryError("name", f"{_a(kind)} {kind} record needs a name (e.g. 'home_city')")
        name = uuid.uuid4().hex[:12]
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise PersonalMemoryError("name", f"record name {quoted(name)} must be 1-100 ASCII letters, digits or . _ : @ -")
    if _POLICY.text(name) != name:  # a name is a key (stored, in origins, in replies): it cannot be masked
        raise PersonalMemoryError("name", f"record name {quoted(name)} {_NOT_A_SECRET}")
    if not isinstance(text, str) or not text.strip():
        raise PersonalMemoryError("text", f"the {kind} record {name!r} needs a non-empty text")
    if "\x00" in text:
        raise PersonalMemoryError("text", f"the {kind} record {name!r} must not contain NUL characters")
    if len(text) > MAX_TEXT:
        raise PersonalMemoryError("text", f"the {kind} record {name!r} is {len(text)} characters; the limit is {MAX_TEXT}")
    text = text.strip()
    if kind == "autonomy_level" and text not in AUTONOMY_GUIDELINES:
        raise PersonalMemoryError("text", f"autonomy level {text!r} is not one of {', '.join(AUTONOMY_GUIDELINES)}")
    if kind == "timezone":
        try:
            zoneinfo.ZoneInfo(text)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise PersonalMemoryError("text", f"{text!r} is not an IANA time zone (e.g. Europe/Berlin)") from None
    if status not in GOAL_STATUSES or (kind != "goal" and status != "active"):
        allowed = ", ".join(GOAL_STATUSES) if kind == "goal" else "active"
        raise PersonalMemoryError("status", f"status {status!r} of the {kind} record {name!r} must be {allowed}")
    if isinstance(importance, bool) or not isinstance(importance, int | float) or not 0.0 <= importance <= 1.0:
        raise PersonalMemoryError("importance", f"importance {importance!r} must be a number from 0 to 1")
    # a record goes to a repository, into prompts and back in replies: a credential in it is masked here
    return MemoryRecord(user_id, kind, name, _POLICY.text(text), status, float(importance),
                        time.time() if updated_at is None else updated_at)


def check_user_id(user_id: object) -> str:
    """``user_id`` when it is a valid user id; else a :class:`PersonalMemoryError` for ``user_id``
    saying what one is (every route and record that takes a user checks it here)."""
    if not isinstance(user_id, str) or not USER_PATTERN.match(user_id):
        raise PersonalMemoryError("user_id", f"user id {quoted(user_id)} must be 1-100 ASCII letters, digits or "
                                             f". _ : @ - (starting with a letter or digit)")
    if _POLICY.text(user_id) != user_id:  # an id is stored and shown as given: it cannot be masked
        raise PersonalMemoryError("user_id", f"user id {quoted(user_id)} {_NOT_A_SECRET}")
    return user_id


def _a(word: str) -> str:
    """The article before ``word``: an autonomy_level record, a timezone record."""
    return "an" if word[:1] in "aeiou" else "a"


def sort_records(records: Iterable[MemoryRecord]) -> list[MemoryRecord]:
    """Records in profile order: by kind (:data:`RECORD_KINDS`), then by name."""
    order = {kind: index for index, kind in enumerate(RECORD_KINDS)}
    return sorted(records, key=lambda r: (order.get(r.kind, len(order)), r.name))


class PersonalMemory(ABC):
    """Where users' personal memory records are kept."""

    @abstractmethod
    async def records(self, user_id: str) -> list[MemoryRecord]:
        """Every record of ``user_id`` in profile order (:func:`sort_records`)."""

    @abstractmethod
    async def put(self, record: MemoryRecord) -> MemoryRecord:
        """Add or replace a record (by user, kind and name); returns it as stored."""

    @abstractmethod
    async def delete(self, user_id: str, key: str) -> bool:
        """Remove the record ``kind/name`` of ``user_id``; True when it existed."""


class InMemoryPersonalMemory(PersonalMemory):
    """Personal memory in a dict (tests, demos, a single process)."""

    def __init__(self, records: Iterable[MemoryRecord] = ()) -> None:
        self._users: dict[str, dict[str, MemoryRecord]] = {}
        for record in records:
            self._users.setdefault(record.user_id, {})[record.key] = record

    async def records(self, user_id: str) -> list[MemoryRecord]:
        """Every record of the user, in profile order."""
        return sort_records(self._users.get(user_id, {}).values())

    async def put(self, record: MemoryRecord) -> MemoryRecord:
        """Add or replace a record."""
        stored = replace(record, updated_at=time.time())
        self._users.setdefault(record.user_id, {})[record.key] = stored
        return stored

    async def delete(self, user_id: str, key: str) -> bool:
        """Remove a record."""
        return self._users.get(user_id, {}).pop(key, None) is not None

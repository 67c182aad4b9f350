"""The persistence protocol of a durable session: append-only records plus a sorted key-value area.

This is the one storage design for every session in footprint. ``DurableAgent`` (this package)
runs on it, and the host's session stores (``hosting.sessions``: in memory, DuckDB, PostgreSQL)
implement it, so a turn only ever *appends* what it added — nothing rewrites a whole conversation.

The rules (after the happy-agent-base seed):

- **Records** are the main context store. They are appended in context order and never updated;
  :meth:`SessionPersistence.load` returns them in append order. The only deletion is
  :meth:`SessionPersistence.clear_records`, used inside the compaction transaction, which then
  appends the replacement as a ``compaction`` record.
- **Values** are a sorted key-value area beside the records: queued messages (``steering.``,
  ``send.``), a dispatched tool batch (``tool.``), settings, the turn marker. ``read_values``
  returns the entries under a prefix sorted by key.
- **Transactions** are transparent: ``transaction(ctx, work)`` opens one, hands ``work`` a derived
  context that the implementation's own operations recognise, commits when ``work`` returns and
  rolls back when it raises. A transaction started with a context already inside one joins it.
- The caller serialises every operation on one session (``DurableAgent`` holds a lock that fails
  loudly on re-entry), so implementations need no locking of their own per session.

A record's ``body`` and a value are JSON-serialisable; stores keep them as JSON and never
interpret them. A store applies the credential masking of ``tracer`` before anything is kept.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """One append-only entry of a session's main context store.

    ``kind`` says what it is (``user``, ``assistant``, ``tool``, ``system``, ``compaction``,
    ``turn``, ...); ``body`` is its JSON-serialisable content. ``seq`` is the record's 1-based
    position in the session, assigned by the store on append (0 on a record not yet stored).
    """

    kind: str
    body: dict[str, Any]
    seq: int = 0


@dataclass(frozen=True, slots=True)
class PersistenceContext:
    """What every persistence call is given: the session, and the open transaction if any.

    ``transaction`` is opaque to callers; an implementation puts whatever it needs there (a
    connection, a pending write set) on the context it hands to ``work``.
    """

    session_id: str
    transaction: Any = field(default=None, compare=False)

    @property
    def in_transaction(self) -> bool:
        return self.transaction is not None


@runtime_checkable
class SessionPersistence(Protocol):
    """The seven operations a durable session needs from its storage (see the module docstring)."""

    async def transaction(
        self, ctx: PersistenceContext, work: Callable[[PersistenceContext], Awaitable[T]]
    ) -> T:
        """Run ``work`` in one transaction: all of its writes land, or none."""
        ...

    async def load(self, ctx: PersistenceContext) -> Sequence[SessionRecord]:
        """Every record of ``ctx.session_id`` in append order (empty for a new session)."""
        ...

    async def append(self, ctx: PersistenceContext, record: SessionRecord) -> None:
        """Append one record to the session's main store."""
        ...

    async def clear_records(self, ctx: PersistenceContext) -> None:
        """Physically delete the session's records (only inside the compaction transaction)."""
        ...

    async def read_values(self, ctx: PersistenceContext, prefix: str) -> Sequence[tuple[str, Any]]:
        """The ``(key, value)`` entries whose key starts with ``prefix``, sorted by key."""
        ...

    async def write_value(self, ctx: PersistenceContext, key: str, value: Any) -> None:
        """Set ``key`` to ``value`` (insert or replace)."""
        ...

    async def delete_value(self, ctx: PersistenceContext, key: str) -> None:
        """Remove ``key``; removing an absent key is not an error."""
        ...


def record_seqs(records: Sequence[SessionRecord]) -> list[int]:
    """The ``seq`` of each record, for checks that records came back in append order."""
    return [r.seq for r in records]

"""The persistence protocol (``agent.durable.SessionPersistence``) for a database, built once.

Every write of a session — an append, a cleared store, a value set or deleted, and for the host
the session's head (version, status, timestamps) — is gathered into a :class:`WriteSet`. A
transaction is a write set that is committed when ``work`` returns (and dropped when it raises);
an operation outside a transaction is a write set of its own. Reads inside a transaction see its
own writes on top of what is stored. Committing is the database's business (:meth:`_write`), but
it is always *group* commit: write sets that arrive while a batch is being written wait for the
next one, which commits them all in one database transaction, so a busy host pays one commit for
many sessions. Nothing returns before its batch is committed: a write is never acknowledged
before it is stored, and a batch that fails fails every write in it.

The plan of a batch (:func:`plan_batch`) is shared by the databases: given each session's stored
head it assigns record numbers, applies guards (the host's optimistic version check), and turns
the batch into a few set-based statements' worth of rows.

A store masks credentials (``tracer.RedactionPolicy``) in every record body and value before it
is kept: a model never needs a raw API key to continue a conversation.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from agent.durable import PersistenceContext, SessionRecord
from tracer import RedactionPolicy

from ..errors import SessionStoreError, VersionConflictError

_SQL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# a session store's schema and table prefix: the prefix and its tables' suffixes stay within
# PostgreSQL's 63 characters
PREFIX_LONGEST = 41


def check_sql_name(what: str, value: str, longest: int = 63) -> str:
    """``value`` when it is a plain SQL name (a schema, a table or a prefix of tables) of at most
    ``longest`` characters; a ValueError naming ``what`` otherwise. Matched whole: a trailing
    newline is refused too."""
    if len(value) > longest or not _SQL_NAME.fullmatch(value):
        raise ValueError(f"{what} name {value!r} must be 1-{longest} ASCII letters, digits or underscores, "
                         "not starting with a digit")
    return value

T = TypeVar("T")
log = logging.getLogger("footprint.host")


@dataclass(frozen=True, slots=True)
class SessionHead:
    """A session's row: where its next record goes, and what the host keeps about it."""

    session_id: str
    next_seq: int = 1
    version: int = 0
    created_at: float = 0.0
    updated_at: float = 0.0
    status: str | None = None


@dataclass(frozen=True, slots=True)
class HeadUpdate:
    """The host's guarded head change: applied only when the stored version is ``expected``."""

    expected: int
    version: int
    created_at: float
    updated_at: float
    status: str | None


@dataclass
class WriteSet:
    """What one transaction of one session writes (texts are JSON, already masked)."""

    session_id: str
    appends: list[tuple[str, str]] = field(default_factory=list)  # (kind, body JSON)
    cleared: bool = False  # the records stored before this write set are deleted
    values: dict[str, str | None] = field(default_factory=dict)  # key -> value JSON, None: deleted
    head: HeadUpdate | None = None
    drop: bool = False  # the whole session is deleted (before anything else in this write set)

    @property
    def empty(self) -> bool:
        """True when committing it would change nothing."""
        return not (self.appends or self.cleared or self.values or self.head or self.drop)


@dataclass
class StoredSession:
    """One read of a session: its head (None: never stored), records and values under a prefix."""

    head: SessionHead | None
    records: list[tuple[int, str, str]]  # (seq, kind, body JSON), in order
    values: list[tuple[str, str]]  # (key, value JSON), in no particular order


@dataclass
class BatchPlan:
    """A batch of write sets as rows for set-based statements."""

    drop: list[str] = field(default_factory=list)  # sessions deleted (before the rest)
    clear_below: dict[str, int] = field(default_factory=dict)  # session -> delete its records with seq < n
    records: list[tuple[str, int, str, str]] = field(default_factory=list)  # (session, seq, kind, body)
    value_deletes: list[tuple[str, str]] = field(default_factory=list)  # (session, key)
    value_upserts: list[tuple[str, str, str]] = field(default_factory=list)  # (session, key, value)
    heads: list[SessionHead] = field(default_factory=list)  # the heads to store
    conflicts: dict[int, VersionConflictError] = field(default_factory=dict)  # write set index -> error


def plan_batch(batch: Sequence[WriteSet], stored: dict[str, SessionHead]) -> BatchPlan:
    """Plan ``batch`` (in order) against the stored heads; a write set whose guard fails is skipped."""
    plan = BatchPlan()
    heads = dict(stored)
    touched: dict[str, None] = {}
    values: dict[tuple[str, str], str | None] = {}
    records: list[tuple[str, int, str, str]] = []
    dropped: set[str] = set()
    for index, ws in enumerate(batch):
        sid = ws.session_id
        if ws.drop:
            if sid in heads or sid in stored:
                dropped.add(sid)
            heads.pop(sid, None)
            records = [r for r in records if r[0] != sid]
            for stale in [k for k in values if k[0] == sid]:
                del values[stale]
            plan.clear_below.pop(sid, None)
            touched.pop(sid, None)
            if not (ws.appends or ws.values or ws.head or ws.cleared):
                continue
        head = heads.get(sid) or SessionHead(sid)
        if ws.head is not None and ws.head.expected != head.version:
            found = head.version if sid in heads else None
            plan.conflicts[index] = VersionConflictError(sid, ws.head.expected, found)
            continue
        if ws.cleared:
            plan.clear_below[sid] = head.next_seq
            records = [r for r in records if r[0] != sid]
        seq = head.next_seq
        for kind, body in ws.appends:
            records.append((sid, seq, kind, body))
            seq += 1
        for key, value in ws.values.items():
            values[(sid, key)] = value
        if ws.head is not None:
            h = ws.head
            head = SessionHead(sid, seq, h.version, h.created_at, h.updated_at, h.status)
        else:
            head = replace(head, next_seq=seq)
        heads[sid] = head
        touched[sid] = None
    plan.drop = sorted(dropped)
    plan.records = records
    plan.value_deletes = [k for k, v in values.items() if v is None]
    plan.value_upserts = [(s, k, v) for (s, k), v in values.items() if v is not None]
    plan.heads = [heads[sid] for sid in touched]
    return plan


def encode_value(value: Any, policy: RedactionPolicy, what: str) -> str:
    """``value`` as the JSON text a store keeps, credentials masked; TypeError when it is not JSON."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} is not JSON-serialisable: {exc}") from None
    if policy.may_change(text):
        text = json.dumps(policy.value(value), ensure_ascii=False, separators=(",", ":"))
    return text


@dataclass(eq=False)
class _Transaction:
    writes: WriteSet


@dataclass(eq=False)
class _Commit:
    writes: WriteSet
    done: asyncio.Future[None]


class StoredPersistence(ABC):
    """``SessionPersistence`` over a database; subclasses read and write, this class does the rest.

    ``shared`` is True when several processes write the same sessions (PostgreSQL).
    """

    shared: bool = False
    location: str = ""

    def __init__(self, *, policy: RedactionPolicy | None = None) -> None:
        self.policy = policy if policy is not None else RedactionPolicy()
        self._pending: list[_Commit] = []
        self._committer: asyncio.Task[None] | None = None
        self._closed = False
        self.batches = 0  # batches committed (group commit: usually fewer than write sets)
        self.commits = 0  # write sets committed

    # ------------------------------------------------------------------ the protocol

    async def transaction(
        self, ctx: PersistenceContext, work: Callable[[PersistenceContext], Awaitable[T]]
    ) -> T:
        """Run ``work`` in one transaction: its writes are committed together when it returns."""
        if ctx.in_transaction:
            return await work(ctx)
        tx = _Transaction(WriteSet(ctx.session_id))
        result = await work(replace(ctx, transaction=tx))
        await self.commit(tx.writes)
        return result

    async def load(self, ctx: PersistenceContext) -> Sequence[SessionRecord]:
        """Every record of the session in append order (with this transaction's appends)."""
        tx = self._tx(ctx)
        stored = await self.read(ctx.session_id, records=not (tx is not None and tx.writes.cleared))
        out = [SessionRecord(kind, self._decode(ctx, body), seq) for seq, kind, body in stored.records]
        if tx is not None:
            seq = stored.head.next_seq if stored.head is not None else 1
            out += [SessionRecord(kind, self._decode(ctx, body), seq + i)
                    for i, (kind, body) in enumerate(tx.writes.appends)]
        return out

    async def append(self, ctx: PersistenceContext, record: SessionRecord) -> None:
        """Append one record (masked) to the session."""
        if not isinstance(record.kind, str) or not record.kind:
            raise TypeError(f"a record of session {ctx.session_id!r} needs a kind (a non-empty string)")
        body = encode_value(record.body, self.policy, f"record body of session {ctx.session_id!r}")
        await self._write_in(ctx, lambda ws: ws.appends.append((record.kind, body)))

    async def clear_records(self, ctx: PersistenceContext) -> None:
        """Delete the session's records (those appended later in the same transaction stay)."""

        def clear(ws: WriteSet) -> None:
            ws.cleared = True
            ws.appends.clear()

        await self._write_in(ctx, clear)

    async def read_values(self, ctx: PersistenceContext, prefix: str) -> Sequence[tuple[str, Any]]:
        """The values under ``prefix``, sorted by key (with this transaction's writes)."""
        stored = await self.read(ctx.session_id, records=False, prefix=prefix)
        texts = {k: v for k, v in stored.values if k.startswith(prefix)}
        tx = self._tx(ctx)
        if tx is not None:
            for key, value in tx.writes.values.items():
                if not key.startswith(prefix):
                    continue
                if value is None:
                    texts.pop(key, None)
                else:
                    texts[key] = value
        return [(k, self._decode(ctx, texts[k])) for k in sorted(texts)]

    async def write_value(self, ctx: PersistenceContext, key: str, value: Any) -> None:
        """Set ``key`` (masked) to ``value``."""
        if not isinstance(key, str):
            raise TypeError(f"a value key of session {ctx.session_id!r} must be a string, not {key!r}")
        text = encode_value(value, self.policy, f"value {key!r} of session {ctx.session_id!r}")
        await self._write_in(ctx, lambda ws: ws.values.__setitem__(key, text))

    async def delete_value(self, ctx: PersistenceContext, key: str) -> None:
        """Remove ``key`` (absent: nothing happens)."""
        await self._write_in(ctx, lambda ws: ws.values.__setitem__(key, None))

    def _tx(self, ctx: PersistenceContext) -> _Transaction | None:
        tx = ctx.transaction
        if tx is None:
            return None
        if not isinstance(tx, _Transaction):
            raise TypeError(f"session {ctx.session_id!r}: the context carries a transaction of another store")
        if tx.writes.session_id != ctx.session_id:
            raise ValueError(f"a transaction of session {tx.writes.session_id!r} was used for {ctx.session_id!r}")
        return tx

    async def _write_in(self, ctx: PersistenceContext, change: Callable[[WriteSet], None]) -> None:
        tx = self._tx(ctx)
        if tx is not None:
            change(tx.writes)
            return
        ws = WriteSet(ctx.session_id)
        change(ws)
        await self.commit(ws)

    def _decode(self, ctx: PersistenceContext, text: str) -> Any:
        try:
            return json.loads(text)
        except ValueError as exc:
            raise SessionStoreError(
                f"session {ctx.session_id!r}: a stored record or value in {self.location} is not JSON ({exc})"
            ) from exc

    # ------------------------------------------------------------------ group commit

    async def commit(self, writes: WriteSet) -> None:
        """Commit one write set with whatever else is waiting; returns once it is stored.

        Raises :class:`VersionConflictError` when its head guard fails (nothing of it is written),
        :class:`SessionStoreError` when the batch could not be committed.
        """
        if self._closed:
            raise SessionStoreError(f"the session store {self.location} is closed")
        if writes.empty:
            return
        loop = asyncio.get_running_loop()
        request = _Commit(writes, loop.create_future())
        self._pending.append(request)
        if self._committer is None or self._committer.done():
            self._committer = loop.create_task(self._commit_batches())
        await asyncio.shield(request.done)

    async def _commit_batches(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                conflicts = await self._write([c.writes for c in batch])
            except Exception as exc:  # every write set of the batch failed: none is acknowledged
                error = exc if isinstance(exc, SessionStoreError) else SessionStoreError(
                    f"the session store {self.location} failed to commit {len(batch)} write(s): {exc}")
                log.error("%s", error)
                await self._failed(error)
                for c in batch:
                    if not c.done.done():
                        c.done.set_exception(error)
                continue
            self.batches += 1
            self.commits += len(batch) - len(conflicts)
            for i, c in enumerate(batch):
                if c.done.done():
                    continue
                if i in conflicts:
                    c.done.set_exception(conflicts[i])
                else:
                    c.done.set_result(None)

    async def flush(self) -> None:
        """Return once every write set submitted so far is committed (or has failed)."""
        while self._committer is not None and not self._committer.done():
            await asyncio.gather(asyncio.shield(self._committer), return_exceptions=True)

    async def _failed(self, error: SessionStoreError) -> None:  # noqa: B027 - a hook for stores that recover
        """Called when a batch could not be committed (a store may reopen its connection here)."""

    # ------------------------------------------------------------------ what a database provides

    @abstractmethod
    async def _write(self, batch: list[WriteSet]) -> dict[int, VersionConflictError]:
        """Commit ``batch`` in one transaction (see :func:`plan_batch`); the write sets refused by a guard."""

    @abstractmethod
    async def read(
        self, session_id: str, *, records: bool = True, prefix: str | None = "", after_seq: int = 0
    ) -> StoredSession:
        """The session's head, its records numbered above ``after_seq`` (none when ``records`` is
        False) and its values under ``prefix`` (None: no values)."""

    @abstractmethod
    async def heads(self, *, limit: int, offset: int) -> list[SessionHead]:
        """The heads of sessions the host saved (version > 0), most recently updated first."""

    async def drop(self, session_id: str) -> bool:
        """Delete a whole session; True when something of it was stored."""
        existed = (await self.read(session_id, records=False, prefix=None)).head is not None
        await self.commit(WriteSet(session_id, drop=True))
        return existed

    async def close(self) -> None:
        """Commit what is pending and release the database."""
        await self.flush()
        self._closed = True

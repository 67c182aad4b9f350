"""The host's sessions on the persistence protocol: a turn appends what it added, nothing more.

A session is stored as

* one record per message of its conversation, in order (kind: the item's kind, body: the context
  item's JSON form), and a ``host.rewind`` record when a tail of the conversation was dropped
  (recovery does that, rarely) — so the records only ever grow;
* one value, ``host.session``: the conversation's other fields, the paused run, the turn marker,
  tool results persisted mid-batch, status and last run — small, and rewritten by each save;
* one value per finished turn sent with a ``turn_id``, ``turn.<turn_id>``: its reply and a digest of
  its message (the message itself is in the records), so a
  retry of any earlier turn gets that turn's reply (the marker holds only the last turn). Not
  under ``host.``: a load does not read them; :meth:`RecordSessions.finished_turn` reads one;
* the session's head row: the version (optimistic concurrency), status and timestamps.

A save is one write set — the new records, the value, the guarded head — committed with whatever
other sessions are saving (group commit) before it returns. A save whose version is stale writes
nothing and raises :class:`VersionConflictError`. On a store with one writer process (memory,
DuckDB) the envelopes this process saved are kept in a bounded cache, so a session's next turn
reads nothing.

Credentials are masked before anything is kept; the envelope a save returns (and caches) holds
the masked messages, so this process continues from exactly what a restarted one would load.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from agent import LeftBehind
from tracer import ContextItem, RedactionPolicy, context_item_from_dict, context_item_to_dict

from ..errors import SessionStoreError, UnreadableEnvelopeError, VersionConflictError
from ._base import SessionStore
from ._envelope import Envelope, SessionSummary
from ._stored import HeadUpdate, StoredPersistence, StoredSession, WriteSet

FORMAT = "footprint.session/2"
SESSION_VALUE = "host.session"  # everything of the envelope but its messages
UNREADABLE_VALUE = "host.unreadable"  # what an earlier version stored and nobody could read
REWIND = "host.rewind"  # a record: the conversation keeps its first ``keep`` messages
#: The conversations a host keeps in memory (``footprint serve --session-cache-mb``), in bytes held:
#: a message's text and ~450 bytes of objects. Only a session's recent messages are held (those its
#: last recorded call's window left out are let go), so this bounds sessions, not their lengths.
DEFAULT_CACHE_BYTES = 64 * 1024 * 1024
HELD_OVERHEAD = 450
TURN_VALUE = "turn."  # + turn_id: a finished turn's message digest and reply (see the module's docstring)


def _digest(text: str) -> str:
    """What a finished turn keeps of its message: enough to tell a retry from another message."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _masked(value: Any, policy: RedactionPolicy) -> tuple[str, bool]:
    """``value`` as stored JSON text, and whether masking changed it."""
    text = _dumps(value)
    if policy.may_change(text):
        masked = _dumps(policy.value(value))
        return masked, masked != text
    return text, False


def _held_bytes(messages: Sequence[ContextItem]) -> int:
    """What holding ``messages`` costs, about (see ``DEFAULT_CACHE_BYTES``)."""
    return sum([len(ci.item.text) for ci in messages]) + HELD_OVERHEAD * len(messages)


def _common_prefix(messages: Sequence[ContextItem], stored: Sequence[ContextItem]) -> int:
    """How many messages the conversation still holds as stored (a save appends the ones after)."""
    limit = min(len(messages), len(stored))
    if limit and messages[limit - 1] is stored[limit - 1] and tuple(messages[:limit]) == tuple(stored[:limit]):
        # the usual case, a turn appended to what was stored: one comparison made in C (of the
        # same objects, mostly), not a Python step per message of a long conversation
        return limit
    kept = 0
    while kept < limit and (messages[kept] is stored[kept] or messages[kept] == stored[kept]):
        kept += 1
    return kept


def envelope_writes(
    envelope: Envelope, policy: RedactionPolicy, *, version: int, updated_at: float, expected: int | None = None,
) -> tuple[WriteSet, Envelope]:
    """The write set that stores ``envelope`` at ``version`` on top of what it says is stored, and the
    envelope as stored (masked)."""
    messages, at = envelope.held(), envelope.offset
    stored, stored_at = (envelope.stored or (), envelope.stored_at) if envelope.version else ((), 0)
    if at > stored_at:
        raise ValueError(f"session {envelope.session_id!r}: the envelope holds fewer messages than it says are "
                         "stored (a conversation is never cut on its way to a save)")
    # (a conversation that read back what the stored envelope let go of holds those as stored)
    skip = stored_at - at
    if len(messages) < skip:
        kept = len(messages)  # a rewind into what the stored envelope did not hold
    else:
        kept = skip + _common_prefix(messages[skip:] if skip else messages, stored)
    writes = WriteSet(envelope.session_id)
    if at + kept < stored_at + len(stored):
        writes.appends.append((REWIND, _dumps({"keep": at + kept})))
    added: list[ContextItem] = []
    masked = False
    for message in messages[kept:]:
        text, changed = _masked(context_item_to_dict(message), policy)
        writes.appends.append((message.item.kind, text))
        added.append(context_item_from_dict(json.loads(text)) if changed else message)
        masked = masked or changed
    # the usual case, nothing masked: the envelope's own tuple is the conversation as stored (no
    # copy of a long conversation per save; a save under sync is several a turn)
    held = messages if not masked and isinstance(messages, tuple) else (*messages[:kept], *added)
    head = {k: v for k, v in envelope.conversation.items() if k != "messages"}
    rest = {"pause": envelope.pause, "turn": envelope.turn, "tool_results": envelope.tool_results}
    text, changed = _masked({"format": FORMAT, "conversation": head, "status": envelope.status,
                             "last_run_id": envelope.last_run_id, **rest}, policy)
    writes.values[SESSION_VALUE] = text
    turn = envelope.turn
    if turn and turn.get("turn_id") and turn.get("state") == "done":
        writes.values[TURN_VALUE + str(turn["turn_id"])] = _masked(
            {"digest": _digest(policy.text(str(turn.get("text") or ""))), "reply": turn.get("reply")}, policy)[0]
    if changed:
        back = json.loads(text)
        rest = {k: back[k] for k in rest}
    writes.head = HeadUpdate(envelope.version if expected is None else expected, version, envelope.created_at,
                             updated_at, envelope.status)
    saved = envelope.replace(version=version, updated_at=updated_at, conversation={**head, "messages": []},
                             messages=held, stored=held, stored_at=at, **rest)
    return writes, saved


class _RewoundIntoOlder(Exception):
    """An incremental read met a rewind into messages the base does not hold: read it whole."""


def envelope_from(
    session_id: str, stored: StoredSession, base: Sequence[ContextItem] = (), older: LeftBehind | None = None,
) -> Envelope | None:
    """The envelope stored records and values make; None when the host never saved the session.

    ``base``: the messages the records before ``stored.records`` made (an incremental read), after
    the ``older.count`` that ``older`` names when it is given.
    """
    head = stored.head
    if head is None:
        return None
    values = dict(stored.values)
    if UNREADABLE_VALUE in values:
        try:
            reason = str(json.loads(values[UNREADABLE_VALUE]).get("reason"))
        except (ValueError, AttributeError):
            reason = "an earlier version stored data nobody could read"
        raise UnreadableEnvelopeError(session_id, reason)
    text = values.get(SESSION_VALUE)
    if text is None:
        if head.version == 0:
            return None  # records or values of the protocol only (not the host's)
        raise UnreadableEnvelopeError(session_id, f"its {SESSION_VALUE} value is missing")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UnreadableEnvelopeError(session_id, f"its {SESSION_VALUE} value is not JSON: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UnreadableEnvelopeError(session_id, f"its {SESSION_VALUE} value is not a {FORMAT} object")
    conversation, pause, turn = data.get("conversation"), data.get("pause"), data.get("turn")
    results = data.get("tool_results") or {}
    if not isinstance(conversation, dict) or "id" not in conversation:
        raise UnreadableEnvelopeError(session_id, "its conversation fields are malformed")
    if (pause is not None and not isinstance(pause, dict)) or (turn is not None and not isinstance(turn, dict)) \
            or not isinstance(results, dict):
        raise UnreadableEnvelopeError(session_id, "its paused run, turn marker or tool results are malformed")
    messages: list[ContextItem] = list(base)
    at = older.count if older is not None else 0
    for seq, kind, body in stored.records:
        try:
            data_body = json.loads(body)
            if kind == REWIND:
                keep = int(data_body["keep"])
                if keep < at:
                    raise _RewoundIntoOlder
                del messages[keep - at:]
                continue
            messages.append(context_item_from_dict(data_body))
        except (ValueError, KeyError, TypeError) as exc:
            raise UnreadableEnvelopeError(session_id, f"its record {seq} ({kind}) is malformed: {exc}") from exc
    if pause is not None:
        from agent import PauseState

        try:
            PauseState.from_dict(pause)
        except (ValueError, TypeError, KeyError) as exc:
            raise UnreadableEnvelopeError(session_id, f"its paused run is malformed: {exc}") from exc
    held = tuple(messages)
    return Envelope(
        session_id, {**conversation, "messages": []}, pause, head.version, head.created_at, head.updated_at,
        status=data.get("status"), last_run_id=data.get("last_run_id"), turn=turn, tool_results=results,
        messages=held, stored=held, older=older, stored_at=at, recorded=older,
    )


def legacy_writes(rows: list[tuple[Any, ...]], policy: RedactionPolicy) -> list[WriteSet]:
    """The write sets that store the whole-envelope rows of earlier versions as records.

    ``rows``: (session_id, version, created_at, updated_at, status, payload). A row nobody can read
    is kept as it was (in ``host.unreadable``), so the session keeps failing with the same clear
    error instead of starting fresh.
    """
    out: list[WriteSet] = []
    for session_id, version, created_at, updated_at, status, payload in rows:
        try:
            envelope = Envelope.decode(session_id, payload, version=0, updated_at=float(updated_at or 0))
        except UnreadableEnvelopeError as exc:
            writes = WriteSet(session_id, values={UNREADABLE_VALUE: _dumps(
                {"reason": exc.reason, "payload": policy.text(str(payload))})})
            writes.head = HeadUpdate(0, max(1, int(version)), float(created_at or 0), float(updated_at or 0), status)
            out.append(writes)
            continue
        writes, _ = envelope_writes(envelope.replace(created_at=float(created_at or envelope.created_at)), policy,
                                    version=max(1, int(version)), updated_at=float(updated_at or 0), expected=0)
        out.append(writes)
    return out


class RecordSessions(SessionStore):
    """The host's :class:`SessionStore` on a record store (memory, DuckDB or PostgreSQL).

    ``cache_bytes`` bounds the cache of the envelopes this process loaded or saved (0 turns it
    off). On a store with one writer process (memory, DuckDB) a cached envelope is current by
    construction. On a shared one (PostgreSQL) a load still asks the database — for the session's
    head, its small value and only the records numbered after the cached ones — so a long
    session's next turn reads what other hosts added since, not the whole conversation.
    """

    def __init__(self, persistence: StoredPersistence, *, cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.persistence = persistence
        self.shared = persistence.shared
        self.location = persistence.location
        # session -> (envelope, what it holds, in bytes (_held_bytes), the number of its last record)
        self._cache: OrderedDict[str, tuple[Envelope, int, int]] = OrderedDict()
        self._cache_bytes = 0
        self._cache_limit = cache_bytes

    @property
    def policy(self) -> RedactionPolicy:  # type: ignore[override]
        """The credential masking applied to everything kept."""
        return self.persistence.policy

    @property
    def healthy(self) -> bool:
        """False once the database failed in a way only reopening it can mend."""
        return bool(getattr(self.persistence, "healthy", True))

    async def reopen(self) -> None:
        """Reopen the database after a fatal error (:class:`SessionStoreError` when it cannot be)."""
        self._cache.clear()
        self._cache_bytes = 0
        reopen = getattr(self.persistence, "reopen", None)
        if reopen is None:
            raise SessionStoreError(f"the session store {self.location} cannot be reopened")
        await reopen()

    # ------------------------------------------------------------------ the cache

    def _remember(self, envelope: Envelope, size: int, last_seq: int) -> None:
        """Cache ``envelope`` (holding ``size`` bytes, see :func:`_held_bytes`) without the messages
        its last recorded call's window left out (:meth:`Envelope.trimmed`)."""
        self._forget(envelope.session_id)
        envelope, cut = envelope.trimmed()
        if cut:
            size -= _held_bytes(cut)
        if size > self._cache_limit // 4:
            return
        self._cache[envelope.session_id] = (envelope, size, last_seq)
        self._cache_bytes += size
        while self._cache_bytes > self._cache_limit and self._cache:
            _, (_, dropped, _) = self._cache.popitem(last=False)
            self._cache_bytes -= dropped

    def _forget(self, session_id: str) -> None:
        entry = self._cache.pop(session_id, None)
        if entry is not None:
            self._cache_bytes -= entry[1]

    # ------------------------------------------------------------------ the interface

    async def load(self, session_id: str) -> Envelope | None:
        """The session's envelope, or None; :class:`UnreadableEnvelopeError` when it cannot be read."""
        cached = self._cache.get(session_id)
        if cached is not None and not self.shared:
            self._cache.move_to_end(session_id)
            return cached[0].copy()
        if cached is not None:
            held, size, last_seq = cached
            stored = await self.persistence.read(session_id, prefix="host.", after_seq=last_seq)
            head = stored.head
            if head is not None and head.created_at == held.created_at and head.version >= held.version:
                # the same session, as cached or with records appended since: read only those
                base = held.held()
                try:
                    envelope = envelope_from(session_id, stored, base=base, older=held.older)
                except _RewoundIntoOlder:
                    pass  # (into what the cached envelope let go of: read it whole)
                else:
                    if envelope is not None:
                        # what it holds is the cached part and the messages appended since (summed
                        # over the whole conversation, a long session's every turn would pay for it)
                        now = envelope.held()
                        if any(kind == REWIND for _, kind, _ in stored.records):
                            size = _held_bytes(now)
                        else:
                            size += _held_bytes(now[len(base):])
                        self._remember(envelope.copy(), size, head.next_seq - 1)
                    return envelope
            self._forget(session_id)  # deleted, or deleted and created again: read it whole
        stored = await self.persistence.read(session_id, prefix="host.")
        envelope = envelope_from(session_id, stored)
        if envelope is not None and self._cache_limit and stored.head is not None:
            self._remember(envelope.copy(), _held_bytes(envelope.held()), stored.head.next_seq - 1)
        return envelope

    async def older_messages(self, session_id: str, count: int) -> tuple[ContextItem, ...]:
        """The session's first ``count`` messages, read from the store (an envelope that let go of
        them names them by a receipt; what needs them reads them back here)."""
        envelope = envelope_from(session_id, await self.persistence.read(session_id, prefix="host."))
        if envelope is None or envelope.message_count < count:
            raise SessionStoreError(f"session {session_id!r}: its first {count} messages are no longer in "
                                    f"{self.location}")
        return envelope.held()[:count]

    async def finished_turn(self, session_id: str, turn_id: str, text: str) -> tuple[dict[str, Any], bool] | None:
        """The stored reply of the session's finished turn ``turn_id``, and whether ``text`` is the
        message (or decision) it was sent with; None when no finished turn has that id."""
        key = TURN_VALUE + turn_id
        stored = await self.persistence.read(session_id, records=False, prefix=key)
        for found, value_text in stored.values:
            if found != key:
                continue
            try:
                value = json.loads(value_text)
                digest, reply = value["digest"], value["reply"]
            except (ValueError, KeyError, TypeError) as exc:
                raise UnreadableEnvelopeError(session_id, f"its value {key} is malformed: {exc}") from exc
            return reply or {"status": "answered"}, digest in (_digest(text), _digest(self.policy.text(text)))
        return None

    async def save(self, envelope: Envelope, *, durable: bool = True) -> Envelope:
        """Append what the envelope added since the version it was loaded at; returns once committed.

        ``durable`` is accepted for compatibility and ignored: every save is committed before it
        returns (a reply is never sent for a turn that is not stored).
        """
        if envelope.version and envelope.stored is None:
            current = await self._stored_envelope(envelope)
            envelope = envelope.replace(stored=current.held(), stored_at=current.offset)
        now = max(time.time(), envelope.updated_at)
        writes, saved = envelope_writes(envelope, self.policy, version=envelope.version + 1, updated_at=now)
        try:
            await self.persistence.commit(writes)
        except BaseException:
            self._forget(envelope.session_id)
            raise
        if self._cache_limit:
            previous = self._cache.get(envelope.session_id)
            held, appended = saved.held(), len(writes.appends)
            if not envelope.version:
                self._remember(saved.copy(), _held_bytes(held), appended)
            elif previous is not None and previous[0].version == envelope.version:
                # the guard held: nobody wrote since, so the new records follow the cached ones
                # what it holds is the cached part, the messages before it that the turn still
                # held (those its calls' windows left out since it began) and the new ones
                before = previous[0].offset - saved.offset
                if (writes.appends and writes.appends[0][0] == REWIND) or before < 0:
                    size = _held_bytes(held)
                else:
                    size = previous[1] + _held_bytes(held[:before]) + _held_bytes(held[len(held) - appended:])
                self._remember(saved.copy(), size, previous[2] + appended)
            else:
                self._forget(envelope.session_id)
        return saved

    async def _stored_envelope(self, envelope: Envelope) -> Envelope:
        """The envelope stored at ``envelope.version`` (for an envelope that does not say which
        messages are stored)."""
        try:
            current = await self.load(envelope.session_id)
        except UnreadableEnvelopeError:
            current = None
        if current is None or current.version != envelope.version:
            raise VersionConflictError(envelope.session_id, envelope.version, None if current is None else current.version)
        return current

    async def delete(self, session_id: str) -> bool:
        """Remove a session: its records, values and head."""
        self._forget(session_id)
        return await self.persistence.drop(session_id)

    async def list(self, *, limit: int = 1000, offset: int = 0) -> list[SessionSummary]:
        """Sessions, most recently updated first."""
        return [SessionSummary(h.session_id, h.version, h.created_at, h.updated_at, h.status)
                for h in await self.persistence.heads(limit=limit, offset=offset)]

    async def flush(self) -> None:
        """Return once every save made so far is committed."""
        await self.persistence.flush()

    async def close(self) -> None:
        """Release the database."""
        self._cache.clear()
        self._cache_bytes = 0
        await self.persistence.close()

    async def write_raw(self, session_id: str, text: str) -> None:
        """Store ``text`` as the session's value as is (tests use it to store unreadable data)."""
        self._forget(session_id)
        await self.persistence.write_raw_value(session_id, SESSION_VALUE, text)  # type: ignore[attr-defined]

    async def stored_bytes(self) -> int:
        """The bytes of records and values kept (the soak bench's measure of growth)."""
        return int(await self.persistence.stored_bytes())  # type: ignore[attr-defined]

"""The in-memory implementation of the persistence protocol (tests, and agents that keep nothing)."""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from tracer import RedactionPolicy

from ._persistence import PersistenceContext, SessionRecord

T = TypeVar("T")


@dataclass
class _Session:
    records: list[tuple[str, str, int]] = field(default_factory=list)  # (kind, body as JSON text, seq)
    values: dict[str, Any] = field(default_factory=dict)
    next_seq: int = 1


_POLICY = RedactionPolicy()  # the credential masking every store applies before it keeps anything


def _json_text(value: Any, what: str) -> str:
    """``value`` as the JSON text a real store would keep: credentials masked."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} is not JSON-serialisable: {exc}") from None
    return json.dumps(_POLICY.value(json.loads(text))) if _POLICY.may_change(text) else text


def _jsonable(value: Any, what: str) -> Any:
    """A deep copy through JSON, credentials masked, so what is kept is exactly what a real store would give back."""
    return json.loads(_json_text(value, what))


class InMemoryPersistence:
    """Records and values of many sessions in one process; a transaction rolls back by snapshot."""

    def __init__(self) -> None:
        self._sessions: dict[str, _Session] = {}

    def _session(self, ctx: PersistenceContext) -> _Session:
        return self._sessions.setdefault(ctx.session_id, _Session())

    async def transaction(
        self, ctx: PersistenceContext, work: Callable[[PersistenceContext], Awaitable[T]]
    ) -> T:
        if ctx.in_transaction:
            return await work(ctx)
        session = self._session(ctx)
        saved = (list(session.records), copy.deepcopy(session.values), session.next_seq)
        try:
            return await work(replace(ctx, transaction=object()))
        except BaseException:
            session.records, session.values, session.next_seq = saved
            raise

    async def load(self, ctx: PersistenceContext) -> Sequence[SessionRecord]:
        # bodies are kept as JSON text: every load hands out fresh copies at json.loads speed
        loads = json.loads
        return [SessionRecord(kind, loads(body), seq) for kind, body, seq in self._session(ctx).records]

    async def append(self, ctx: PersistenceContext, record: SessionRecord) -> None:
        session = self._session(ctx)
        body = _json_text(record.body, f"record body of session {ctx.session_id!r}")
        session.records.append((record.kind, body, session.next_seq))
        session.next_seq += 1

    async def clear_records(self, ctx: PersistenceContext) -> None:
        self._session(ctx).records.clear()

    async def read_values(self, ctx: PersistenceContext, prefix: str) -> Sequence[tuple[str, Any]]:
        values = self._session(ctx).values
        return [(k, copy.deepcopy(values[k])) for k in sorted(values) if k.startswith(prefix)]

    async def write_value(self, ctx: PersistenceContext, key: str, value: Any) -> None:
        self._session(ctx).values[key] = _jsonable(value, f"value {key!r} of session {ctx.session_id!r}")

    async def delete_value(self, ctx: PersistenceContext, key: str) -> None:
        self._session(ctx).values.pop(key, None)

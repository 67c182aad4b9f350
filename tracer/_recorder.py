"""The recorder API: what the agent calls to record a run as it happens.

    recorder = Recorder(store, durability="exit")
    run = recorder.start_run(agent="assistant", input="hi", session_id="s1")
    with run.stage("input", "user message") as stage:
        message = stage.output(Item.of_text("user", "hi"), origin_kind="user", source="cli")
    with run.stage("inference", "chat gpt-4o", after=[stage]) as inference:
        inference.inputs([system_prompt, message])          # the snapshot, with origins
        answer = inference.output(Item.of_text("assistant", "hello"))
    run.end("answered", output="hello")

Stages may be open at the same time from concurrent asyncio tasks (a parallel tool batch). Under
``sync`` durability, closing a stage returns only once its rows are durable (synced to the store's
journal, see ``tracer._journal``), so a crash after that point never loses it; under ``exit`` rows
are written in the background in batches and flushed when the store closes (also at interpreter
exit).

A run started with ``deferred_sync=True`` (the agent loop's) moves each sync point to where it is
needed: a closed stage becomes durable before the run's next stage opens, before the run ends, or
when :meth:`RunRecording.settle` is called — the owner settles before anything outside the
recording (a hook, an event) can see the stage. Stages that close back to back (a tool, then its
batch) then share one sync.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterable, Sequence
from enum import StrEnum
from itertools import count
from typing import Any

from ._ids import new_id
from ._json import encode_json
from ._listeners import RecordedStage, RecordingListener
from ._records import (
    ContextItem,
    Edge,
    EdgeKind,
    Item,
    LeftOut,
    Origin,
    OriginKind,
    Recorded,
    Run,
    RunStatus,
    SnapshotEntry,
    Stage,
    StageStatus,
    kind_name,
)
from ._redaction import RedactionPolicy
from ._rows import SnapshotPacker, item_row, pack_edges, pack_hashes, unpack_entry
from ._store import Store
from ._writer import Bundle, StageRows
from .errors import RecordingError

_CACHE_SIZE = 16_384  # items remembered per recorder (redacted forms, hashes sent): bounds memory
_UNSEEN: Any = object()


class Durability(StrEnum):
    """When recorded rows become durable."""

    EXIT = "exit"
    SYNC = "sync"


class Recorder:
    """Records runs into a store, applying the redaction policy to everything it writes.

    ``listeners`` (:class:`~tracer.RecordingListener`) are told about each run start, stage close
    and run end, with the records as written (redacted): the OTel exporter and the log events use it.
    ``caches_of``: a recorder on the same store and policy whose record of the items already stored
    (and of their redacted forms) this one shares: recorders made one per re-run skip the items
    their base has written.
    """

    def __init__(
        self,
        store: Store,
        *,
        durability: Durability | str = Durability.EXIT,
        redaction: RedactionPolicy | None = None,
        listeners: Sequence[RecordingListener] = (),
        caches_of: Recorder | None = None,
    ) -> None:
        self.store = store
        self.durability = Durability(durability)
        self.redaction = redaction if redaction is not None else RedactionPolicy()
        self._redacted: dict[str, Item | None] = {}  # item hash -> its redacted form (None: unchanged)
        self._sent: dict[str, str] = {}  # item hash -> stored hash, for items already handed to the writer
        if caches_of is not None:  # a recorder made per re-run (a blame's forks) knows what its base stored
            if caches_of.store is not store or caches_of.redaction != self.redaction:
                raise ValueError("caches_of: a recorder on the same store with the same redaction policy")
            self._redacted, self._sent = caches_of._redacted, caches_of._sent
        self._snapshots = SnapshotPacker(self._sent, self._stored_hash)
        self._policy_json: tuple[RedactionPolicy, str | None] | None = None  # (policy, its JSON) cache
        self.listeners: list[RecordingListener] = list(listeners)

    @property
    def enabled(self) -> bool:
        """True: this recorder writes (see :class:`NullRecorder`)."""
        return True

    def start_run(
        self,
        *,
        agent: str,
        input: str,
        session_id: str | None = None,
        model: str | None = None,
        labels: Iterable[str] = (),
        attributes: dict[str, Any] | None = None,
        forked_from_run: str | None = None,
        forked_from_stage: str | None = None,
        fork_edit: dict[str, Any] | None = None,
        run_id: str | None = None,
        deferred_sync: bool = False,
    ) -> RunRecording:
        """Open a run (its row is written at once with status ``running``).

        ``deferred_sync``: under ``sync`` durability, a closed stage is made durable when the run's
        next stage opens, the run ends or :meth:`RunRecording.settle` is called, rather than before
        its close returns (see the module docstring).
        """
        run = RunRecording(self, run_id or new_id("r"), agent, session_id, deferred_sync=deferred_sync)
        run.start_attributes = attributes or {}
        policy = self.redaction
        labels = tuple(labels)
        bundle = Bundle()
        bundle.add(
            "fp_run",
            (
                run.id, session_id, agent, RunStatus.RUNNING.value, policy.text(input), None, model, run.started_at,
                None, 0, 0, 0.0, forked_from_run, forked_from_stage, None if fork_edit is None else policy.json_text(fork_edit),
                list(labels), policy.json_text(attributes or {}), self._policy_text(), None,
            ),
        )
        self._submit(bundle)
        if self.listeners:
            run.record = Run(
                run.id, session_id, agent, RunStatus.RUNNING.value, policy.text(input), None, model, run.started_at,
                forked_from_run=forked_from_run, forked_from_stage=forked_from_stage,
                fork_edit=policy.value(fork_edit), labels=labels, attributes=policy.value(attributes or {}),
                redaction=policy.describe(),
            )
            self._notify("run_started", run.record)
        return run

    def continue_run(
        self, run_id: str, *, agent: str, session_id: str | None = None, next_seq: int = 0,
        deferred_sync: bool = False,
    ) -> RunRecording:
        """Reopen a run that paused (status back to ``running``); its stages continue at ``next_seq``."""
        run = RunRecording(self, run_id, agent, session_id, first_seq=next_seq, deferred_sync=deferred_sync)
        bundle = Bundle()
        bundle.run_ends.append(
            (run_id, RunStatus.RUNNING.value, None, None, None, None, None, None, None, None)
        )
        self._submit(bundle)
        if self.listeners:
            run.record = Run(run_id, session_id, agent, RunStatus.RUNNING.value, "", None, None, run.started_at)
            self._notify("run_started", run.record, resumed=True, first_seq=next_seq)
        return run

    def _policy_text(self) -> str | None:
        """The policy's description as stored with each run (computed once per policy)."""
        cached = self._policy_json
        if cached is None or cached[0] is not self.redaction:
            cached = self._policy_json = (self.redaction, encode_json(self.redaction.describe()))
        return cached[1]

    def stored_item(self, item: Item) -> Item:
        """The item as it is stored: redacted when the policy changes it (cached per content hash)."""
        if self.redaction.is_noop:
            return item
        cached = self._redacted.get(item.hash, _UNSEEN)
        if cached is _UNSEEN:
            # only a changed item is kept: an unchanged one is remembered as None, so the cache
            # holds no content the policy left alone
            cached = None
            if self.redaction.may_change(item.canonical_body):
                body = self.redaction.value(item.body)
                cached = None if body == item.body else Item(item.kind, body)
            if len(self._redacted) > _CACHE_SIZE:
                self._redacted.clear()
            self._redacted[item.hash] = cached
        return item if cached is None else cached

    def _stored_hash(self, item: Item, bundle: Bundle | StageRows) -> str:
        """The stored item's hash; its row joins ``bundle`` unless this recorder sent it lately."""
        stored_hash = self._sent.get(item.hash)
        if stored_hash is None:
            stored = self.stored_item(item)
            bundle.add("fp_item", item_row(stored))
            stored_hash = stored.hash
            # clearing (rather than evicting one by one) is cheap and only costs a resent row,
            # which the writer skips as already stored; the bound keeps memory flat. The entries
            # packed on context items stay valid (their rows were sent): a conversation held by
            # more sessions than this bound holds items would otherwise send its whole context's
            # rows again at every call once the bound is passed (8 sessions x 780 turns of the soak:
            # the host fell from 89 to 9 turns/s)
            if len(self._sent) > _CACHE_SIZE:
                self._sent.clear()
            self._sent[item.hash] = stored_hash
        return stored_hash

    def _submit(self, bundle: Bundle | StageRows, run: RunRecording | None = None) -> None:
        """Hand rows to the store; under ``sync`` wait until they are durable, unless ``run`` defers
        its sync points (the run then settles them later)."""
        if self.durability is not Durability.SYNC:
            self.store.submit(bundle)
        elif run is not None and run.deferred_sync:
            run._unsettled = self.store.submit_journaled(bundle)
        else:
            self.store.settle(self.store.submit_journaled(bundle))

    def _submit_all(self, bundles: list[StageRows], run: RunRecording | None = None) -> None:
        """Hand ``bundles`` to the store in order, as :meth:`_submit` does each."""
        for bundle in bundles:
            self._submit(bundle, run)

    def _notify(self, event: str, *args: Any, **kwargs: Any) -> None:
        for listener in self.listeners:
            try:
                getattr(listener, event)(*args, **kwargs)
            except Exception:  # a listener (an exporter, a logger) must never break the run it follows
                logging.getLogger("footprint.tracer").exception("recording listener %r failed on %s", listener, event)


class RunRecording:
    """One run being recorded. Create with :meth:`Recorder.start_run`."""

    def __init__(
        self, recorder: Recorder, run_id: str, agent: str, session_id: str | None, *, first_seq: int = 0,
        deferred_sync: bool = False,
    ) -> None:
        self.recorder = recorder
        self.deferred_sync = deferred_sync
        self._unsettled = 0  # the store's token for the last rows of this run not yet made durable
        self.id = run_id
        self.agent = agent
        self.session_id = session_id
        self.started_at = time.time()
        self._seq = count(first_seq)
        self._next = first_seq
        self._ended = False
        self.status: str = RunStatus.RUNNING.value
        self.record: Run | None = None  # the run as written, kept for listeners
        self.start_attributes: dict[str, Any] = {}  # kept by end(), which sets the rest
        # A stage is written when it closes, with the edges that reach it. A stage inside another
        # (a tool inside its batch) closes first, so its rows wait here for the stages its edges
        # come from: no edge is ever stored before the stage it starts at (a crash mid-batch
        # leaves neither, instead of an edge from a batch stage that was never written).
        self._open: set[str] = set()
        self._waiting: list[tuple[frozenset[str], StageRows]] = []

    @property
    def ended(self) -> bool:
        """True once :meth:`end` was called."""
        return self._ended

    @property
    def next_seq(self) -> int:
        """The sequence number the next stage will get (a resumed run continues from it)."""
        return self._next

    def settle(self) -> None:
        """Return once every stage of this run closed so far is durable (under ``sync``; at once otherwise)."""
        if self._unsettled:
            token, self._unsettled = self._unsettled, 0
            self.recorder.store.settle(token)

    def stage(
        self,
        kind: str,
        name: str = "",
        *,
        after: Iterable[StageRecording | str] = (),
        edge: EdgeKind | str = EdgeKind.NEXT,
        parent: StageRecording | str | None = None,
        attributes: dict[str, Any] | None = None,
    ) -> StageRecording:
        """Open a stage that follows the ``after`` stages by ``edge`` edges."""
        if self._ended:
            raise RecordingError(f"run {self.id} has ended; cannot open stage {kind} {name!r}")
        if self._unsettled:
            self.settle()  # the stages closed so far are durable before this one begins
        parent_id = parent.id if isinstance(parent, StageRecording) else parent
        seq = next(self._seq)
        self._next = seq + 1
        kind = str(kind)
        stage = StageRecording(self, new_id("s"), seq, kind, name or kind, parent_id)
        if attributes:
            stage.attributes.update(attributes)
        if after:
            edge = str(edge)
            stage.edges = [(prev.id if isinstance(prev, StageRecording) else prev, edge)
                           for prev in after]
        self._open.add(stage.id)
        return stage

    def _written(self, stage_id: str, bundle: StageRows, edges: list[tuple[str, str]]) -> None:
        """Hand a closed stage's rows to the writer once every stage its edges start at is written."""
        open_ = self._open
        open_.discard(stage_id)
        if edges:
            if len(edges) == 1:  # most stages follow one other: no generator to run
                src = edges[0][0]
                waiting_on = frozenset((src,)) if src in open_ else None
            else:
                waiting_on = frozenset([src for src, _ in edges if src in open_])
            if waiting_on:
                self._waiting.append((waiting_on, bundle))
                return
        if not self._waiting:  # the usual case: nothing held back, nothing to release
            self.recorder._submit(bundle, self)
            return
        ready = [bundle]
        still = []
        for sources_left, held in self._waiting:
            if not open_.isdisjoint(sources_left):  # (one C call, no generator)
                still.append((sources_left, held))
            else:
                ready.append(held)
        self._waiting = still
        self.recorder._submit_all(ready, self)

    def end(
        self,
        status: RunStatus | str,
        *,
        output: str | None = None,
        model: str | None = None,
        tokens_in: int = 0,
        tokens_out: int = 0,
        cost: float = 0.0,
        error: str | None = None,
        attributes: dict[str, Any] | None = None,
    ) -> None:
        """End the run with its status and outcome (``attributes`` join those it was started with)."""
        if self._ended:
            raise RecordingError(f"run {self.id} has already ended ({self.status})")
        self._ended = True
        if attributes is not None and self.start_attributes:
            attributes = {**self.start_attributes, **attributes}
        self.status = str(status)
        policy = self.recorder.redaction
        ended_at = time.time()
        if self._waiting:  # a stage left open when the run ended: its edges' sources never close
            self.recorder._submit_all([held for _, held in self._waiting], self)
            self._waiting.clear()
        bundle = Bundle()
        bundle.run_ends.append(
            (
                self.id, self.status, None if output is None else policy.text(output), model, ended_at,
                tokens_in, tokens_out, cost, None if error is None else policy.text(error),
                policy.json_text(attributes) if attributes is not None else None,
            )
        )
        self.recorder._submit(bundle)
        if self.record is not None and self.recorder.listeners:
            self.record = dataclasses.replace(
                self.record, status=self.status, output=None if output is None else policy.text(output),
                model=model or self.record.model, ended_at=ended_at, tokens_in=tokens_in, tokens_out=tokens_out,
                cost=cost, error=None if error is None else policy.text(error),
                attributes=policy.value(attributes) if attributes is not None else self.record.attributes,
            )
            self.recorder._notify("run_ended", self.record)


class StageRecording:
    """One stage being recorded; closing it writes it (use it as a context manager)."""

    __slots__ = (
        "_closed",
        "_dropped",
        "_inputs",
        "_outputs",
        "attributes",
        "edges",
        "id",
        "kind",
        "left_receipt",
        "name",
        "parent_id",
        "run",
        "seq",
        "started_at",
    )

    def __init__(
        self, run: RunRecording, stage_id: str, seq: int, kind: str, name: str, parent_id: str | None
    ) -> None:
        self.run = run
        self.id = stage_id
        self.seq = seq
        self.kind = kind
        self.name = name
        self.parent_id = parent_id
        self.started_at = time.time()
        self.attributes: dict[str, Any] = {}
        self.edges: list[tuple[str, str]] = []
        self._inputs: list[ContextItem] = []
        self._dropped: list[tuple[ContextItem, str]] | LeftOut = []
        self._outputs: list[Item] = []
        self._closed = False
        # once closed: what its window left out, as a receipt a later stage may name (Recorded)
        self.left_receipt: Recorded | None = None

    def origin(self, kind: OriginKind | str = OriginKind.STAGE, source: str | None = None) -> Origin:
        """An origin naming this stage (and an outside source, when ``kind`` is not ``stage``)."""
        return Origin(kind_name(kind), self.run.id, self.id, source)

    def inputs(self, items: Sequence[ContextItem], dropped: Iterable[tuple[ContextItem, str]] = ()) -> None:
        """Record the context this stage received, in order; ``dropped`` is what was left out and why
        (a :class:`LeftOut` is kept as it is: no pair is made per item)."""
        if self._closed:
            self._check_open()
        self._inputs.extend(items)
        if isinstance(dropped, LeftOut) and not self._dropped:
            # (its own: a later call may extend it)
            self._dropped = LeftOut(*dropped.runs, recorded=dropped.recorded)
        elif isinstance(dropped, LeftOut) and dropped.recorded is not None:
            raise RecordingError(f"stage {self.kind} {self.id}: a list naming recorded items (Recorded) must be "
                                 "the first the stage is handed")
        else:
            self._dropped.extend(dropped)

    def can_name(self, receipt: Recorded) -> bool:
        """True when this stage may be handed ``receipt`` in place of the items it names: it comes
        from this recorder, and no listener needs the items themselves."""
        recorder = self.run.recorder
        return recorder._snapshots.issued(receipt) and not recorder.listeners

    def output(
        self, item: Item, *, origin_kind: OriginKind | str = OriginKind.STAGE, source: str | None = None
    ) -> ContextItem:
        """Record an item this stage produced and return it with its origin (this stage)."""
        if self._closed:
            self._check_open()
        self._outputs.append(item)
        return ContextItem(item, self.origin(origin_kind, source))

    def set(self, **attributes: Any) -> None:
        """Add attributes (model settings, usage, timing details, ...)."""
        self.attributes.update(attributes)

    def close(self, status: StageStatus | str = StageStatus.OK, error: str | None = None) -> None:
        """Close the stage and hand its rows to the writer (and wait for them under ``sync``)."""
        if self._closed:
            self._check_open()
        self._closed = True
        run = self.run
        recorder = run.recorder
        run_id = run.id
        ended_at = time.time()
        bundle = StageRows()
        edges = self.edges
        packed_edges = pack_edges(edges) if edges else ""
        if packed_edges is None:  # an id holds a separator: the edges go row by row
            for src, kind in edges:
                bundle.add("fp_edge", (run_id, src, self.id, kind))
        outputs: str | None = ""
        if self._outputs:
            sent, stored_hash = recorder._sent, recorder._stored_hash
            if len(self._outputs) == 1:  # the usual case: no list comprehension to run
                item = self._outputs[0]
                hashes = [sent.get(item.hash) or stored_hash(item, bundle)]
            else:
                hashes = [sent.get(item.hash) or stored_hash(item, bundle) for item in self._outputs]
            outputs = pack_hashes(hashes)
            if outputs is None:
                for position, h in enumerate(hashes):
                    bundle.add("fp_output", (run_id, self.id, position, h))
        attributes = self.attributes
        bundle.stage = (
            self.id, run_id, self.seq, self.kind, self.name, str(status), self.started_at, ended_at,
            self.parent_id, recorder.redaction.json_text(attributes) if attributes else None,
            None if error is None else recorder.redaction.text(error), packed_edges, outputs,
        )
        if self._inputs or self._dropped:
            # a session's inferences each see the context the last one saw and what was added since
            conversation = f"{run.session_id or run_id}\x00{self.kind}"
            self.left_receipt = recorder._snapshots.add(bundle, run_id, self.id, self._inputs, self._dropped,
                                                        conversation)
        run._written(self.id, bundle, edges)
        if recorder.listeners:
            recorder._notify("stage_closed", self._recorded(str(status), ended_at, error))

    def _recorded(self, status: str, ended_at: float, error: str | None) -> RecordedStage:
        """What :meth:`close` wrote, as records (redacted), for the recorder's listeners."""
        recorder = self.run.recorder
        policy = recorder.redaction
        run_id = self.run.id
        items: dict[str, Item] = {}
        inputs: list[SnapshotEntry] = []
        named = self._dropped.recorded if isinstance(self._dropped, LeftOut) else None
        entries = [(ci, True, None) for ci in self._inputs] + [(ci, False, d) for ci, d in self._dropped]
        for position, (ci, included, dropped_by) in enumerate(entries):
            if named is not None and position == len(self._inputs):
                inputs += _named_entries(named, len(inputs))
            stored = recorder.stored_item(ci.item)
            items[stored.hash] = stored
            inputs.append(SnapshotEntry(len(inputs), stored.hash, ci.origin, included, dropped_by))
        if named is not None and len(entries) == len(self._inputs):
            inputs += _named_entries(named, len(inputs))
        outputs = []
        for item in self._outputs:
            stored = recorder.stored_item(item)
            items[stored.hash] = stored
            outputs.append(stored.hash)
        stage = Stage(
            self.id, run_id, self.seq, self.kind, self.name, status, self.started_at, ended_at, self.parent_id,
            policy.value(self.attributes) if self.attributes else {}, None if error is None else policy.text(error),
        )
        edges = tuple(Edge(run_id, src, self.id, kind) for src, kind in self.edges)
        return RecordedStage(stage, edges, tuple(inputs), tuple(outputs), items)

    @property
    def closed(self) -> bool:
        """True once the stage was closed."""
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise RecordingError(f"stage {self.kind} {self.id} of run {self.run.id} is already closed")

    def __enter__(self) -> StageRecording:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if not self._closed:
            if exc is None:
                self.close()
            else:
                self.close(StageStatus.ERROR, f"{type(exc).__name__}: {exc}")


def _named_entries(named: Recorded, start: int) -> list[SnapshotEntry]:
    """The entries a receipt names, numbered from ``start`` (the items themselves are not at hand:
    a listener gets their hashes and origins)."""
    return [SnapshotEntry(start + n, *unpack_entry(e, {}), False, named.reason) for n, e in enumerate(named.entries())]

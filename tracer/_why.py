"""`why`: the backward walk from an answer (or any item) to the context that produced it.

The walk goes item -> the stage that produced it -> that stage's inputs (for an inference, its
snapshot) -> each input's origin -> ..., across the runs of a session: history items point at the
earlier run that first produced them. Every node names a stored item or stage. Each item and each
stage is walked once; later mentions are marked ``seen`` (a memory fact reaches the answer through
the memory stage and again through the prompt composition: it is one suspect, shown once).
:func:`tracer.rank` orders the items by how much the answer rests on them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from ._names import resolve_item
from ._records import Item, Origin, OriginKind
from ._rundata import RunData
from .errors import NotFoundError

SHOWN_ABOVE = "shown_above"


class RunSource(Protocol):
    """Where `why` reads recordings from: a :class:`Store`, or the host's read API client."""

    def load_run(self, run_id: str) -> RunData:
        """Everything recorded about one run."""
        ...


@dataclass
class EvidenceNode:
    """A node of the evidence graph: an item (with the origin it had there) or a stage."""

    node: str  # "item" | "stage" | "shown_above" (``count`` items shown above, as one node: see shown_above())
    run_id: str | None
    stage_id: str | None = None
    stage_kind: str | None = None
    stage_name: str | None = None
    item_hash: str | None = None
    item_kind: str | None = None
    text: str | None = None
    origin: Origin | None = None
    seen: bool = False
    note: str | None = None  # a stage's own one-line account of itself (its ``why_note`` attribute)
    children: list[EvidenceNode] = field(default_factory=list)
    count: int = 0  # a "shown_above" node's number of items

    def shown(self) -> list[EvidenceNode]:
        """The children as a tree shows them: each run of items shown above as one node (:func:`shown_above`)."""
        return shown_above(self.children)

    def walk(self, depth: int = 0) -> Iterator[tuple[int, EvidenceNode]]:
        """Every node below and including this one, depth first, with its depth."""
        yield depth, self
        for child in self.children:
            yield from child.walk(depth + 1)

    def to_dict(self, texts: dict[str, str] | None = None) -> dict[str, Any]:
        """A JSON-ready form. With ``texts``, an item node carries no ``text``: its text goes into
        ``texts`` under its hash, once (:meth:`Evidence.to_dict` does that). A run of items shown
        above (see :func:`shown_above`) is one ``{"node": "shown_above", "count": n}`` node."""
        if self.node == SHOWN_ABOVE:
            return {"node": SHOWN_ABOVE, "count": self.count}
        out: dict[str, Any] = {"node": self.node, "run_id": self.run_id}
        if self.node == "stage":
            out.update(stage_id=self.stage_id, stage_kind=self.stage_kind, stage_name=self.stage_name)
            if self.note:
                out["note"] = self.note
        else:
            out.update(item_hash=self.item_hash, item_kind=self.item_kind)
            if texts is None:
                if not self.seen:
                    out["text"] = self.text
            elif self.text is not None and self.item_hash is not None:
                texts.setdefault(self.item_hash, self.text)
            if self.origin is not None:
                out["origin"] = {
                    "kind": self.origin.kind, "run_id": self.origin.run_id,
                    "stage_id": self.origin.stage_id, "source": self.origin.source,
                }
        if self.seen:
            out["seen"] = True
        if self.children:
            out["children"] = [c.to_dict(texts) for c in self.shown()]
        return out


def shown_above(children: list[EvidenceNode]) -> list[EvidenceNode]:
    """``children`` with each run of two or more items shown above (``seen``, not walked again) as
    one ``shown_above`` node counting them: a stage of a long session received the whole
    conversation, nearly all of it shown above, and listing each again made the tree (and
    ``why --json``) grow with the square of the session's length."""
    out: list[EvidenceNode] = []
    run: list[EvidenceNode] = []
    for child in [*children, None]:
        if child is not None and child.node == "item" and child.seen and not child.children:
            run.append(child)
            continue
        if len(run) > 1:
            out.append(EvidenceNode(SHOWN_ABOVE, run[0].run_id, count=len(run)))
        else:
            out.extend(run)
        run = []
        if child is not None:
            out.append(child)
    return out


@dataclass
class DroppedItem:
    """Context that was available to a stage but not sent, and what left it out.

    `why` lists an item once for each thing that left it out (a window, a cap), at the first stage
    of the walk whose context it was left out of: a window leaves an early message out of every
    later turn's context, so a long session listed it once per turn (600 turns of 30 KB: 74,800
    entries of 586 items, 2.2 GB of text)."""

    run_id: str
    stage_id: str
    item_hash: str
    item_kind: str
    text: str
    origin: Origin
    dropped_by: str


@dataclass
class Evidence:
    """The result of `why`: the evidence tree, what was left out of context, and the runs visited."""

    root: EvidenceNode
    not_in_context: list[DroppedItem]
    runs: list[str]

    def items(self) -> list[EvidenceNode]:
        """Every item node (first mention of each), in walk order."""
        return [n for _, n in self.root.walk() if n.node == "item" and not n.seen]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form: the tree, what was left out of context, the runs walked, and ``texts``,
        each item's text once under its hash (no node or entry carries a text of its own: a long
        session names the same big messages thousands of times)."""
        texts: dict[str, str] = {}
        root = self.root.to_dict(texts)
        for d in self.not_in_context:
            texts.setdefault(d.item_hash, d.text)
        return {
            "root": root,
            "texts": texts,
            "not_in_context": [
                {
                    "run_id": d.run_id, "stage_id": d.stage_id, "item_hash": d.item_hash,
                    "item_kind": d.item_kind, "dropped_by": d.dropped_by,
                    "origin": {"kind": d.origin.kind, "run_id": d.origin.run_id,
                               "stage_id": d.origin.stage_id, "source": d.origin.source},
                }
                for d in self.not_in_context
            ],
            "runs": self.runs,
        }


class _Walker:
    def __init__(self, source: RunSource, max_depth: int) -> None:
        self._source = source
        self._runs: dict[str, RunData] = {}
        self._referenced: set[str] = set()
        self._visited: list[str] = []  # runs the walk reached, in order  # runs named by loaded snapshots, not loaded yet
        self._seen_stages: set[str] = set()
        # each item is walked once from each origin: later mentions are marked seen (the same content
        # reached from another stage, e.g. a sub-agent's answer handed to its parent, is walked again)
        self._seen_items: set[tuple[str, Origin]] = set()
        self._max_depth = max_depth
        self.dropped: list[DroppedItem] = []
        self._dropped_seen: set[tuple[str, str]] = set()  # (item hash, what left it out) listed already

    def run(self, run_id: str) -> RunData:
        data = self._runs.get(run_id)
        if data is None:
            load_runs = getattr(self._source, "load_runs", None)
            if load_runs is None:
                data = self._source.load_run(run_id)
                self._remember(data)
                return data
            # load the run with every run the loaded ones point at and that is not loaded yet:
            # a walk across a session then takes a few round trips instead of one per run
            wanted = [run_id, *(r for r in self._referenced if r not in self._runs and r != run_id)]
            try:
                loaded: dict[str, RunData] = load_runs(wanted)
            except NotFoundError:
                loaded = load_runs([run_id])  # a referenced run is gone: load just this one
            for other in wanted[1:]:
                if other in loaded:
                    self._remember(loaded[other])
            data = loaded[run_id]
            self._remember(data)
        return data

    def _remember(self, data: RunData) -> None:
        self._runs[data.run.id] = data
        self._referenced.discard(data.run.id)
        self._referenced.update(
            e.origin.run_id for es in data.inputs.values() for e in es
            if e.origin.run_id and e.origin.run_id not in self._runs
        )

    def visit(self, run_id: str) -> None:
        if run_id not in self._visited:
            self._visited.append(run_id)

    def visited_runs(self) -> list[str]:
        return list(self._visited)

    def item_node(self, item: Item | None, item_hash: str, origin: Origin, depth: int) -> EvidenceNode:
        node = EvidenceNode(
            "item", origin.run_id, origin.stage_id, item_hash=item_hash,
            item_kind=item.kind if item else None, text=item.text if item else None, origin=origin,
        )
        key = (item_hash, origin)
        if key in self._seen_items:
            node.seen = True
            return node
        self._seen_items.add(key)
        if origin.stage_id and origin.run_id and depth < self._max_depth:
            stage_node = self.stage_node(origin.run_id, origin.stage_id, depth + 1)
            if stage_node is not None:
                node.children.append(stage_node)
        return node

    def stage_node(self, run_id: str, stage_id: str, depth: int) -> EvidenceNode | None:
        try:
            data = self.run(run_id)
            stage = data.stage(stage_id)
        except (NotFoundError, KeyError):
            return None
        self.visit(run_id)
        note = stage.attributes.get("why_note")
        node = EvidenceNode("stage", run_id, stage_id, stage.kind, stage.name,
                            note=note if isinstance(note, str) else None)
        if stage_id in self._seen_stages:
            node.seen = True
            return node
        self._seen_stages.add(stage_id)
        for entry in data.inputs.get(stage_id, []):
            item = data.items.get(entry.item_hash)
            if not entry.included:
                dropped_by = entry.dropped_by or "unknown"
                if (entry.item_hash, dropped_by) not in self._dropped_seen:
                    self._dropped_seen.add((entry.item_hash, dropped_by))
                    self.dropped.append(DroppedItem(run_id, stage_id, entry.item_hash, item.kind if item else "?",
                                                    item.text if item else "", entry.origin, dropped_by))
                continue
            if depth < self._max_depth:
                node.children.append(self.item_node(item, entry.item_hash, entry.origin, depth + 1))
        return node


def why(
    source: RunSource,
    run_id: str,
    item: str | None = None,
    *,
    depth: int = 32,
    on_run: Callable[[str], None] | None = None,
) -> Evidence:
    """The evidence graph for the answer of ``run_id`` (or for ``item``: its name, its hash or a unique
    prefix of it, resolved as every command resolves an item: :func:`~tracer._names.resolve_item`).

    ``depth`` is how many origins deep the walk goes: one origin is the step from an item to the
    stage that produced it and that stage's own inputs (two levels of the tree). The CLI's
    ``--depth`` and the read API's ``depth=`` are this number.

    Raises :class:`NotFoundError` when the run has no answer or no such item.
    """
    walker = _Walker(source, max_depth=2 * depth)
    data = walker.run(run_id)
    walker.visit(run_id)
    if item is None:
        target = data.answer_hash()
        if target is None:
            raise NotFoundError(f"run {run_id} has no answer to explain (status {data.run.status}); pass --item")
    else:
        target = resolve_item(data, item)
    producer = data.producer_of(target)
    if producer is not None:
        origin = Origin(OriginKind.STAGE, run_id, producer.id)
    else:
        origin = next(
            (e.origin for es in data.inputs.values() for e in es if e.item_hash == target),
            Origin(OriginKind.STAGE, run_id, None),
        )
    root = walker.item_node(data.items.get(target), target, origin, 0)
    return Evidence(root, walker.dropped, walker.visited_runs())


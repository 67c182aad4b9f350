"""The rows a recorder hands to the writer: items, and snapshots packed per stage."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._records import ContextItem, Edge, Item, Origin, SnapshotEntry
from ._schema import ENTRY_SEP, FIELD_NULL, FIELD_SEP
from ._writer import Bundle, StageRows


def item_row(item: Item) -> tuple[Any, ...]:
    text = item.text
    body = None if item.body == {"text": text} else item.canonical_body
    return (item.hash, item.kind, text, body)


_PACKING = re.compile("[\x1a-\x1f]")  # the separators of a packed snapshot (tracer._schema)


def _holds_separator(text: str) -> bool:
    """True when ``text`` holds one of the packed snapshot's separators (a printable text cannot)."""
    return not text.isprintable() and _PACKING.search(text) is not None


def pack_edges(edges: Sequence[tuple[str, str]]) -> str | None:
    """A stage's incoming edges (source, kind) packed for ``fp_stage.edges``; None when a value
    holds a separator (the edges then go to ``fp_edge`` row by row)."""
    if len(edges) == 1:  # most stages follow one other: no list to build
        src, kind = edges[0]
        text = src + kind
        return f"{src}{FIELD_SEP}{kind}" if text.isprintable() or not _holds_separator(text) else None
    if _holds_separator("".join([src + kind for src, kind in edges])):
        return None
    return ENTRY_SEP.join([f"{src}{FIELD_SEP}{kind}" for src, kind in edges])


def pack_hashes(hashes: Sequence[str]) -> str | None:
    """A stage's output hashes packed for ``fp_stage.outputs``; None when one holds a separator."""
    if len(hashes) == 1:
        only = hashes[0]
        return only if only and (only.isprintable() or not _holds_separator(only)) else None
    return None if "" in hashes or _holds_separator("".join(hashes)) else ENTRY_SEP.join(hashes)


def _pack_origin(origin: Origin) -> str:
    """The origin's fields joined by FIELD_SEP (NULL as FIELD_NULL), kept on the origin; "" when a
    field holds a separator (its snapshot then goes row by row)."""
    kind, run, stage, source = origin.kind, origin.run_id, origin.stage_id, origin.source
    text = f"{kind}{run or ''}{stage or ''}{source or ''}"
    if not text.isprintable() and _holds_separator(text):
        packed = ""
    else:
        packed = (f"{kind}{FIELD_SEP}{FIELD_NULL if run is None else run}{FIELD_SEP}"
                  f"{FIELD_NULL if stage is None else stage}{FIELD_SEP}{FIELD_NULL if source is None else source}")
    object.__setattr__(origin, "_packed", packed)
    return packed


class SnapshotPacker:
    """Packs stages' snapshots into ``fp_snapshot`` rows for one recorder.

    An entry (an item's stored hash and its origin's fields) is packed once and kept on its
    :class:`ContextItem` with this packer's token: a conversation's items reappear in every later
    snapshot, so packing a snapshot is mostly one attribute read per entry and a join. The token
    changes when the recorder forgets which items it sent (``forget``), since a kept entry stands
    for "this item's row was sent".
    """

    def __init__(self, sent: Mapping[str, str], stored_hash: Callable[[Item, Bundle | StageRows], str]) -> None:
        self._sent = sent  # item hash -> stored hash, for items already handed to the writer
        self._stored_hash = stored_hash  # adds a new item's row to a bundle; returns its stored hash
        self._token = object()

    def forget(self) -> None:
        """The recorder forgot the items it sent: entries packed so far no longer count."""
        self._token = object()

    def add(
        self,
        bundle: Bundle | StageRows,
        run_id: str,
        stage_id: str,
        items: Sequence[ContextItem],
        dropped: Sequence[tuple[ContextItem, str]],
    ) -> None:
        """A stage's snapshot (``items`` sent, then ``dropped`` with why) into ``bundle``: one
        ``fp_snapshot`` row, or (a value holding a separator) ``fp_entry`` rows one by one."""
        entries = [*items, *(ci for ci, _ in dropped)] if dropped else items
        token = self._token
        packed = [e[1] if (e := ci._entry) is not None and e[0] is token else self._entry(ci, bundle) for ci in entries]
        if dropped:
            reasons = [reason for _, reason in dropped]
            packed_dropped = ENTRY_SEP.join([FIELD_NULL] * len(items) + reasons)
            unpackable = "" in reasons or _holds_separator("".join(reasons))
        else:
            packed_dropped, unpackable = "", False
        if not unpackable and "" not in packed:
            flags = "1" * len(items) + "0" * len(dropped)
            bundle.add("fp_snapshot", (run_id, stage_id, ENTRY_SEP.join(packed), flags, packed_dropped))
            return
        for position, ci in enumerate(entries):  # a value holds a separator: these rows go one by one
            o = ci.origin
            included = position < len(items)
            reason = None if included else dropped[position - len(items)][1]
            item_hash = self._sent.get(ci.item.hash) or self._stored_hash(ci.item, bundle)
            bundle.add("fp_entry", (run_id, stage_id, position, item_hash, o.kind, o.run_id, o.stage_id, o.source,
                                    included, reason))

    def _entry(self, ci: ContextItem, bundle: Bundle | StageRows) -> str:
        """The packed entry of ``ci`` (its item's row joins ``bundle`` if not sent yet), kept on it;
        "" when a value holds a separator."""
        item_hash = self._sent.get(ci.item.hash) or self._stored_hash(ci.item, bundle)
        origin = ci.origin._packed or _pack_origin(ci.origin)
        if not origin or (not item_hash.isprintable() and _holds_separator(item_hash)):
            return ""
        entry = f"{item_hash}{FIELD_SEP}{origin}"
        object.__setattr__(ci, "_entry", (self._token, entry))
        return entry


# ---------------------------------------------------------------------- reading packed rows back


def unpack_edges(run_id: str, dst: str, packed: str) -> list[Edge]:
    """The edges packed in stage ``dst``'s row (``fp_stage.edges``)."""
    if not packed:
        return []
    return [Edge(run_id, src, dst, kind) for src, _, kind in (e.partition(FIELD_SEP) for e in packed.split(ENTRY_SEP))]


def unpack_hashes(packed: str) -> list[str]:
    """The output hashes packed in a stage's row (``fp_stage.outputs``)."""
    return packed.split(ENTRY_SEP) if packed else []


def unpack_snapshot(entries: str, flags: str, dropped: str, origins: dict[str, Origin]) -> list[SnapshotEntry]:
    """The entries of a packed ``fp_snapshot`` row. ``origins`` interns the origins read so far
    (a conversation's items come from few places), and each keeps its packed form."""
    if not entries:
        return []
    reasons = dropped.split(ENTRY_SEP) if dropped else None
    out = []
    for position, entry in enumerate(entries.split(ENTRY_SEP)):
        item_hash, _, packed = entry.partition(FIELD_SEP)
        origin = origins.get(packed)
        if origin is None:
            kind, run, stage, source = (None if v == FIELD_NULL else v for v in packed.split(FIELD_SEP))
            origin = origins[packed] = Origin(kind or "", run, stage, source)
            object.__setattr__(origin, "_packed", packed)
        reason = None if reasons is None or reasons[position] == FIELD_NULL else reasons[position]
        out.append(SnapshotEntry(position, item_hash, origin, flags[position] == "1", reason))
    return out

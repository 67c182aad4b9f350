"""The rows a recorder hands to the writer: items, and snapshots packed per stage."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._records import ContextItem, Item, Origin
from ._redaction import encode_json
from ._schema import ENTRY_SEP, FIELD_NULL, FIELD_SEP
from ._writer import Bundle


def json_text(value: Any) -> str | None:
    return None if value is None else encode_json(value)


def item_row(item: Item) -> tuple[Any, ...]:
    text = item.text
    body = None if item.body == {"text": text} else item.canonical_body
    return (item.hash, item.kind, text, body)


_PACKING = re.compile("[\x1a-\x1f]")  # the separators of a packed snapshot (tracer._schema)


def pack_edges(edges: Sequence[tuple[str, str]]) -> str | None:
    """A stage's incoming edges (source, kind) packed for ``fp_stage.edges``; None when a value
    holds a separator (the edges then go to ``fp_edge`` row by row)."""
    if _PACKING.search("".join([src + kind for src, kind in edges])):
        return None
    return ENTRY_SEP.join([f"{src}{FIELD_SEP}{kind}" for src, kind in edges])


def pack_hashes(hashes: Sequence[str]) -> str | None:
    """A stage's output hashes packed for ``fp_stage.outputs``; None when one holds a separator."""
    return None if "" in hashes or _PACKING.search("".join(hashes)) else ENTRY_SEP.join(hashes)


def _pack_origin(origin: Origin) -> str:
    """The origin's fields joined by FIELD_SEP (NULL as FIELD_NULL), kept on the origin; "" when a
    field holds a separator (its snapshot then goes row by row)."""
    fields = (origin.kind, origin.run_id, origin.stage_id, origin.source)
    packed = FIELD_SEP.join([FIELD_NULL if v is None else v for v in fields])
    if _PACKING.search("".join([v for v in fields if v is not None])):
        packed = ""
    object.__setattr__(origin, "_packed", packed)
    return packed


def add_snapshot(
    bundle: Bundle,
    run_id: str,
    stage_id: str,
    items: Sequence[ContextItem],
    dropped: Sequence[tuple[ContextItem, str]],
    sent: Mapping[str, str],
    stored_hash: Callable[[Item, Bundle], str],
) -> None:
    """A stage's snapshot (``items`` sent, then ``dropped`` with why) into ``bundle`` as one packed
    ``fp_snapshot`` row (see ``tracer._schema``): the work per entry is a dictionary lookup and two
    joins.

    ``sent`` maps the hashes of items already handed to the writer to their stored hashes;
    ``stored_hash`` adds a new item's row to the bundle and returns its stored hash.
    """
    entries = [*items, *(ci for ci, _ in dropped)] if dropped else items
    hash_list = [sent.get(ci.item.hash) or stored_hash(ci.item, bundle) for ci in entries]
    hashes = ENTRY_SEP.join(hash_list)
    origins = [ci.origin._packed or _pack_origin(ci.origin) for ci in entries]
    if dropped:
        reasons = [reason for _, reason in dropped]
        packed_dropped = ENTRY_SEP.join([FIELD_NULL] * len(items) + reasons)
        unpackable = "" in reasons or _PACKING.search("".join(reasons)) is not None
    else:
        packed_dropped, unpackable = "", False
    if not unpackable and "" not in origins and not _PACKING.search("".join(hash_list)):
        flags = "1" * len(items) + "0" * len(dropped)
        row = (run_id, stage_id, hashes, ENTRY_SEP.join(origins), flags, packed_dropped)
        bundle.rows.setdefault("fp_snapshot", []).append(row)
        return
    rows = bundle.rows.setdefault("fp_entry", [])  # a value holds a separator: these rows go one by one
    for position, (ci, item_hash) in enumerate(zip(entries, hash_list, strict=True)):
        o = ci.origin
        included = position < len(items)
        reason = None if included else dropped[position - len(items)][1]
        rows.append((run_id, stage_id, position, item_hash, o.kind, o.run_id, o.stage_id, o.source, included, reason))

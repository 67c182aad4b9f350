"""The rows a recorder hands to the writer: items, and snapshots packed per stage."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._records import ContextItem, Item, Origin
from ._redaction import encode_json
from ._writer import FIELD_SEP, NULL_MARK, ROW_SEP, UNIT_SEP, Bundle


def json_text(value: Any) -> str | None:
    return None if value is None else encode_json(value)


def item_row(item: Item) -> tuple[Any, ...]:
    text = item.text
    body = None if item.body == {"text": text} else item.canonical_body
    return (item.hash, item.kind, text, body)


def _pack_origin(origin: Origin) -> str:
    """The origin's fields joined by FIELD_SEP (NULL as NULL_MARK), kept on the origin; "" when a
    field holds a separator (its snapshot then goes the plain way)."""
    fields = (origin.kind, origin.run_id, origin.stage_id, origin.source)
    packed = FIELD_SEP.join([NULL_MARK if v is None else v for v in fields])
    if (
        packed.count(FIELD_SEP) != 3
        or packed.count(NULL_MARK) != fields.count(None)
        or UNIT_SEP in packed
        or ROW_SEP in packed
    ):
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
    """A stage's snapshot (``items`` sent, then ``dropped`` with why) into ``bundle``, packed into
    a few strings (see ``_writer``): the work per entry is a dictionary lookup and two joins.

    ``sent`` maps the hashes of items already handed to the writer to their stored hashes;
    ``stored_hash`` adds a new item's row to the bundle and returns its stored hash.
    """
    entries = [*items, *(ci for ci, _ in dropped)] if dropped else items
    hashes = [sent.get(ci.item.hash) or stored_hash(ci.item, bundle) for ci in entries]
    origins = [ci.origin._packed or _pack_origin(ci.origin) for ci in entries]
    h = UNIT_SEP.join(hashes)
    if dropped:
        reasons = [reason for _, reason in dropped]
        d = UNIT_SEP.join([NULL_MARK] * len(items) + reasons)
        bad_reasons = "" in reasons or d.count(UNIT_SEP) != len(entries) - 1 or ROW_SEP in d
    else:
        d, bad_reasons = "", False
    if "" not in origins and h.count(UNIT_SEP) == len(entries) - 1 and ROW_SEP not in h and not bad_reasons:
        flags = "1" * len(items) + "0" * len(dropped)
        bundle.snapshots.append((run_id, stage_id, h, UNIT_SEP.join(origins), flags, d))
        return
    rows = bundle.rows.setdefault("fp_entry", [])  # a value holds a separator: these rows go the plain way
    for position, (ci, item_hash) in enumerate(zip(entries, hashes, strict=True)):
        o = ci.origin
        included = position < len(items)
        reason = None if included else dropped[position - len(items)][1]
        rows.append((run_id, stage_id, position, item_hash, o.kind, o.run_id, o.stage_id, o.source, included, reason))

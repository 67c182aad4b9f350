"""The rows a recorder hands to the writer: items, and snapshots packed per stage."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._records import ContextItem, Item
from ._writer import CHUNK_SEP, NULL_MARK, ROW_SEP, UNIT_SEP, Bundle


def json_text(value: Any) -> str | None:
    return None if value is None else json.dumps(value, default=str)


def item_row(item: Item) -> tuple[Any, ...]:
    text = item.text
    body = None if item.body == {"text": text} else item.canonical_body
    return (item.hash, item.kind, text, body)


def add_snapshot(
    bundle: Bundle,
    run_id: str,
    stage_id: str,
    inputs: Sequence[tuple[ContextItem, bool, str | None]],
    sent: Mapping[str, str],
    stored_hash: Callable[[Item, Bundle], str],
) -> None:
    """A stage's snapshot into ``bundle``, packed into one string per column (see ``_writer``).

    ``sent`` maps the hashes of items already handed to the writer to their stored hashes;
    ``stored_hash`` adds a new item's row to the bundle and returns its stored hash.
    """
    hashes = [sent.get(ci.item.hash) or stored_hash(ci.item, bundle) for ci, _, _ in inputs]
    origins = [ci.origin for ci, _, _ in inputs]
    null, sep = NULL_MARK, UNIT_SEP
    runs = [o.run_id for o in origins]
    stages = [o.stage_id for o in origins]
    sources = [o.source for o in origins]
    dropped = [d for _, _, d in inputs]
    columns = (
        sep.join(hashes),
        sep.join([o.kind for o in origins]),
        sep.join([null if v is None else v for v in runs]),
        sep.join([null if v is None else v for v in stages]),
        sep.join([null if v is None else v for v in sources]),
        sep.join([null if v is None else v for v in dropped]),
    )
    whole = "".join(columns)
    nulls = runs.count(None) + stages.count(None) + sources.count(None) + dropped.count(None)
    if (
        whole.count(sep) == 6 * (len(inputs) - 1)
        and whole.count(null) == nulls
        and ROW_SEP not in whole
        and CHUNK_SEP not in whole
    ):
        h, k, r, s, src, d = columns
        flags = "".join(["1" if included else "0" for _, included, _ in inputs])
        bundle.snapshots.append((run_id, stage_id, h, k, r, s, src, flags, d))
        return
    for position, ((ci, included, dropped_by), item_hash) in enumerate(zip(inputs, hashes, strict=True)):
        o = ci.origin  # a value holds a separator: these rows go the plain way
        bundle.add(
            "fp_entry",
            (run_id, stage_id, position, item_hash, o.kind, o.run_id, o.stage_id, o.source, included, dropped_by),
        )

"""Evidence back from its JSON form (what a host's read API sends for ``why``).

The form carries each item's text once, in ``texts`` under its hash; a run of items shown above
is one ``shown_above`` node with their count (see :meth:`tracer.Evidence.to_dict`). A host of an
earlier version put the text on each node (a node marked ``seen`` had none): both are read.
"""

from __future__ import annotations

from typing import Any

from tracer import SHOWN_ABOVE, DroppedItem, Evidence, EvidenceNode, Origin


def _origin(data: dict[str, Any] | None) -> Origin | None:
    if not data:
        return None
    return Origin(str(data["kind"]), data.get("run_id"), data.get("stage_id"), data.get("source"))


def _node(data: dict[str, Any], texts: dict[str, str]) -> EvidenceNode:
    if data["node"] == SHOWN_ABOVE:  # a run of items shown above, as one line of the tree
        return EvidenceNode(SHOWN_ABOVE, None, count=int(data["count"]))
    item_hash = data.get("item_hash")
    return EvidenceNode(
        node=str(data["node"]), run_id=data.get("run_id"), stage_id=data.get("stage_id"),
        stage_kind=data.get("stage_kind"), stage_name=data.get("stage_name"), item_hash=item_hash,
        item_kind=data.get("item_kind"), text=data.get("text", texts.get(item_hash or "")),
        origin=_origin(data.get("origin")), seen=bool(data.get("seen", False)),
        children=[_node(c, texts) for c in data.get("children", [])],
    )


def evidence_from_dict(data: dict[str, Any]) -> Evidence:
    """An :class:`tracer.Evidence` from ``Evidence.to_dict()``'s form; a ValueError says what is wrong."""
    try:
        texts = {str(k): str(v) for k, v in (data.get("texts") or {}).items()}
        dropped = [
            DroppedItem(
                run_id=d["run_id"], stage_id=d["stage_id"], item_hash=d["item_hash"], item_kind=d["item_kind"],
                text=d.get("text") or texts.get(d["item_hash"], ""), origin=_origin(d["origin"]) or Origin("stage"),
                dropped_by=d.get("dropped_by") or "unknown",
            )
            for d in data.get("not_in_context", [])
        ]
        root = _node(data["root"], texts)
        texts = {n.item_hash: n.text for _, n in root.walk()
                 if n.node == "item" and not n.seen and n.item_hash and n.text is not None}
        for _, n in root.walk():  # (an earlier version's node walked above comes without its text)
            if n.node == "item" and n.seen and n.text is None:
                n.text = texts.get(n.item_hash or "")
        return Evidence(root, dropped, list(data.get("runs", [])))
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not evidence (Evidence.to_dict form expected): {exc!r}") from exc

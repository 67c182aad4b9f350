"""Evidence back from its JSON form (what a host's read API sends for ``why``)."""

from __future__ import annotations

from typing import Any

from tracer import DroppedItem, Evidence, EvidenceNode, Origin


def _origin(data: dict[str, Any] | None) -> Origin | None:
    if not data:
        return None
    return Origin(str(data["kind"]), data.get("run_id"), data.get("stage_id"), data.get("source"))


def _node(data: dict[str, Any]) -> EvidenceNode:
    return EvidenceNode(
        node=str(data["node"]), run_id=data.get("run_id"), stage_id=data.get("stage_id"),
        stage_kind=data.get("stage_kind"), stage_name=data.get("stage_name"), item_hash=data.get("item_hash"),
        item_kind=data.get("item_kind"), text=data.get("text"), origin=_origin(data.get("origin")),
        seen=bool(data.get("seen", False)), children=[_node(c) for c in data.get("children", [])],
    )


def evidence_from_dict(data: dict[str, Any]) -> Evidence:
    """An :class:`tracer.Evidence` from ``Evidence.to_dict()``'s form; a ValueError says what is wrong."""
    try:
        dropped = [
            DroppedItem(
                run_id=d["run_id"], stage_id=d["stage_id"], item_hash=d["item_hash"], item_kind=d["item_kind"],
                text=d.get("text") or "", origin=_origin(d["origin"]) or Origin("stage"),
                dropped_by=d.get("dropped_by") or "unknown",
            )
            for d in data.get("not_in_context", [])
        ]
        root = _node(data["root"])
        texts = {n.item_hash: n.text for _, n in root.walk() if n.node == "item" and not n.seen}
        for _, n in root.walk():  # a node walked above comes without its text (Evidence.to_dict)
            if n.node == "item" and n.seen and n.text is None:
                n.text = texts.get(n.item_hash)
        return Evidence(root, dropped, list(data.get("runs", [])))
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not evidence (Evidence.to_dict form expected): {exc!r}") from exc

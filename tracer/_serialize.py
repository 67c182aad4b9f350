"""JSON forms of the records, shared by the CLI's ``--json``, the host's read API and its clients."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ._records import Edge, Item, Origin, Run, SnapshotEntry, Stage
from ._rundata import RunData


def run_to_dict(run: Run) -> dict[str, Any]:
    """A run as JSON."""
    out = asdict(run)
    out["labels"] = list(run.labels)
    return out


def run_from_dict(data: dict[str, Any]) -> Run:
    """A run from :func:`run_to_dict`'s form."""
    fields = dict(data)
    fields["labels"] = tuple(fields.get("labels") or ())
    return Run(**fields)


def origin_to_dict(origin: Origin) -> dict[str, Any]:
    """An origin as JSON."""
    return {"kind": origin.kind, "run_id": origin.run_id, "stage_id": origin.stage_id, "source": origin.source}


def origin_from_dict(data: dict[str, Any]) -> Origin:
    """An origin from :func:`origin_to_dict`'s form."""
    return Origin(data["kind"], data.get("run_id"), data.get("stage_id"), data.get("source"))


def rundata_to_dict(data: RunData) -> dict[str, Any]:
    """Everything recorded about a run, as JSON."""
    return {
        "run": run_to_dict(data.run),
        "stages": [asdict(s) for s in data.stages],
        "edges": [asdict(e) for e in data.edges],
        "inputs": {
            stage_id: [
                {"position": e.position, "item_hash": e.item_hash, "origin": origin_to_dict(e.origin),
                 "included": e.included, "dropped_by": e.dropped_by}
                for e in entries
            ]
            for stage_id, entries in data.inputs.items()
        },
        "outputs": data.outputs,
        "items": {h: {"kind": i.kind, "body": i.body} for h, i in data.items.items()},
    }


def rundata_from_dict(data: dict[str, Any]) -> RunData:
    """A :class:`RunData` from :func:`rundata_to_dict`'s form; a ValueError says what is wrong."""
    try:
        return RunData(
            run=run_from_dict(data["run"]),
            stages=[Stage(**s) for s in data["stages"]],
            edges=[Edge(**e) for e in data["edges"]],
            inputs={
                stage_id: [
                    SnapshotEntry(e["position"], e["item_hash"], origin_from_dict(e["origin"]), e["included"],
                                  e.get("dropped_by"))
                    for e in entries
                ]
                for stage_id, entries in data["inputs"].items()
            },
            outputs={k: list(v) for k, v in data["outputs"].items()},
            items={h: Item(i["kind"], i["body"], h) for h, i in data["items"].items()},
        )
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not a recorded run: {exc!r}") from exc

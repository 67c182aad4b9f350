"""Both recording sources give the screens the same records: a store file, and a host's read API."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from explorer import HostSource, RecordingSource, SourceError, StoreSource, evidence_from_dict
from tracer import (
    SHOWN_ABOVE,
    Evidence,
    EvidenceNode,
    RunData,
    RunFilter,
    Store,
    run_to_dict,
    rundata_to_dict,
    why,
)

ALL = RunFilter()


class JsonClient:
    """A stand-in for hosting.RecordingsClient that answers in JSON forms, as a host would."""

    base_url = "http://127.0.0.1:9"

    def __init__(self, store: Store) -> None:
        self.store = store

    def list_runs(self, where: RunFilter = ALL, *, limit: int = 50, offset: int = 0) -> list[dict[str, Any]]:
        return [run_to_dict(r) for r in self.store.list_runs(where, limit=limit, offset=offset)]

    def count_runs(self, where: RunFilter = ALL) -> int:
        return self.store.count_runs(where)

    def get_run(self, run_id: str) -> dict[str, Any]:
        return run_to_dict(self.store.get_run(run_id))

    def load_run(self, run_id: str, *, snapshots: Sequence[str] | None = None) -> dict[str, Any]:
        return rundata_to_dict(self.store.load_run(run_id, snapshots=snapshots))

    def load_snapshots(self, run_id: str, stage_ids: Sequence[str]) -> dict[str, Any]:
        inputs, items = self.store.load_snapshots(run_id, stage_ids)
        return rundata_to_dict(RunData(self.store.get_run(run_id), [], [], inputs=inputs, items=items))

    def resolve_run_id(self, ref: str) -> str:
        return self.store.resolve_run_id(ref)

    def session_runs(self, session_id: str) -> list[dict[str, Any]]:
        return [run_to_dict(r) for r in self.store.session_runs(session_id)]

    def why(self, run_id: str, item: str | None = None) -> dict[str, Any]:
        return why(self.store, run_id, item).to_dict()


@pytest.fixture
def store(sample_path: Path) -> Any:
    with Store.open(sample_path, read_only=True) as opened:
        yield opened


def test_a_host_source_reads_the_same_records_as_the_store(store: Store, wrong_run: str) -> None:
    local, remote = StoreSource(store), HostSource(JsonClient(store))
    assert isinstance(local, RecordingSource) and isinstance(remote, RecordingSource)
    where = RunFilter(session_id="trip-7f3a")
    assert remote.list_runs(where, limit=2, offset=1) == local.list_runs(where, limit=2, offset=1)
    assert remote.count_runs(where) == local.count_runs(where) == 3
    assert remote.get_run(wrong_run) == local.get_run(wrong_run)
    assert remote.session_runs("trip-7f3a") == local.session_runs("trip-7f3a")
    assert remote.resolve_run_id("r-000003") == wrong_run
    assert remote.load_run(wrong_run).stages == local.load_run(wrong_run).stages
    assert remote.label == "http://127.0.0.1:9" and remote.live and not local.live


def test_both_sources_read_a_run_a_stage_at_a_time_alike(store: Store, wrong_run: str) -> None:
    local, remote = StoreSource(store), HostSource(JsonClient(store))
    whole = store.load_run(wrong_run)
    inference = whole.inferences()[-1].id
    outline = remote.load_outline(wrong_run, [inference])
    assert outline == local.load_outline(wrong_run, [inference])
    assert outline.stages == whole.stages and outline.inputs == {inference: whole.inputs[inference]}
    rest = [s.id for s in whole.stages if s.id != inference]
    inputs, items = remote.load_snapshots(wrong_run, rest)
    assert (inputs, items) == local.load_snapshots(wrong_run, rest)
    outline.inputs.update(inputs)
    outline.items.update(items)
    assert outline == whole


def test_evidence_survives_its_json_form(store: Store, wrong_run: str) -> None:
    evidence = why(store, wrong_run)
    back = evidence_from_dict(evidence.to_dict())
    assert isinstance(back, Evidence)
    assert back.to_dict() == evidence.to_dict()
    def shown(node: EvidenceNode) -> list[EvidenceNode]:  # the tree as it is shown (and sent)
        return [node, *(n for c in node.shown() for n in shown(c))]

    walked, sent = shown(evidence.root), list(n for _, n in back.root.walk())
    assert any(n.seen and n.node == "item" for n in walked)
    assert any(n.node == SHOWN_ABOVE and n.count > 1 for n in sent), "a run of items shown above is one node"
    assert [n.text for n in sent] == [n.text for n in walked], "a node walked above gets its text back"
    def nodes(d: dict[str, Any]) -> list[dict[str, Any]]:
        return [d, *(n for c in d.get("children", []) for n in nodes(c))]

    assert not [n for n in nodes(evidence.to_dict()["root"]) if n.get("seen") and "text" in n], "sent once"
    assert HostSource(JsonClient(store)).why(wrong_run).to_dict() == evidence.to_dict()


def test_a_host_that_sends_something_else_is_named_in_the_error(store: Store) -> None:
    class Broken(JsonClient):
        def why(self, run_id: str, item: str | None = None) -> Any:
            return ["not", "evidence"]

        def load_run(self, run_id: str, *, snapshots: Sequence[str] | None = None) -> dict[str, Any]:
            return {"run": {}}

        def load_snapshots(self, run_id: str, stage_ids: Sequence[str]) -> dict[str, Any]:
            return {"inputs": {}}

    source = HostSource(Broken(store))
    with pytest.raises(SourceError, match=r"127\.0\.0\.1:9 answered why"):
        source.why("r-000003")
    with pytest.raises(SourceError, match="sent run r-000003 in a form"):
        source.load_run("r-000003")
    with pytest.raises(SourceError, match="sent run r-000003 in a form"):
        source.load_outline("r-000003")
    with pytest.raises(SourceError, match="sent snapshots of run r-000003 in a form"):
        source.load_snapshots("r-000003", ["s-1"])
    with pytest.raises(ValueError, match="not evidence"):
        evidence_from_dict({"runs": []})

"""Recording listeners: what the recorder tells them live, and the same events from a stored run."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from tracer import (
    ContextItem,
    Item,
    ItemKind,
    Origin,
    OriginKind,
    RecordedStage,
    Recorder,
    RecordingListener,
    Run,
    Store,
    feed_listener,
)
from tracer.otel import exporter_from_env

SECRET = "sk-live0123456789abcdefghijkl"


class Journal(RecordingListener):
    """Writes down every event it is told about."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def run_started(self, run: Run, *, resumed: bool = False, first_seq: int = 0) -> None:
        self.events.append(("start", run.id, run.status, run.input, resumed, first_seq))

    def stage_closed(self, recorded: RecordedStage) -> None:
        s = recorded.stage
        self.events.append((
            "stage", s.id, s.seq, s.kind, s.status, s.started_at, s.ended_at, dict(s.attributes),
            [(e.item_hash, e.included, e.dropped_by, e.origin) for e in recorded.inputs],
            [i.body for i in recorded.output_items()], [(e.src, e.kind) for e in recorded.edges],
        ))

    def run_ended(self, run: Run) -> None:
        self.events.append(("end", run.id, run.status, run.output, run.tokens_in))


def _record(recorder: Recorder) -> str:
    run = recorder.start_run(agent="a", input=f"my key is {SECRET}", session_id="s")
    with run.stage("input", "user message") as first:
        user = first.output(Item.of_text(ItemKind.USER, f"my key is {SECRET}"), origin_kind=OriginKind.USER)
    with run.stage("inference", "turn 1", after=[first]) as inference:
        old = ContextItem(Item.of_text(ItemKind.USER, "older"), Origin(OriginKind.USER))
        inference.inputs([user], dropped=[(old, "window")])
        inference.output(Item.of_text(ItemKind.ASSISTANT, "noted"))
        inference.set(model="m", api_key="abc", input_tokens=3)
    run.end("answered", output="noted", tokens_in=3)
    return run.id


def test_listeners_get_the_redacted_records_live_and_the_same_from_the_store(tmp_path: Path) -> None:
    live = Journal()
    with Store.open(tmp_path / "fp.duckdb") as store:
        run_id = _record(Recorder(store, listeners=[live]))
        store.flush()
        stored = Journal()
        feed_listener(store.load_run(run_id), stored)
    assert [e[0] for e in live.events] == ["start", "stage", "stage", "end"]
    assert live.events == stored.events
    start, _, inference, end = live.events
    assert start[3] == "my key is [REDACTED]"
    assert inference[7] == {"model": "m", "api_key": "[REDACTED]", "input_tokens": 3}
    assert inference[9] == [{"text": "noted"}]
    assert [(included, dropped) for _, included, dropped, _ in inference[8]] == [(True, None), (False, "window")]
    assert end[2:] == ("answered", "noted", 3)
    assert SECRET not in repr(live.events)


def test_a_failing_listener_never_breaks_the_run(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    class Broken(RecordingListener):
        def stage_closed(self, recorded: RecordedStage) -> None:
            raise RuntimeError("exporter down")

    after = Journal()
    with Store.open(tmp_path / "fp.duckdb") as store, caplog.at_level(logging.ERROR):
        run_id = _record(Recorder(store, listeners=[Broken(), after]))
        store.flush()
        assert store.get_run(run_id).status == "answered"
    assert [e[0] for e in after.events] == ["start", "stage", "stage", "end"]  # the next listener still hears
    assert "exporter down" in caplog.text


def test_exporter_from_env_follows_the_standard_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    assert exporter_from_env() is None
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    exporter = exporter_from_env()
    assert exporter is not None
    exporter.shutdown()
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert exporter_from_env() is None

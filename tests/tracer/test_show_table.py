"""`footprint show`'s stage table: every column is named."""

from __future__ import annotations

from pathlib import Path

from tracer import Recorder, Store
from tracer._render import show_run


def test_every_column_of_the_stage_table_has_a_heading(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.duckdb")
    run = Recorder(store).start_run(agent="a", input="go")
    run.stage("input", "user message").close()
    run.end("answered", output="done")
    store.flush()
    data = store.load_run(run.id)
    store.close()
    lines = show_run(data, {})
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["#", "kind"])
    headings, rule = lines[header].split(), lines[header + 1].split()
    assert len(headings) == len(rule), (lines[header], lines[header + 1])  # one heading over each column
    assert headings[-1] == "detail"

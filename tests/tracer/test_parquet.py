"""Parquet export of the store's views, through the API and `footprint export parquet`."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from agent import Agent, tool
from agent.providers import ScriptedModel, calls
from explorer.cli import cli
from tracer import ExportError, Recorder, Store
from tracer._parquet import PARQUET_VIEWS, export_parquet


@tool()
async def lookup(city: str) -> str:
    """Weather for a city.

    Args:
        city: the city
    """
    return f"sunny in {city}"


async def _record(db: Path, runs: int = 2) -> list[str]:
    with Store.open(db) as store:
        agent = Agent("weather", provider=ScriptedModel([calls(("lookup", {"city": "Paris"})), "Sunny."], repeat=True),
                      tools=[lookup], recorder=Recorder(store), session_id="s-1")
        return [(await agent.run(f"weather {n}?")).run_id for n in range(runs)]


async def test_every_view_becomes_a_parquet_file_with_the_same_rows(tmp_path: Path) -> None:
    db = tmp_path / "fp.duckdb"
    run_ids = await _record(db)
    with Store.open(db, read_only=True) as store:
        files = export_parquet(store, tmp_path / "out")
        expected = {view: store.query(f"SELECT count(*) FROM {view}")[0][0] for view in PARQUET_VIEWS}
        stage_columns = [r[0] for r in store.query("SELECT column_name FROM (DESCRIBE stages)")]
    assert [f.view for f in files] == list(PARQUET_VIEWS)
    assert {f.view: f.rows for f in files} == expected
    con = duckdb.connect()
    for f in files:
        assert f.path == tmp_path / "out" / f"{f.view}.parquet"
        assert con.execute(f"SELECT count(*) FROM read_parquet('{f.path}')").fetchone()[0] == expected[f.view]
    runs = con.execute(f"SELECT id, status, labels FROM read_parquet('{tmp_path / 'out' / 'runs.parquet'}')").fetchall()
    assert sorted(r[0] for r in runs) == sorted(run_ids) and {r[1] for r in runs} == {"answered"}
    parquet_columns = [r[0] for r in con.execute(
        f"SELECT column_name FROM (DESCRIBE SELECT * FROM read_parquet('{tmp_path / 'out' / 'stages.parquet'}'))"
    ).fetchall()]
    assert parquet_columns == stage_columns
    assert not list((tmp_path / "out").glob(".*partial"))


async def test_cli_exports_chosen_views_and_reports_rows(tmp_path: Path) -> None:
    db = tmp_path / "fp.duckdb"
    await _record(db, runs=1)
    target = tmp_path / "it's here"  # a quote in the path must not break the COPY statement
    result = CliRunner().invoke(cli, ["export", "parquet", str(target), "--db", str(db), "--view", "runs",
                                      "--view", "context", "--compression", "snappy"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in target.iterdir()) == ["context.parquet", "runs.parquet"]
    assert "runs.parquet  1 row(s)" in result.stdout
    again = CliRunner().invoke(cli, ["export", "parquet", str(target), "--db", str(db), "--view", "runs",
                                     "--view", "runs"])
    assert again.exit_code == 0  # files are replaced
    assert again.stdout.count("runs.parquet") == 1, again.stdout  # a view named twice is written once


def test_errors_name_what_was_wrong(tmp_path: Path) -> None:
    db = tmp_path / "fp.duckdb"
    Store.open(db).close()
    with Store.open(db, read_only=True) as store:
        with pytest.raises(ExportError, match="no view named fp_run"):
            export_parquet(store, tmp_path / "out", views=["fp_run"])
        with pytest.raises(ExportError, match="compression 'lz4'"):
            export_parquet(store, tmp_path / "out", compression="lz4")
        blocker = tmp_path / "file"
        blocker.write_text("")
        with pytest.raises(ExportError, match="cannot create the export directory"):
            export_parquet(store, blocker / "out")
    result = CliRunner().invoke(cli, ["export", "parquet", str(tmp_path / "x"), "--db", str(tmp_path / "none.duckdb")])
    assert result.exit_code != 0

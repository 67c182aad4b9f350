"""The runs table pages in from the source as the cursor nears the end, and refreshes live."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from explorer import ExplorerApp
from explorer.components.runs_table import PAGE, RunsTable
from explorer.screens.runs import DEFAULT_FILTER, FILTERS_WIDTH, filters_label
from tests.tracer.damage import damaged_copies
from tracer import NotAStoreError, Recorder, Store


def _record(path: Path, count: int, start: int = 0) -> None:
    with Store.open(path) as store:
        recorder = Recorder(store)
        for n in range(start, start + count):
            run = recorder.start_run(agent="bulk", input=f"question {n}", session_id=f"s{n % 7}")
            run.end("answered", output=f"answer {n}", tokens_in=10, tokens_out=n)


@pytest.fixture
def many(tmp_path: Path) -> Path:
    path = tmp_path / "many.duckdb"
    _record(path, PAGE * 2 + 50)
    return path


async def test_only_the_first_page_is_read_until_the_cursor_nears_its_end(
    open_app: Callable[..., ExplorerApp], many: Path, settle: Any
) -> None:
    app = open_app(many, read_only=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(RunsTable)
        assert table.row_count == PAGE and table.total == PAGE * 2 + 50
        assert "100 of 250 runs loaded" in str(app.screen.query_one("#runs-status").render())
        table.move_cursor(row=PAGE - 1)  # the cursor near the end of what is loaded: the next page comes in
        await settle(pilot)
        assert table.row_count == PAGE * 2
        shown = [r.input for r in table.runs.values()]
        assert shown == [f"question {n}" for n in range(249, 49, -1)], "newest first, no run twice, none skipped"


async def test_end_goes_to_the_last_run_not_the_last_one_loaded(
    open_app: Callable[..., ExplorerApp], many: Path, settle: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`end` reads what is not loaded yet (in pages of END_PAGE), then moves to the oldest run; `home` goes back."""
    monkeypatch.setattr("explorer.components.runs_table.END_PAGE", 60)  # several pages to read on the way
    app = open_app(many, read_only=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(RunsTable)
        assert table.row_count == PAGE
        await pilot.press("end")
        await settle(pilot, rounds=8)
        assert table.row_count == PAGE * 2 + 50 and table.cursor_row == table.row_count - 1
        assert table.current_run is not None and table.current_run.input == "question 0"
        assert "250 of 250 runs loaded" in str(app.screen.query_one("#runs-status").render())
        inputs = [r.input for r in table.runs.values()]
        assert inputs == [f"question {n}" for n in range(249, -1, -1)], "newest first, no run twice, none skipped"
        await pilot.press("home")
        assert table.cursor_row == 0
        await pilot.press("end")  # all loaded now: straight there
        assert table.cursor_row == table.row_count - 1


async def test_a_live_source_shows_new_runs_without_moving_the_cursor(
    open_app: Callable[..., ExplorerApp], tmp_path: Path, settle: Any
) -> None:
    path = tmp_path / "live.duckdb"
    _record(path, 3)
    app = open_app(path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(RunsTable)
        await pilot.press("down")
        watched = table.current_run_id
        recorder = Recorder(app.source.store)  # type: ignore[attr-defined]
        run = recorder.start_run(agent="late", input="a new question")
        run.end("answered", output="a new answer")
        app.source.store.flush()  # type: ignore[attr-defined]
        table.check_for_new()
        await settle(pilot)
        assert table.row_count == 4 and table.runs[next(iter(table.runs))].agent == "late"
        assert table.current_run_id == watched


async def test_re_runs_are_hidden_until_x_shows_them(
    open_app: Callable[..., ExplorerApp], tmp_path: Path, settle: Any
) -> None:
    path = tmp_path / "forks.duckdb"
    _record(path, 3)
    with Store.open(path) as store:
        original = store.list_runs()[0].id
        for n in range(2):
            Recorder(store).start_run(agent="bulk", input=f"again {n}", forked_from_run=original).end("answered")
    app = open_app(path, read_only=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(RunsTable)
        assert table.row_count == 3 and "re-runs hidden" in str(app.screen.query_one("#runs-filters").render())
        await pilot.press("x")
        await settle(pilot)
        assert table.row_count == 5 and "re-runs" not in str(app.screen.query_one("#runs-filters").render())
        await pilot.press("x")
        await settle(pilot)
        assert table.row_count == 3


async def test_the_filters_label_fits_its_line_at_80_columns(
    open_app: Callable[..., ExplorerApp], tmp_path: Path, settle: Any
) -> None:
    """With a status and a session picked the label was 'status=answered session=... · re-runs hidden',
    wider than its 38 columns: it wrapped onto a line the bar does not show, and 're-runs hidden' was
    lost."""
    path = tmp_path / "filters.duckdb"
    _record(path, 2)
    app = open_app(path, read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("s", "f")  # answered, this run's session
        await settle(pilot)
        label = app.screen.query_one("#runs-filters")
        shown = str(label.render())
        assert shown.startswith("answered · session=") and shown.endswith(" · re-runs hidden")
        assert len(shown) <= label.content_region.width


def test_a_long_session_id_is_cut_in_the_filters_label() -> None:
    where = replace(DEFAULT_FILTER, status="cancelled", session_id="s" * 200, agent="personal-assistant")
    label = filters_label(where)
    assert len(label) == FILTERS_WIDTH and label.startswith("cancelled · session=sss") and "…" in label
    assert filters_label(replace(DEFAULT_FILTER, forks=True)) == "all runs"


@pytest.mark.parametrize(("read_only", "hint"), [(False, "chat in the sandbox (p)"),
                                               (True, "chat in footprint sandbox")])
async def test_an_empty_store_says_how_to_get_runs(
    open_app: Callable[..., ExplorerApp], tmp_path: Path, settle: Any, read_only: bool, hint: str
) -> None:
    """The hint offers p only where p opens the sandbox (footprint explore opens the store read-only)."""
    path = tmp_path / "empty.duckdb"
    Store.open(path).close()
    app = open_app(path, read_only=read_only)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        status = str(app.screen.query_one("#runs-status").render())
        assert status == f"no runs yet: record some (footprint demo), or {hint}", status


async def test_a_damaged_block_a_read_reaches_is_shown_as_the_stores_refusal(
    open_app: Callable[..., ExplorerApp], tmp_path: Path, settle: Any
) -> None:
    """A store whose damage DuckDB finds only at a read opens; the runs table then said DuckDB's
    'Error: Corrupt database file: computed checksum ...' instead of what every command says."""
    shown = []
    for bad in damaged_copies(tmp_path):
        try:
            app = open_app(bad, read_only=True)
        except NotAStoreError:
            continue  # the damage was found at the open: the CLI's refusal (tests/tracer/test_cli.py)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            status = str(app.screen.query_one("#runs-status").render())
        if status.startswith("could not read runs"):
            shown.append(status)
    assert shown, "no damaged block was reached by a read after the open"
    for status in shown:
        assert "is not a readable footprint store: the file is truncated or corrupt" in status, status
        assert "Error:" not in status.split("(")[0], status

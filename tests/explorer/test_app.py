"""The main path through the explorer, driven with Pilot: runs -> a run -> its answer -> why -> culprit."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from explorer import ExplorerApp
from explorer.components.evidence_tree import EvidenceTree
from explorer.components.flowchart import Flowchart
from explorer.components.runs_table import RunsTable
from explorer.components.stage_detail import StageDetail
from explorer.screens.help import HelpScreen
from explorer.screens.run import RunScreen
from explorer.screens.runs import RunsScreen
from explorer.screens.why import WhyScreen


async def test_open_the_wrong_answer_and_follow_why_to_the_stale_memory(
    open_app: Callable[..., ExplorerApp], sample_path: Path, wrong_run: str, settle: Any
) -> None:
    app = open_app(sample_path, read_only=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(RunsTable)
        assert table.row_count == 8
        # the wrong answer is the newest run of session trip-7f3a: move the cursor onto it and open it
        while table.current_run_id != wrong_run:
            await pilot.press("down")
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen) and screen.run_id == wrong_run
        chart = screen.query_one(Flowchart)
        # it opens on the answer; select it again with End to be sure, and read it
        await pilot.press("end")
        assert chart.selected_stage is not None and chart.selected_stage.kind == "answer"
        assert "Berlin" in str(screen.query_one("#stage-info-body").render())

        await pilot.press("w")
        await settle(pilot)
        why = app.screen
        assert isinstance(why, WhyScreen) and why.evidence is not None
        tree = why.query_one(EvidenceTree)
        # n walks the items that came from outside the run: the prompt, then the stale memory fact
        for _ in range(5):
            await pilot.press("n")
            await pilot.pause()
            node = tree.cursor_node
            if node is not None and node.data is not None and node.data.item_kind == "memory":
                break
        node = tree.cursor_node
        assert node is not None and node.data is not None
        assert node.data.text == "Maya lives in Berlin."
        assert node.data.origin is not None and node.data.origin.source == "profile.city"
        # the message where she said she moved was left out of the context by the memory window
        assert why.evidence.not_in_context[0].text == "I moved to Lisbon last week!"

        await pilot.press("g")
        await settle(pilot)
        back = app.screen
        assert back is screen, "going to a stage of the same run returns to that run's screen"
        selected = back.query_one(Flowchart).selected_stage
        assert selected is not None and selected.kind == "memory"
        assert "Maya lives in Berlin." in str(back.query_one("#stage-info-body").render())


async def test_jumping_to_an_origin_in_another_run_of_the_session_opens_that_run(
    open_app: Callable[..., ExplorerApp], sample_path: Path, wrong_run: str, settle: Any
) -> None:
    app = open_app(sample_path, read_only=True, run_id=wrong_run)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
        why = app.screen
        assert isinstance(why, WhyScreen)
        tree = why.query_one(EvidenceTree)
        # the user's question of run 2 is in run 3's context: its origin is run 2's input stage
        target = next(n for n in tree._in_order() if n.data is not None and n.data.text == "Am I free tomorrow or Monday?")
        tree.move_cursor(target)
        await pilot.press("g")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen) and screen.run_id == "r-000002"
        stage = screen.query_one(Flowchart).selected_stage
        assert stage is not None and stage.kind == "input"
        await pilot.press("escape")
        assert app.screen is why, "escape goes back to the evidence"


async def test_inference_shows_its_snapshot_and_toggles_the_diff(
    open_app: Callable[..., ExplorerApp], sample_path: Path, settle: Any
) -> None:
    app = open_app(sample_path, read_only=True, run_id="r-000002")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen)
        await pilot.press("up")  # from the answer to the second inference
        detail = screen.query_one(StageDetail)
        assert detail.current == "snapshot"
        snapshot = detail.query_one("#snapshot")
        table = snapshot.table  # type: ignore[attr-defined]
        kinds = [str(table.get_row_at(i)[1]) for i in range(table.row_count)]
        assert kinds.count("result") == 2 and "memory" in kinds
        await pilot.press("d")
        assert snapshot.showing_diff  # type: ignore[attr-defined]
        changes = {str(table.get_row_at(i)[0]) for i in range(table.row_count)}
        assert changes == {"added"}
        await pilot.press("d")
        assert not snapshot.showing_diff  # type: ignore[attr-defined]


async def test_parallel_tool_calls_sit_side_by_side_and_show_arguments_and_result(
    open_app: Callable[..., ExplorerApp], sample_path: Path, settle: Any
) -> None:
    app = open_app(sample_path, read_only=True, run_id="r-000002")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        chart = app.screen.query_one(Flowchart)
        tools = [s for s in chart.data.stages if s.kind == "tool"]  # type: ignore[union-attr]
        boxes = [chart.flow.boxes[s.id] for s in tools]  # type: ignore[union-attr]
        assert len({b.y for b in boxes}) == 1 and boxes[0].x < boxes[1].x
        await pilot.press("up", "up", "left")  # answer -> inference 2 -> the tool row, leftmost
        stage = chart.selected_stage
        assert stage is not None and stage.kind == "tool"
        await pilot.press("right")
        assert chart.selected_stage is not None and chart.selected_stage.id == tools[1].id
        body = str(app.screen.query_one("#tool-call-body").render())
        assert '"date": "monday"' in body and "09:00" in body and "took" in body


async def test_help_lists_the_keys_of_the_screen_underneath(
    open_app: Callable[..., ExplorerApp], sample_path: Path, settle: Any
) -> None:
    app = open_app(sample_path, read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, RunsScreen)
        await pilot.press("question_mark")
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        described = dict((d, k) for k, d in help_screen.keys)
        assert {"Search", "Status", "Why", "quit"} <= set(described)  # quit: one of the keys every screen has
        assert "Personas" not in described, "a read-only store has no sandbox"
        await pilot.press("escape")
        assert isinstance(app.screen, RunsScreen)


async def test_search_and_status_filter_narrow_the_table(
    open_app: Callable[..., ExplorerApp], sample_path: Path, settle: Any
) -> None:
    app = open_app(sample_path, read_only=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(RunsTable)
        await pilot.press("s")  # answered
        await settle(pilot)
        assert {r.status for r in table.runs.values()} == {"answered"}
        await pilot.press("s")  # failed
        await settle(pilot)
        assert {r.status for r in table.runs.values()} == {"failed"}
        await pilot.press("c", "slash", *"café", "enter")
        await settle(pilot)
        assert list(table.runs) == ["r-000003"]
        await pilot.press("f")  # only this run's session
        await settle(pilot)
        assert table.where.session_id == "trip-7f3a"


async def test_an_80_column_run_title_keeps_the_cost_and_the_session_over_the_per_call_tokens(
    open_app: Callable[..., ExplorerApp], sample_path: Path, settle: Any
) -> None:
    """The per-call token split is what gives way when the title's first line does not fit."""
    app = open_app(sample_path, read_only=True, run_id="r-000002")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen) and screen.data is not None
        run = screen.data.run
        head = str(screen.query_one("#run-title").render()).splitlines()[0]
        assert "$" in head and run.session_id and run.session_id in head, head
        assert "…" not in head and "model calls" not in head, head
    wide = open_app(sample_path, read_only=True, run_id="r-000002")
    async with wide.run_test(size=(140, 30)) as pilot:
        await settle(pilot)
        head = str(wide.screen.query_one("#run-title").render()).splitlines()[0]
        assert "in 2 model calls)" in head, head

"""A long run opens with only the stages it shows read; the others are read when shown and kept.

The sample's runs are short, so they are read whole when they open; here every run counts as long
(``WHOLE_RUN_STAGES`` is 0), and a source that notes its reads shows what was read, and where.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from explorer import ExplorerApp, StoreSource
from explorer._flowlayout import layout
from explorer._source import Snapshots
from explorer.components.flowchart import Flowchart
from explorer.components.snapshot_view import SnapshotView
from explorer.components.stage_detail import StageDetail
from explorer.screens.item import ItemScreen
from explorer.screens.run import RunScreen
from tracer import RunData, Store, StoreError

RUN = "r-000002"  # input, memory, prompt, inference, tool batch, 2 tools, inference, answer


class NotingSource(StoreSource):
    """A store source that notes each read: what, which stages, and whether on the UI thread."""

    def __init__(self, store: Store) -> None:
        super().__init__(store, label="noting")
        self.reads: list[tuple[str, list[str], bool]] = []
        self.fail = False
        self.hold: threading.Event | None = None  # when set, stage reads wait for it

    def _note(self, what: str, stage_ids: Sequence[str]) -> None:
        self.reads.append((what, list(stage_ids), threading.current_thread() is threading.main_thread()))

    def load_run(self, run_id: str) -> RunData:
        self._note("run", [])
        return super().load_run(run_id)

    def load_outline(self, run_id: str, snapshots: Sequence[str] = ()) -> RunData:
        self._note("outline", snapshots)
        return super().load_outline(run_id, snapshots)

    def load_snapshots(self, run_id: str, stage_ids: Sequence[str]) -> Snapshots:
        self._note("snapshots", stage_ids)
        if self.hold is not None:
            self.hold.wait(10)
        if self.fail:
            raise StoreError("the disk is on fire")
        return super().load_snapshots(run_id, stage_ids)

    def stages_read(self) -> list[list[str]]:
        return [ids for what, ids, _ in self.reads if what == "snapshots"]


@pytest.fixture(autouse=True)
def every_run_is_long(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("explorer._prefetch.WHOLE_RUN_STAGES", 0)


@pytest.fixture
def store(sample_path: Path) -> Iterator[Store]:
    with Store.open(sample_path, read_only=True) as opened:
        yield opened


@pytest.fixture
def whole(store: Store) -> RunData:
    return store.load_run(RUN)


def _app(source: NotingSource, **kwargs: Any) -> ExplorerApp:
    return ExplorerApp(source, poll_interval=None, **kwargs)


def _run_screen(app: ExplorerApp) -> RunScreen:
    screen = app.screen
    assert isinstance(screen, RunScreen) and screen.data is not None
    return screen


def _rows(view: SnapshotView, column: int) -> list[str]:
    table = view.table
    return [str(table.get_row_at(i)[column]) for i in range(table.row_count)]


async def test_a_long_run_opens_with_only_the_stages_it_shows_read_off_the_ui_thread(
    store: Store, whole: RunData, settle: Callable[..., Any]
) -> None:
    source = NotingSource(store)
    app = _app(source, run_id=RUN)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        screen = _run_screen(app)
        answer, question = whole.stages[-1], whole.stages[0]
        # the answer it shows, and the stages whose boxes show an output (the question, the answer)
        assert screen.data is not None and screen.data.read == {answer.id, question.id}
        assert set(screen.data.inputs) <= {answer.id, question.id}
        # then, behind the screen, the whole run once for the items' names
        assert [what for what, _, _ in source.reads] == ["outline", "snapshots", "run"]
        assert not any(on_ui for _, _, on_ui in source.reads), "no read runs on the UI thread"
        chart = screen.query_one(Flowchart)
        assert chart.flow is not None and chart.flow.chars == layout(whole).chars, "the same drawing"
        said = whole.items[whole.outputs[answer.id][-1]].text
        assert said in str(screen.query_one("#stage-info-body").render())


async def test_a_long_run_names_its_items_as_footprint_why_does(
    store: Store, whole: RunData, settle: Callable[..., Any]
) -> None:
    """Names count through every snapshot of a run: a long run's are read behind the screen, not left as hashes."""
    from tracer import item_names

    source = NotingSource(store)
    app = _app(source, run_id=RUN)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        screen = _run_screen(app)
        second = whole.inferences()[-1]
        await pilot.press("up")  # the second inference: memory, results, history
        await settle(pilot)
        view = screen.query_one(StageDetail).query_one(SnapshotView)
        names = item_names(whole)
        shown = _rows(view, 3)
        assert shown == [names[e.item_hash] for e in whole.inputs[second.id]], shown
        assert any(n.startswith("memory:") for n in shown) and "result:check_availability#2" in shown
        assert not any(n.startswith("#") for n in shown), "no item is left as a hash"


async def test_an_inference_is_read_when_selected_and_kept(
    store: Store, whole: RunData, settle: Callable[..., Any]
) -> None:
    source = NotingSource(store)
    app = _app(source, run_id=RUN)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        screen = _run_screen(app)
        second = whole.inferences()[-1]
        source.hold = threading.Event()
        await pilot.press("up")  # from the answer to the second inference
        view = screen.query_one(StageDetail).query_one(SnapshotView)
        assert view.waiting and view.table.row_count == 0
        assert "reading the snapshot" in str(view.query_one(".snapshot--header").render())
        source.hold.set()
        await settle(pilot)
        assert not view.waiting and source.stages_read()[-1] == [second.id]
        kinds = _rows(view, 1)
        assert len(kinds) == len(whole.inputs[second.id]) and kinds.count("result") == 2 and "memory" in kinds
        reads = len(source.reads)
        await pilot.press("down", "up")  # away and back: kept, not read again
        await settle(pilot)
        assert len(source.reads) == reads and _rows(view, 1) == kinds
        assert not any(on_ui for _, _, on_ui in source.reads)


async def test_the_diff_reads_the_previous_inference_when_asked(
    store: Store, whole: RunData, settle: Callable[..., Any]
) -> None:
    source = NotingSource(store)
    app = _app(source, run_id=RUN)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        screen = _run_screen(app)
        first = whole.inferences()[0]
        await pilot.press("up")
        await settle(pilot)
        view = screen.query_one(StageDetail).query_one(SnapshotView)
        assert screen.data is not None and first.id not in screen.data.read
        await pilot.press("d")
        await settle(pilot)
        assert source.stages_read()[-1] == [first.id]
        assert view.showing_diff and not view.waiting
        assert set(_rows(view, 0)) == {"added"}
        await pilot.press("d")
        assert not view.showing_diff and _rows(view, 1).count("result") == 2


async def test_a_tool_call_is_read_when_selected(store: Store, settle: Callable[..., Any]) -> None:
    source = NotingSource(store)
    app = _app(source, run_id=RUN)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("up", "up", "left", "right")  # answer -> inference 2 -> the tools, rightmost
        await settle(pilot)
        body = str(app.screen.query_one("#tool-call-body").render())
        assert '"date": "monday"' in body and "09:00" in body and "reading" not in body


async def test_an_item_of_a_stage_read_later_opens_whole_and_goes_to_its_origin(
    store: Store, whole: RunData, settle: Callable[..., Any]
) -> None:
    source = NotingSource(store)
    app = _app(source, run_id=RUN)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        screen = _run_screen(app)
        await pilot.press("up")
        await settle(pilot)
        view = screen.query_one(StageDetail).query_one(SnapshotView)
        row = _rows(view, 1).index("result")
        view.table.focus()
        view.table.move_cursor(row=row)
        await pilot.press("enter")
        await settle(pilot)
        item_screen = app.screen
        assert isinstance(item_screen, ItemScreen) and item_screen.item is not None
        assert item_screen.item.kind == "tool_result"
        producer = item_screen.origin.stage_id if item_screen.origin else None
        await pilot.press("g")
        await settle(pilot)
        assert app.screen is screen
        selected = screen.query_one(Flowchart).selected_stage
        assert selected is not None and selected.id == producer and selected.kind == "tool"
        assert "result" in str(screen.query_one("#tool-call-body").render()).lower()
        assert "reading" not in str(screen.query_one("#tool-call-body").render())


async def test_a_failed_read_is_said_and_tried_again_on_the_next_showing(
    store: Store, settle: Callable[..., Any]
) -> None:
    source = NotingSource(store)
    app = _app(source, run_id=RUN)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        screen = _run_screen(app)
        source.fail = True
        await pilot.press("up")
        await settle(pilot)
        view = screen.query_one(StageDetail).query_one(SnapshotView)
        assert view.waiting and any("the disk is on fire" in n.message for n in app._notifications)
        source.fail = False
        await pilot.press("down", "up")
        await settle(pilot)
        assert not view.waiting and _rows(view, 1).count("result") == 2


async def test_opening_at_a_stage_reads_that_stage_with_the_outline(
    store: Store, whole: RunData, settle: Callable[..., Any]
) -> None:
    source = NotingSource(store)
    tool = next(s for s in whole.stages if s.kind == "tool")
    app = _app(source, run_id=RUN, stage_id=tool.id)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        screen = _run_screen(app)
        assert source.reads[0][:2] == ("outline", [tool.id])
        assert screen.query_one(Flowchart).selected_stage == tool
        assert not any(tool.id in ids for ids in source.stages_read()), "it came with the outline"
        assert '"date"' in str(screen.query_one("#tool-call-body").render())


async def test_a_run_opened_at_a_stage_it_does_not_have_opens_at_its_default_stage(
    store: Store, whole: RunData, settle: Callable[..., Any]
) -> None:
    """The read API refuses a stage id the run lacks (404 naming it): the opening reads the outline
    again without it, and the run opens at the stage it shows by default."""
    other = store.load_run("r-000001").stages[0].id
    source = NotingSource(store)
    app = _app(source, run_id=RUN, stage_id=other)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        screen = _run_screen(app)
        assert screen.data is not None and screen.data.read == {whole.stages[-1].id, whole.stages[0].id}
        assert [what for what, _, _ in source.reads][:3] == ["outline", "outline", "snapshots"]

"""Daily use of the explorer: the same movement keys in every list, a help screen of the explorer's own
keys, the command palette, copying, searching and filtering a snapshot, and text that fits 80x24."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.widgets import DataTable

from explorer import ExplorerApp
from explorer.components.evidence_tree import EvidenceTree
from explorer.components.runs_table import RunsTable
from explorer.components.snapshot_view import SnapshotView
from explorer.screens.help import HelpScreen
from explorer.screens.run import RunScreen
from explorer.screens.why import WhyScreen


async def _snapshot_of_wrong_answer(pilot: Any, settle: Any) -> SnapshotView:
    await settle(pilot)
    await pilot.press("up")  # from the answer to the inference that wrote it
    await settle(pilot)
    await pilot.press("enter")  # into its snapshot table
    await settle(pilot)
    view = pilot.app.screen.query_one(SnapshotView)
    assert view.table.has_focus
    return view


async def _why_tree_of_wrong_answer(pilot: Any, settle: Any) -> EvidenceTree:
    await settle(pilot)
    await pilot.press("w")  # from the run screen, opened at the wrong answer
    await settle(pilot)
    return pilot.app.screen.query_one(EvidenceTree)


async def test_j_and_k_move_in_every_list(
    open_app: Callable[..., ExplorerApp], sample_path: Path, wrong_run: str, settle: Any
) -> None:
    app = open_app(sample_path, read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        runs = app.screen.query_one(RunsTable)
        assert runs.cursor_row == 0
        await pilot.press("j", "j")
        assert runs.cursor_row == 2
        await pilot.press("k")
        assert runs.cursor_row == 1
        await pilot.press("end")
        assert runs.cursor_row == runs.row_count - 1
        await pilot.press("home")
        assert runs.cursor_row == 0
    app = open_app(sample_path, read_only=True, run_id=wrong_run)
    async with app.run_test(size=(80, 24)) as pilot:
        view = await _snapshot_of_wrong_answer(pilot, settle)
        await pilot.press("j", "j", "j")
        assert view.table.cursor_row == 3
        await pilot.press("k")
        assert view.table.cursor_row == 2
        await pilot.press("escape")  # back to the run list; then the why tree
        await settle(pilot)
    app = open_app(sample_path, read_only=True, run_id=wrong_run)
    async with app.run_test(size=(80, 24)) as pilot:
        tree = await _why_tree_of_wrong_answer(pilot, settle)
        assert tree.cursor_line == 0
        await pilot.press("j", "j")
        assert tree.cursor_line == 2
        await pilot.press("k")
        assert tree.cursor_line == 1


async def test_help_lists_the_explorers_keys_not_textuals(
    open_app: Callable[..., ExplorerApp], sample_path: Path, wrong_run: str, settle: Any
) -> None:
    app = open_app(sample_path, read_only=True, run_id=wrong_run)
    async with app.run_test(size=(80, 24)) as pilot:
        await _snapshot_of_wrong_answer(pilot, settle)
        await pilot.press("question_mark")
        await settle(pilot)
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        described = [description for _, description in help_screen.keys]
        for wanted in ("Why item", "Search items", "Origin filter", "Copy text", "Diff", "Prev run", "Back"):
            assert wanted in described  # the focused table's w (why this item) shadows the screen's
        move = next(i for i, d in enumerate(described) if d.startswith("move in a list"))
        assert described.index("Back") < described.index("Search items") < move  # screen, list, everywhere
        assert "Down" not in described and "Up" not in described  # moving is one line for every list
        internal = {"Focus Next", "Focus Previous", "Cursor up", "Cursor down", "Page up", "Page down",
                    "Scroll Home", "Scroll End", "Top", "Bottom", "Select", "Copy selected text"}
        assert not internal & set(described), internal & set(described)
        assert len(described) == len(set(described))


async def test_the_command_palette_offers_the_screens_actions(
    open_app: Callable[..., ExplorerApp], sample_path: Path, wrong_run: str, settle: Any
) -> None:
    app = open_app(sample_path, read_only=True, run_id=wrong_run)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Why answer" in titles and "Prev run" in titles and "Quit" in titles
        why = next(c for c in app.get_system_commands(app.screen) if c.title == "Why answer")
        await why.callback()  # type: ignore[misc]
        await settle(pilot)
        assert isinstance(app.screen, WhyScreen)


async def test_copy_a_run_id_and_an_items_text(
    open_app: Callable[..., ExplorerApp], sample_path: Path, wrong_run: str, settle: Any
) -> None:
    app = open_app(sample_path, read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        runs = app.screen.query_one(RunsTable)
        await pilot.press("y")
        assert app.clipboard == runs.current_run_id
    app = open_app(sample_path, read_only=True, run_id=wrong_run)
    async with app.run_test(size=(80, 24)) as pilot:
        view = await _snapshot_of_wrong_answer(pilot, settle)
        screen = app.screen
        assert isinstance(screen, RunScreen) and screen.data is not None
        item_hash = view._current()[0]  # type: ignore[index]
        await pilot.press("y")
        assert app.clipboard == screen.data.items[item_hash].text


async def test_search_and_filter_a_snapshot_by_text_and_origin(
    open_app: Callable[..., ExplorerApp], sample_path: Path, wrong_run: str, settle: Any
) -> None:
    app = open_app(sample_path, read_only=True, run_id=wrong_run)
    async with app.run_test(size=(80, 24)) as pilot:
        view = await _snapshot_of_wrong_answer(pilot, settle)
        everything = view.table.row_count
        await pilot.press("slash", *"berlin")
        await settle(pilot)
        assert 0 < view.table.row_count < everything
        shown = [str(view.table.get_row_at(r)[-1]) for r in range(view.table.row_count)]
        assert all("berlin" in text.lower() for text in shown)
        await pilot.press("enter")  # keep it: back in the table, the filter stays
        await settle(pilot)
        assert view.table.has_focus and 0 < view.table.row_count < everything
        await pilot.press("slash", "escape")  # escape in the box clears it
        await settle(pilot)
        assert view.table.row_count == everything and view.table.has_focus
        await pilot.press("o")
        await settle(pilot)
        kind = view.origin_kind
        assert kind is not None and 0 < view.table.row_count <= everything
        assert view.names, "the items are named once the whole run is read"
        origins = {view._rows[str(key.value)][1].kind for key in view.table.rows}  # type: ignore[union-attr]
        assert origins == {kind}


def _cells(view: SnapshotView) -> list[str]:
    return [cell.plain if isinstance(cell, Text) else str(cell)
            for r in range(view.table.row_count) for cell in view.table.get_row_at(r)]


async def test_at_80x24_long_text_ends_in_an_ellipsis_and_nothing_overflows(
    open_app: Callable[..., ExplorerApp], sample_path: Path, wrong_run: str, settle: Any
) -> None:
    app = open_app(sample_path, read_only=True, run_id=wrong_run)
    async with app.run_test(size=(80, 24)) as pilot:
        view = await _snapshot_of_wrong_answer(pilot, settle)
        screen = app.screen
        title = screen.query_one("#run-title").render()
        lines = str(title).splitlines()
        assert len(lines) == 2 and all(len(line) <= 78 for line in lines)
        await pilot.resize_terminal(56, 24)  # narrower than the run's line: it ends in an ellipsis, on one line
        await settle(pilot)
        narrow = str(screen.query_one("#run-title").render()).splitlines()
        assert len(narrow) == 2 and all(len(line) <= 54 for line in narrow) and narrow[0].endswith("…")
        await pilot.resize_terminal(80, 24)
        await settle(pilot)
        data = screen.data  # type: ignore[attr-defined]
        assert data is not None
        if len(data.run.input) + len(data.run.output or "") > 70:
            assert "…" in lines[1]
        columns = list(view.table.columns.values())
        assert sum(c.width for c in columns) + 2 * len(columns) <= 80
        for r in range(view.table.row_count):
            row = view.table.get_row_at(r)
            for cell, column in zip(row, columns, strict=True):
                text = cell.plain if isinstance(cell, Text) else str(cell)
                assert len(text) <= column.width, (text, column.width)
        texts = [c.plain if isinstance(c, Text) else str(c) for c in (view.table.get_row_at(r)[-1]
                                                                    for r in range(view.table.row_count))]
        full = [data.items[view._rows[str(k.value)][0]].text for k in view.table.rows]
        cut = [shown for shown, whole in zip(texts, full, strict=True) if " ".join(whole.split()) != shown]
        assert cut and all(shown.endswith("…") for shown in cut)


async def test_at_80x24_every_why_tree_line_shows_its_whole_label(
    open_app: Callable[..., ExplorerApp], sample_path: Path, wrong_run: str, settle: Any
) -> None:
    """A label too long for its line is cut by the label, with an ellipsis, not at the tree's edge
    (the root's line was, once the tree had a scrollbar: its prefix "why: " was not counted)."""
    app = open_app(sample_path, read_only=True, run_id=wrong_run)
    async with app.run_test(size=(80, 24)) as pilot:
        tree = await _why_tree_of_wrong_answer(pilot, settle)
        for node in list(tree.root.children):
            node.expand_all()  # taller than the screen: the tree's scrollbar takes its columns
        await settle(pilot)
        assert tree.show_vertical_scrollbar
        checked = 0
        for y in range(min(tree.size.height, tree.last_line + 1)):
            line = tree.get_node_at_line(y)
            assert line is not None
            shown = tree.render_line(y).crop(0, tree.scrollable_content_region.width).text  # what the screen shows
            assert line.label.plain in shown, (line.label.plain, shown)
            checked += 1
        assert checked >= 5
        assert tree.root.label.plain.endswith("…"), "the sample's answer is longer than a line at 80 columns"


def test_every_kind_of_why_tree_label_is_cut_to_its_width_with_an_ellipsis() -> None:
    """A stage's label ignored its width: deep in a long session '… of …0005d6834f  (walked above'
    ran past the edge, cut without an ellipsis."""
    from explorer.components.evidence_tree import node_label
    from tracer import SHOWN_ABOVE, EvidenceNode, Origin

    stage = EvidenceNode("stage", "r-01a23414f932-0005d6834f", stage_id="s-1", stage_kind="prompt",
                         stage_name="prompt composition", seen=True)
    item = EvidenceNode("item", "r-home", item_hash="ab" * 16, item_kind="memory", text="Maya lives in Berlin.",
                        origin=Origin("memory", source="profile.home_city"))
    above = EvidenceNode(SHOWN_ABOVE, None, count=52)
    for node, name in ((stage, None), (item, "memory:a.rather.long.key.of.the.user.profile"), (above, None)):
        for width in (20, 30):
            label = node_label(node, width, home_run="r-home", name=name).plain
            assert len(label) <= width and label.endswith("…"), (label, width)


async def test_the_why_detail_of_a_shown_above_line_says_what_it_is(
    open_app: Callable[..., ExplorerApp], sample_path: Path, wrong_run: str, settle: Any
) -> None:
    """The cursor on "(N more items of this context, shown above)" showed "None  of run None"."""
    from textual.widgets import Static

    from tracer import SHOWN_ABOVE

    app = open_app(sample_path, read_only=True, run_id=wrong_run)
    async with app.run_test(size=(80, 24)) as pilot:
        tree = await _why_tree_of_wrong_answer(pilot, settle)
        tree.root.expand_all()
        await settle(pilot)
        line = next(n for n in tree._in_order() if n.data is not None and n.data.node == SHOWN_ABOVE)
        tree.move_cursor(line)
        await settle(pilot)
        shown = str(app.screen.query_one("#why-detail", Static).render())
        assert "None" not in shown and f"{line.data.count} items" in shown, shown


async def test_at_80x24_the_footer_keeps_back_and_keys_beside_the_snapshots_own(
    open_app: Callable[..., ExplorerApp], sample_path: Path, wrong_run: str, settle: Any
) -> None:
    """With the snapshot table focused the footer showed the table's five keys and clipped the
    screen's to 'e' (esc Back cut, ? Keys gone); the help still names every key in full."""
    from textual.widgets._footer import FooterKey

    app = open_app(sample_path, read_only=True, run_id=wrong_run)
    async with app.run_test(size=(80, 24)) as pilot:
        await _snapshot_of_wrong_answer(pilot, settle)
        await settle(pilot)
        keys = list(app.screen.query(FooterKey))
        shown = {k.description: k for k in keys}
        assert {"Back", "Keys", "Diff", "Why item", "Search", "Origin"} <= set(shown), sorted(shown)
        palette = shown.pop("palette")  # the command palette's key, at the right edge
        assert palette.region.right <= 80
        assert all(k.region.right <= palette.region.x for k in shown.values()), [(d, k.region) for d, k in shown.items()]
        await pilot.press("question_mark")
        await settle(pilot)
        described = [description for _, description in app.screen.keys]  # type: ignore[attr-defined]
        assert {"Search items", "Origin filter", "Copy text", "Prev run", "Next run"} <= set(described)


async def test_every_screen_shows_the_help_key_in_its_footer_at_80_columns(
    open_app: Callable[..., ExplorerApp], sample_path: Path, wrong_run: str, settle: Any
) -> None:
    """`? Keys` is how a person finds every other key: the footer must not push it past the edge."""
    from textual.widgets import Footer
    from textual.widgets._footer import FooterKey

    def help_key_fits(app: ExplorerApp) -> bool:
        footer = app.screen.query_one(Footer)
        helps = [key for key in footer.query(FooterKey) if key.description == "Keys"]
        # (the command palette's label sits at the footer's right end, over whatever reaches it)
        return bool(helps) and helps[0].region.width > 0 and helps[0].region.right <= footer.region.right - 12

    app = open_app(sample_path, read_only=True, run_id=wrong_run)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert help_key_fits(app), "run screen"
        await _snapshot_of_wrong_answer(pilot, settle)
        assert help_key_fits(app), "snapshot table"
    app = open_app(sample_path, read_only=True, run_id=wrong_run)
    async with app.run_test(size=(80, 24)) as pilot:
        await _why_tree_of_wrong_answer(pilot, settle)
        assert isinstance(app.screen, WhyScreen)
        assert help_key_fits(app), "why screen"


async def _edges(pilot: Any, settle: Any, rows: Callable[[], int], cursor: Callable[[], int], where: str) -> None:
    """``end`` then ``home`` in the focused list: the cursor on its last row, then its first."""
    assert rows() > 2, where
    await pilot.press("end")
    await settle(pilot, 2)
    assert cursor() == rows() - 1, f"end in {where}"
    await pilot.press("home")
    await settle(pilot, 2)
    assert cursor() == 0, f"home in {where}"


async def test_home_and_end_go_to_the_first_and_last_row_in_every_list(
    open_app: Callable[..., ExplorerApp], sample_copy: Path, wrong_run: str, settle: Any
) -> None:
    """A DataTable binds home and end to its first and last column (sideways, in a table whose rows are
    what one reads): every table of the explorer, and the why tree, goes to its first and last row."""
    from explorer.components.not_in_context import NotInContextTable
    from explorer.screens.sandbox import SandboxScreen

    app = open_app(sample_copy, run_id=wrong_run)
    assert app.personas is not None
    for name in ("Ann", "Bob", "Cy"):
        app.personas.create(name, f"You are {name}.")
    async with app.run_test(size=(80, 24)) as pilot:
        view = await _snapshot_of_wrong_answer(pilot, settle)
        table = view.table
        await _edges(pilot, settle, lambda: table.row_count, lambda: table.cursor_row, "the snapshot")
        assert table.scroll_x == 0
        await pilot.press("d")  # the diff to the previous inference: a table too
        await settle(pilot)
        await _edges(pilot, settle, lambda: table.row_count, lambda: table.cursor_row, "the diff")
        app.open_why(wrong_run)
        await settle(pilot)
        tree = app.screen.query_one(EvidenceTree)
        await _edges(pilot, settle, lambda: tree.last_line + 1, lambda: tree.cursor_line, "the why tree")
        dropped = app.screen.query_one(NotInContextTable)
        dropped.show([*dropped.items, *dropped.items])  # (the sample leaves two out: too few to tell)
        dropped.focus()
        await _edges(pilot, settle, lambda: dropped.row_count, lambda: dropped.cursor_row, "not in context")
        await pilot.press("question_mark")
        await settle(pilot)
        keys = app.screen.query_one("#help-table", DataTable)
        keys.focus()
        await _edges(pilot, settle, lambda: keys.row_count, lambda: keys.cursor_row, "the help")
        await pilot.press("escape", "escape", "escape")
        await settle(pilot)
        app.open_sandbox()
        await settle(pilot)
        assert isinstance(app.screen, SandboxScreen)
        personas = app.screen.query_one("#personas", DataTable)
        await _edges(pilot, settle, lambda: personas.row_count, lambda: personas.cursor_row, "the personas")


async def test_at_60_columns_the_texts_of_the_snapshot_and_of_why_keep_their_room(
    open_app: Callable[..., ExplorerApp], sample_path: Path, wrong_run: str, settle: Any
) -> None:
    """The token estimate goes, and the name narrows, before the text does: at 60x20 the text had 12
    columns and the table a horizontal scrollbar (why's "not in context" had one too). At 80 every
    column stays."""
    from explorer.components._columns import fit_columns, text_room
    from explorer.components.not_in_context import NotInContextTable
    from explorer.components.snapshot_view import SNAPSHOT_GIVES_WAY

    app = open_app(sample_path, read_only=True, run_id=wrong_run)
    async with app.run_test(size=(60, 20)) as pilot:
        view = await _snapshot_of_wrong_answer(pilot, settle)
        table = view.table
        shown = {str(k.value): c.width for k, c in table.columns.items()}
        assert list(shown) == ["#", "role", "name", "text"] and shown["text"] >= text_room(60) - 2, shown
        assert table.max_scroll_x == 0, "no horizontal scrollbar"
        await pilot.press("d")
        await settle(pilot)
        assert "text" in {str(k.value) for k in table.columns} and table.max_scroll_x == 0
        await pilot.press("d")
        await pilot.resize_terminal(80, 24)  # wider: the columns are fitted again
        await settle(pilot)
        assert [str(k.value) for k in table.columns] == ["#", "role", "tok", "name", "text"]
        await pilot.resize_terminal(60, 20)
        app.open_why(wrong_run)
        await settle(pilot)
        dropped = app.screen.query_one(NotInContextTable)
        assert dropped.row_count == 2 and dropped.max_scroll_x == 0, "not in context: no horizontal scrollbar"
        assert dropped.columns["text"].width >= text_room(60) - 2  # type: ignore[index]
    columns = [("#", 2), ("role", 9), ("tok", 4), ("name", 20)]
    assert [label for label, _ in fit_columns(40, columns, SNAPSHOT_GIVES_WAY)] == [
        "#", "name", "text"]  # narrower still: the role goes too

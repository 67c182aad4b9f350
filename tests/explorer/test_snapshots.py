"""Snapshots of every screen at 80x24, and of the main ones at 120x40 too, over the sample store.

Update them with ``make screenshots`` (``pytest tests/explorer/test_snapshots.py --snapshot-update``,
then the copies in ``docs/screenshots/``) and look at the SVGs in ``__snapshots__/`` before
committing; ``test_screenshots.py`` fails when a copy in the docs differs from its snapshot.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from agent.providers import Provider
from explorer import ExplorerApp, SandboxChat
from explorer.components.evidence_tree import EvidenceTree
from explorer.components.flowchart import Flowchart
from explorer.screens.verdict import VerdictScreen

SIZE = (80, 24)
#: The screens a person reads most, at the smallest terminal and a roomy one.
SIZES = pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])


def _settled(*keys: str, then: Callable[[Pilot[Any]], Any] | None = None) -> Callable[[Pilot[Any]], Any]:
    """A run_before that waits for the workers, presses ``keys`` (waiting after each), then ``then``."""

    async def run_before(pilot: Pilot[Any]) -> None:
        for key in ("", *keys):
            if key:
                await pilot.press(key)
            for _ in range(3):
                await pilot.app.workers.wait_for_complete()
                await pilot.pause()
        if then is not None:
            result = then(pilot)
            if asyncio.iscoroutine(result):
                await result
            await pilot.pause()

    return run_before


async def _until(pilot: Pilot[Any], condition: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    """Wait (letting workers and messages run) until ``condition()`` holds; fail naming ``what`` after ``timeout`` s."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{what} did not appear within {timeout:.0f} s (screen: {pilot.app.screen!r})")
        await pilot.app.workers.wait_for_complete()
        await pilot.pause(0.05)


@SIZES
def test_runs(snap_compare: Any, open_app: Callable[..., ExplorerApp], sample_path: Path, size: tuple[int, int]) -> None:
    """The runs table, newest first: the answer column takes the width the others leave."""
    assert snap_compare(open_app(sample_path, read_only=True), terminal_size=size, run_before=_settled())


def test_run_answer(snap_compare: Any, open_app: Callable[..., ExplorerApp], sample_path: Path, wrong_run: str) -> None:
    """The wrong answer's run, opened on its answer."""
    app = open_app(sample_path, read_only=True, run_id=wrong_run)
    assert snap_compare(app, terminal_size=SIZE, run_before=_settled())


@SIZES
def test_run_snapshot(snap_compare: Any, open_app: Callable[..., ExplorerApp], sample_path: Path,
                      wrong_run: str, size: tuple[int, int]) -> None:
    """The inference behind the wrong answer: every item it saw, by name, coloured by origin."""
    app = open_app(sample_path, read_only=True, run_id=wrong_run)
    assert snap_compare(app, terminal_size=size, run_before=_settled("up"))


def test_run_diff(snap_compare: Any, open_app: Callable[..., ExplorerApp], sample_path: Path) -> None:
    """The second inference of run 2 against its first: the tool exchange was added."""
    app = open_app(sample_path, read_only=True, run_id="r-000002")
    assert snap_compare(app, terminal_size=SIZE, run_before=_settled("up", "d"))


def test_run_parallel_tools(snap_compare: Any, open_app: Callable[..., ExplorerApp], sample_path: Path) -> None:
    """Two tool calls of one batch side by side; the right one selected: arguments, result, timing."""
    app = open_app(sample_path, read_only=True, run_id="r-000002")
    assert snap_compare(app, terminal_size=SIZE, run_before=_settled("up", "up", "right"))


@SIZES
def test_why(snap_compare: Any, open_app: Callable[..., ExplorerApp], sample_path: Path, wrong_run: str,
             size: tuple[int, int]) -> None:
    """Why: the evidence tree with the stale memory fact under the cursor, and what was left out."""

    def to_memory(pilot: Pilot[Any]) -> None:
        tree = pilot.app.screen.query_one(EvidenceTree)
        node = next(n for n in tree._in_order() if n.data is not None and n.data.item_kind == "memory")
        tree.move_cursor(node)

    app = open_app(sample_path, read_only=True, run_id=wrong_run)
    assert snap_compare(app, terminal_size=size, run_before=_settled("w", then=to_memory))


def test_item(snap_compare: Any, open_app: Callable[..., ExplorerApp], sample_path: Path, wrong_run: str) -> None:
    """One context item shown whole, with its origin."""
    app = open_app(sample_path, read_only=True, run_id=wrong_run)
    assert snap_compare(app, terminal_size=SIZE, run_before=_settled("up", "enter", "down", "down", "enter"))


def test_help(snap_compare: Any, open_app: Callable[..., ExplorerApp], sample_path: Path, wrong_run: str) -> None:
    """? on the run screen: its keys."""
    app = open_app(sample_path, read_only=True, run_id=wrong_run)
    assert snap_compare(app, terminal_size=SIZE, run_before=_settled("question_mark"))


def _personas(app: ExplorerApp, provider: Callable[[], Provider]) -> None:
    assert app.personas is not None
    ada = app.personas.create("Ada", "You are Ada, a terse scheduler.", tools=["check_availability"])
    app.personas.create("Bob", "You are Bob. You never say you are an AI.", discloses_ai=False)
    chat = SandboxChat(ada, app.personas, provider=provider())
    asyncio.run(chat.send("hello"))
    asyncio.run(chat.send("am I free tomorrow?"))


def test_sandbox(snap_compare: Any, open_app: Callable[..., ExplorerApp], sample_copy: Path,
                 echo_provider: Callable[[], Provider]) -> None:
    """The persona sandbox."""
    app = open_app(sample_copy, start="sandbox")
    _personas(app, echo_provider)
    assert snap_compare(app, terminal_size=SIZE, run_before=_settled())


def test_persona_form(snap_compare: Any, open_app: Callable[..., ExplorerApp], sample_copy: Path) -> None:
    """Creating a persona."""
    app = open_app(sample_copy, start="sandbox")
    assert snap_compare(app, terminal_size=SIZE, run_before=_settled("n", *"Cleo", "enter", *"You are Cleo."))


def test_persona_edit(snap_compare: Any, open_app: Callable[..., ExplorerApp], sample_copy: Path,
                      echo_provider: Callable[[], Provider]) -> None:
    """Editing the persona text in place: prefilled, the cursor at its end."""
    app = open_app(sample_copy, start="sandbox")
    _personas(app, echo_provider)
    assert snap_compare(app, terminal_size=SIZE, run_before=_settled("e", "down", "enter"))


def test_chat(snap_compare: Any, open_app: Callable[..., ExplorerApp], sample_copy: Path,
              echo_provider: Callable[[], Provider]) -> None:
    """A chat that resumed Ada's earlier conversation."""
    app = open_app(sample_copy, start="sandbox")
    _personas(app, echo_provider)
    assert snap_compare(app, terminal_size=SIZE, run_before=_settled("enter"))


def test_run_paused_and_resumed(snap_compare: Any, open_app: Callable[..., ExplorerApp], sample_path: Path) -> None:
    """A refund that paused for a person's approval and resumed: the pause, the resume edge."""
    app = open_app(sample_path, read_only=True, run_id="r-000004")
    assert snap_compare(app, terminal_size=SIZE, run_before=_settled("home", *["down"] * 5))


def test_blame_verdict(snap_compare: Any, open_app: Callable[..., ExplorerApp], sample_copy: Path, wrong_run: str,
                       assistant_provider: Callable[[Any], Any]) -> None:
    """Blame from the why screen: the stale memory fact is the culprit; everything else holds."""
    app = open_app(sample_copy, run_id=wrong_run, evidence_provider=assistant_provider)

    async def run_before(pilot: Pilot[Any]) -> None:
        await _settled("w")(pilot)
        await pilot.press("b")
        # blame re-runs every suspect in a worker thread: however long that takes on a loaded
        # machine, the screen to take is the verdict, fully drawn
        await _until(pilot, lambda: isinstance(pilot.app.screen, VerdictScreen), "the blame verdict")
        await pilot.app.workers.wait_for_complete()
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_persona_field_picker(snap_compare: Any, open_app: Callable[..., ExplorerApp], sample_copy: Path,
                              echo_provider: Callable[[], Provider]) -> None:
    """Editing a persona: which field."""
    app = open_app(sample_copy, start="sandbox")
    _personas(app, echo_provider)
    assert snap_compare(app, terminal_size=SIZE, run_before=_settled("e"))


def test_persona_delete_confirm(snap_compare: Any, open_app: Callable[..., ExplorerApp], sample_copy: Path,
                                echo_provider: Callable[[], Provider]) -> None:
    """Deleting a persona asks first."""
    app = open_app(sample_copy, start="sandbox")
    _personas(app, echo_provider)
    assert snap_compare(app, terminal_size=SIZE, run_before=_settled("d"))


@SIZES
def test_team_run(snap_compare: Any, open_app: Callable[..., ExplorerApp], team_path: Path,
                  size: tuple[int, int]) -> None:
    """A lead's plan with the researcher's run framed under the step that handed it the work."""
    app = open_app(team_path, read_only=True, run_id="r-000001")

    def into_the_frame(pilot: Pilot[Any]) -> None:
        pilot.app.screen.query_one(Flowchart).select("s-000009")  # the task the researcher was given: its frame begins

    assert snap_compare(app, terminal_size=size, run_before=_settled(then=into_the_frame))

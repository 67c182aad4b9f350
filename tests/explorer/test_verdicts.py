"""Replay, counterfactual and blame from the explorer: the verdicts, and the actions on the why screen."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text

from agent.evidence import EvidenceError
from explorer import ExplorerApp
from explorer._verdicts import blame_verdict, counterfactual_verdict, default_provider_for, replay_verdict
from explorer.components.evidence_tree import EvidenceTree
from explorer.screens.run import RunScreen
from explorer.screens.verdict import VerdictScreen
from explorer.screens.why import WhyScreen
from tracer import Store


@pytest.fixture
def store(sample_copy: Path) -> Any:
    with Store.open(sample_copy) as opened:
        yield opened


def _memory_item(store: Store, run_id: str) -> str:
    return next(h for h, i in store.load_run(run_id).items.items() if i.kind == "memory")


def test_replay_of_the_wrong_answer_is_identical(store: Store, wrong_run: str) -> None:
    verdict = replay_verdict(store, wrong_run)
    assert verdict.verdict == "identical" and len(verdict.runs) == 1
    assert store.get_run(verdict.runs[0]).forked_from_run == wrong_run


def test_removing_the_stale_fact_flips_the_answer(
    store: Store, wrong_run: str, assistant_provider: Callable[[Any], Any]
) -> None:
    verdict = counterfactual_verdict(store, wrong_run, _memory_item(store, wrong_run),
                                     provider=assistant_provider(None))
    assert verdict.verdict == "flips" and len(verdict.runs) == 3
    assert all("Berlin" not in (store.get_run(r).output or "") for r in verdict.runs)


def test_blame_names_the_memory_fact(store: Store, wrong_run: str, assistant_provider: Callable[[Any], Any]) -> None:
    progress: list[str] = []
    verdict = blame_verdict(store, wrong_run, provider=assistant_provider(None), on_progress=progress.append)
    assert verdict.verdict == "culprits found"
    culprits = [text for text, style in verdict.lines if text.startswith("culprit")]
    assert culprits == ["culprit (flips, 3/3): memory:profile.city: Maya lives in Berlin."]
    assert any("memory:profile.city: flips" in line for line in progress)


def test_a_run_of_an_unknown_model_needs_a_key(store: Store, wrong_run: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(EvidenceError, match="OPENAI_API_KEY"):
        default_provider_for(store.get_run(wrong_run))


async def test_why_screen_counterfactual_shows_the_verdict_and_opens_a_rerun(
    open_app: Callable[..., ExplorerApp], sample_copy: Path, wrong_run: str, settle: Any,
    assistant_provider: Callable[[Any], Any],
) -> None:
    app = open_app(sample_copy, run_id=wrong_run, evidence_provider=assistant_provider)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
        why = app.screen
        assert isinstance(why, WhyScreen)
        tree = why.query_one(EvidenceTree)
        while tree.cursor_node is None or tree.cursor_node.data is None or tree.cursor_node.data.item_kind != "memory":
            await pilot.press("n")
            await pilot.pause()
        await pilot.press("x")
        await settle(pilot, rounds=8)
        shown = app.screen
        assert isinstance(shown, VerdictScreen)
        assert shown.verdict.action == "counterfactual" and shown.verdict.verdict == "flips"
        await pilot.press("o")
        await settle(pilot)
        opened = app.screen
        assert isinstance(opened, RunScreen) and opened.run_id == shown.verdict.runs[0]
        assert opened.data is not None and opened.data.run.forked_from_run == wrong_run


async def test_why_screen_blame_and_replay(
    open_app: Callable[..., ExplorerApp], sample_copy: Path, wrong_run: str, settle: Any,
    assistant_provider: Callable[[Any], Any],
) -> None:
    app = open_app(sample_copy, run_id=wrong_run, evidence_provider=assistant_provider)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
        await pilot.press("b")
        await settle(pilot, rounds=10)
        shown = app.screen
        assert isinstance(shown, VerdictScreen) and shown.verdict.verdict == "culprits found"
        await pilot.press("escape", "r")
        await settle(pilot, rounds=8)
        shown = app.screen
        assert isinstance(shown, VerdictScreen) and shown.verdict.verdict == "identical"


def _cli_runs(path: Path) -> subprocess.CompletedProcess[str]:
    """`footprint runs --forks` in another process, as a person would type it next to the explorer."""
    code = "import sys; from explorer.cli import main; main(sys.argv[1:])"
    return subprocess.run([sys.executable, "-c", code, "runs", "--forks", "--db", str(path)],
                          capture_output=True, text=True, timeout=60)


async def test_the_explorer_reads_read_only_and_holds_the_file_only_for_a_rerun(
    open_app: Callable[..., ExplorerApp], sample_copy: Path, wrong_run: str, settle: Any
) -> None:
    app = open_app(sample_copy, read_only=True, run_id=wrong_run)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        beside = _cli_runs(sample_copy)  # another process reads while the explorer is open
        assert beside.returncode == 0, beside.stderr
        assert wrong_run in beside.stdout and "replay" not in beside.stdout
        await pilot.press("w")
        await settle(pilot)
        keys = {b.binding.action for b in app.screen.active_bindings.values()}
        assert {"blame", "counterfactual", "replay"} <= keys
        await pilot.press("r")
        await settle(pilot, rounds=8)
        shown = app.screen
        assert isinstance(shown, VerdictScreen) and shown.verdict.verdict == "identical"
        store = app.source.store  # type: ignore[attr-defined]
        assert store.read_only  # the file was let go once the re-run was stored
        after = _cli_runs(sample_copy)
        assert after.returncode == 0, after.stderr
        assert shown.verdict.runs[0] in after.stdout  # the re-run is in the file for everyone


async def test_a_failed_blame_shows_its_whole_reason_at_80x24(
    open_app: Callable[..., ExplorerApp], sample_copy: Path, wrong_run: str, settle: Any,
) -> None:
    """The reason is written below the tree on as many lines as it takes, and the toast says only
    that it failed: a toast of the reason covered the lines the reason was written on."""
    reason = ("the model server answered 401: " + "incorrect API key provided; " * 16 + "END")

    def no_provider(run: Any) -> Any:
        raise EvidenceError(reason)

    app = open_app(sample_copy, run_id=wrong_run, evidence_provider=no_provider)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
        await pilot.press("b")
        await settle(pilot, rounds=6)
        why = app.screen
        assert isinstance(why, WhyScreen)
        detail = why.query_one("#why-detail")
        shown = str(detail.render())
        assert shown == f"blame failed: {reason}"  # footprint's own errors are shown without their class
        needed = len(Text(shown).wrap(app.console, detail.content_size.width))
        assert needed > 6 and detail.content_size.height >= needed, "every line of the reason is shown"
        assert all(reason not in n.message for n in app._notifications), "no toast covers it"
        await pilot.press("n")
        await settle(pilot)
        assert "failed" not in detail.classes  # an item's text takes the usual room again


async def test_nothing_left_out_is_said_whole_at_80x24(
    open_app: Callable[..., ExplorerApp], sample_copy: Path, settle: Any,
) -> None:
    from explorer.components.not_in_context import NOTHING_LEFT_OUT, NotInContextTable

    app = open_app(sample_copy, run_id="r-000001")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
        why = app.screen
        assert isinstance(why, WhyScreen) and why.evidence is not None and not why.evidence.not_in_context
        table = why.query_one(NotInContextTable)
        text_column = list(table.columns.values())[-1]
        assert str(table.get_row_at(0)[-1]) == NOTHING_LEFT_OUT
        assert len(NOTHING_LEFT_OUT) <= text_column.width, "not cut"

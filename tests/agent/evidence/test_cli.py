"""The evidence commands, driven through click: replay, counterfactual, blame, dropped."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from agent.demo import run_demo
from agent.evidence import EvidenceError
from agent.evidence.cli import live_provider, load_comparator, register
from agent.providers._demo import OfflineDemoModel
from tracer import FootprintError, Run, Store


@pytest.fixture
def cli() -> click.Group:
    @click.group()
    def group() -> None:
        """footprint"""

    register(group)
    return group


@pytest.fixture
async def demo_db(tmp_path: Path) -> tuple[str, list[str], str]:
    path = tmp_path / "demo.duckdb"
    with Store.open(path) as store:
        demo = await run_demo(store, provider=OfflineDemoModel(), echo=lambda _line: None, session_id="maya-cli")
        stale = next(h for h, i in store.load_run(demo.wrong_run_id).items.items() if i.text == "Maya lives in Berlin.")
    return str(path), [r.run_id for r in demo.results], stale


def run(cli: click.Group, *args: str) -> tuple[int, str, BaseException | None]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output, result.exception


def test_replay_command(cli: click.Group, demo_db: tuple[str, list[str], str]) -> None:
    db, runs, _ = demo_db
    code, out, _ = run(cli, "replay", runs[2], "--db", db)
    assert code == 0, out
    assert "Identical to the recording" in out and "no model was called" in out
    code, out, _ = run(cli, "replay", runs[1], "--db", db, "--json")
    assert json.loads(out)["identical"] is True


def test_counterfactual_command(cli: click.Group, demo_db: tuple[str, list[str], str]) -> None:
    db, runs, stale = demo_db
    code, out, _ = run(cli, "counterfactual", runs[1], "--stage", "1", "--remove", stale[:8], "--db", db)
    assert code == 0, out
    assert "Verdict: flips (3 of 3 re-runs answered differently)" in out
    code, out, _ = run(cli, "counterfactual", runs[1], "--replace", stale[:8], "--with", "Maya lives in Lisbon.",
                       "--repeat", "1", "--same", "normalized", "--json", "--db", db)
    assert code == 0, out
    data = json.loads(out)
    assert data["verdict"] == "flips" and "Lisbon" in data["outcomes"][0]["answer"]
    code, out, _ = run(cli, "counterfactual", runs[1], "--db", db)
    assert code == 2 and "--remove ITEM or --replace ITEM --with TEXT" in out
    code, out, _ = run(cli, "counterfactual", runs[1], "--replace", stale[:8], "--db", db)
    assert code == 2 and "go together" in out
    code, _, error = run(cli, "counterfactual", runs[1], "--remove", "zzzz", "--db", db)
    assert isinstance(error, FootprintError) and "no item named" in str(error)


def test_blame_command(cli: click.Group, demo_db: tuple[str, list[str], str]) -> None:
    db, runs, stale = demo_db
    code, out, _ = run(cli, "blame", runs[1], "--db", db, "--tools", "agent.demo:demo_registry")
    assert code == 0, out
    culprits = out.split("Tested")[0]
    assert "profile.home_city" in culprits and stale[:12] in culprits
    assert "Not tested:" in out and "the user's question itself" in out


def test_dropped_command(cli: click.Group, demo_db: tuple[str, list[str], str]) -> None:
    db, runs, _ = demo_db
    code, out, _ = run(cli, "dropped", runs[1], "--db", db)
    assert code == 0 and "turn 1" in out and "left out" in out


def test_the_live_provider_follows_the_recording(monkeypatch: pytest.MonkeyPatch) -> None:
    demo = Run("r-1", None, "a", "answered", "hi", "ok", "offline-demo", 0.0, labels=("offline-demo",))
    assert isinstance(live_provider(demo), OfflineDemoModel)
    real = Run("r-2", None, "a", "answered", "hi", "ok", "gpt-4o-mini", 0.0)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(EvidenceError, match="OPENAI_API_KEY"):
        live_provider(real)
    assert load_comparator("normalized")("Hello  World", "hello world")
    assert not load_comparator("exact")("a", "A")
    with pytest.raises(click.BadParameter):
        load_comparator("nope")

"""footprint blame-team: a generated team recorded, blamed from the command line."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from agent import cli as agent_cli
from agent.orchestration.testing import build_team, random_team
from tracer import Recorder, Store

TEAM_MODULE = '''
import random
from agent.orchestration.testing import build_team, random_team

def agents(recorder):
    return build_team(random_team(random.Random(5)), recorder)[1]

NOT_AGENTS = [1, 2]
'''


def group() -> click.Group:
    made = click.Group()
    agent_cli.register(made)
    return made


def test_blame_team_from_the_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "generated_team_5.py").write_text(TEAM_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    db = tmp_path / "team.duckdb"
    with Store.open(db) as store:
        lead, _ = build_team(random_team(random.Random(5)), Recorder(store))
        run_id = asyncio.run(lead.execute("start")).run_id or ""
    result = CliRunner().invoke(group(), ["blame-team", run_id, "--agents", "generated_team_5:agents", "--db", str(db),
                                          "--repeats", "1", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["run_id"] == run_id and report["tested"]
    assert report["responsible_agent"] in set(report["agents"].values())
    text = CliRunner().invoke(group(), ["blame-team", run_id, "--agents", "generated_team_5:agents", "--db", str(db),
                                        "--repeats", "1"])
    assert text.exit_code == 0 and f"team run {run_id}" in text.stdout
    bad = CliRunner().invoke(group(), ["blame-team", run_id, "--agents", "generated_team_5:NOT_AGENTS", "--db",
                                       str(db)])
    assert bad.exit_code == 2 and "did not give a list of agents" in bad.output
    missing = CliRunner().invoke(group(), ["blame-team", run_id, "--agents", "nomodule", "--db", str(db)])
    assert missing.exit_code == 2 and "is not MODULE:NAME" in missing.output


def test_last_is_the_team_run_not_the_sub_agent_run_that_started_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from explorer.cli import cli

    from .conftest import QUESTION, team_of_three

    db = tmp_path / "team.duckdb"
    with Store.open(db) as store:
        team = team_of_three(Recorder(store))
        lead_run = asyncio.run(team.lead.execute(QUESTION)).run_id
        store.flush()
        runs = store.list_runs()
        # the writer's run started last of the three: "last" by time alone would be it
        assert max(runs, key=lambda r: r.started_at).parent_run == lead_run
        assert store.resolve_run_id("last") == lead_run
    shown = CliRunner().invoke(cli, ["show", "last", "--db", str(db), "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["run"]["id"] == lead_run
    why = CliRunner().invoke(cli, ["why", "last", "--db", str(db)])
    assert why.exit_code == 0 and lead_run in why.stdout
    (tmp_path / "team_of_three_agents.py").write_text(
        "from tests.agent.orchestration.conftest import team_of_three\n"
        "def agents(recorder):\n    return team_of_three(recorder).all\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    blamed = CliRunner().invoke(cli, ["blame-team", "last", "--agents", "team_of_three_agents:agents",
                                      "--db", str(db), "--repeats", "1", "--json"])
    assert blamed.exit_code == 0, blamed.output
    assert json.loads(blamed.stdout)["run_id"] == lead_run

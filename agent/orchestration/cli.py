"""The orchestration command of the `footprint` CLI: blame-team.

    footprint blame-team r-0193a1 --agents myteam:agents --repeats 3

``--agents MODULE:FUNC`` names the team: a function returning its agents (AgentOrchestrators or
Agents; given one argument, it is called with a recorder on the store, so the agents' re-runs are
recorded there too), or the list itself. The re-runs need the agents' own providers and tools,
which only your code has.
"""

from __future__ import annotations

import importlib
import inspect
import json
from typing import TYPE_CHECKING

import click

from tracer.cli import db_option, json_option

from ..evidence.cli import load_comparator, repeat_option

if TYPE_CHECKING:  # imported when the command runs, so that its --help or a usage error is answered at once
    from tracer import Recorder

    from ._blame import TeamMember


def load_agents(ref: str, recorder: Recorder) -> list[TeamMember]:
    """The agents ``ref`` (MODULE:FUNC or MODULE:LIST) names; a BadParameter says what is wrong."""
    from .._agent import Agent
    from ._orchestrator import AgentOrchestrator

    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise click.BadParameter(f"{ref!r} is not MODULE:NAME", param_hint="--agents")
    try:
        value = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise click.BadParameter(f"cannot load {ref}: {exc}", param_hint="--agents") from None
    if callable(value):
        takes_recorder = len(inspect.signature(value).parameters) >= 1
        value = value(recorder) if takes_recorder else value()
    agents = list(value) if isinstance(value, list | tuple) else None
    if not agents or not all(isinstance(a, AgentOrchestrator | Agent) for a in agents):
        raise click.BadParameter(f"{ref} did not give a list of agents (AgentOrchestrator or Agent)",
                                 param_hint="--agents")
    return agents


@click.command("blame-team")
@click.argument("run")
@click.option("--agents", "agents_ref", required=True, metavar="MODULE:FUNC",
              help="The team's agents: a function returning them (given a recorder, if it takes one), or a list.")
@repeat_option  # --repeat, as blame and counterfactual take it
@click.option("--all", "test_all", is_flag=True, help="Also test the stages after the decisive one.")
@click.option("--same", "same_ref", default="exact", show_default=True, metavar="exact|normalized|MODULE:FUNC",
              help="When two final answers count as the same.")
@db_option
@json_option
def blame_team_command(
    run: str, agents_ref: str, repeats: int, test_all: bool, same_ref: str, db: str, as_json: bool,
) -> None:
    """Name the agent and the stage of a team's run that decided its answer, with counterfactual evidence.

    RUN is a run id, a unique prefix of one, or `last`: the run of the agent that began the work (or
    of a team). Every stage a model of the team saw is a suspect, in the runs of the sub-agents too;
    each is replaced (a tool result by nothing, anything else left out) and its run re-run, the new
    answer handed up to the top. The earliest stage whose replacement flips the answer is decisive.
    """
    import asyncio

    from tracer import Recorder, Store

    from ._blame import blame_team

    comparator = load_comparator(same_ref)
    with Store.open(db, create=False) as store:
        recorder = Recorder(store)
        agents = load_agents(agents_ref, recorder)
        report = asyncio.run(blame_team(store, run, agents=agents, repeats=repeats, comparator=comparator,
                                        test_all=test_all, recorder=recorder,
                                        on_progress=None if as_json else lambda line: click.echo(line, err=True)))
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2, ensure_ascii=False, default=str))
        return
    click.echo("\n".join(report.summary()))


def register(group: click.Group) -> None:
    """Add the orchestration commands to ``group``."""
    group.add_command(blame_team_command)



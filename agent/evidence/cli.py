"""The evidence commands of the `footprint` CLI: replay, counterfactual, blame, dropped (compare is `footprint diff`).

``register(group)`` adds them; :mod:`agent.cli` calls it. Re-runs against a live model pick the
provider the run was made with: the offline demo model for runs labelled ``offline-demo``,
otherwise OpenAI (or an OpenAI-compatible server) when ``OPENAI_API_KEY`` is set; ``--provider
MODULE:FUNC`` names your own (a Provider, a function returning one, or a model function
``request -> response`` that a :class:`~agent.providers.FunctionModel` wraps). Items are named by
their human name (``memory:profile.city``, ``result:weather#1``) or their hash (or a prefix).
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from tracer.cli import db_option

from .errors import EvidenceError

if TYPE_CHECKING:  # imported when a command runs, so that its --help or a usage error is answered at once
    from tracer import Run, Store

    from ..providers import Provider
    from ..tools import Tool, ToolRegistry
    from ._blame import BlameReport
    from ._control import Comparator
    from ._counterfactual import CounterfactualResult

#: agent.evidence._counterfactual.NEW_CALL_POLICIES, which imports the agent loop (tests/test_package_fronts.py
#: checks they agree)
NEW_CALL_POLICIES = ("durable", "all", "none")

json_option = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
provider_option = click.option(
    "--provider", "provider_name", default="auto", show_default=True, metavar="auto|offline-demo|openai|MODULE:FUNC",
    help="The live model: auto picks the offline demo model for runs it made, else OpenAI (needs OPENAI_API_KEY); "
         "MODULE:FUNC is a Provider, a function returning one, or a model function request -> response.",
)
tools_option = click.option(
    "--tools", "tools_ref", metavar="MODULE:NAME",
    help="Real tools for calls the recording did not make: a ToolRegistry, a list of tools, or a function "
         "returning one (default: the demo's tools for demo runs, none otherwise).",
)
same_option = click.option(
    "--same", "same_ref", default="exact", show_default=True, metavar="exact|normalized|MODULE:FUNC",
    help="When two answers count as the same: identical text, equal ignoring case and spacing, or your "
         "function (original, new) -> bool.",
)
repeat_option = click.option("--repeat", "--repeats", "repeats", type=click.IntRange(1, 50), default=3,
                             show_default=True, help="How many times to re-run (each suspect, for blame).")
new_calls_option = click.option(
    "--new-calls", type=click.Choice(NEW_CALL_POLICIES), default="durable", show_default=True,
    help="Tool calls the recording did not make: run durable tools only, all tools (each non-durable call "
         "once), or none.",
)


def register(group: click.Group) -> None:
    """Add the evidence commands to ``group``."""
    for command in (replay_command, counterfactual_command, blame_command, dropped_command):
        group.add_command(command)


def _open(db: str) -> Store:
    from tracer import Store

    return Store.open(db, create=False)  # a re-run of nothing must not leave an empty store behind


def _echo_json(value: dict[str, Any]) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


@click.command("replay")
@click.argument("run")
@click.option("--provider", "provider_name", metavar="auto|offline-demo|openai|MODULE:FUNC",
              help="Also check a live model: with nothing edited, does it give the recorded answer? (what "
                   "counterfactual and blame check before any verdict)")
@db_option
@json_option
def replay_command(run: str, provider_name: str | None, db: str, as_json: bool) -> None:
    """Run RUN again from its recording: recorded model outputs and tool results, no network, no side effects.

    The replay is recorded as a new run (forked from RUN, labelled replay). It stops with an error
    at the first model request that differs from the recording, naming the stage.
    """
    import asyncio  # here, not at the top: it imports ssl (20 ms), which no --help needs

    from ._control import Controls
    from ._rebuild import ServedTools
    from ._recording import read_recording
    from ._render import render_replay
    from ._replay import replay

    with _open(db) as store:
        result = asyncio.run(replay(store, run))
        live = None
        if provider_name is not None:
            source = store.get_run(result.source_run_id)
            recording = read_recording(store.load_run(source.id))
            live = asyncio.run(Controls().check(
                recording, 0, provider=live_provider(source, provider_name), tools=ServedTools(recording),
                same=lambda a, b: a == b, original=source.output or ""))
    if as_json:
        out = result.to_dict()
        if live is not None:
            out["live_control"] = live.to_dict()
        _echo_json(out)
        return
    click.echo(render_replay(result))
    if live is not None:
        click.echo("  The live model reproduces the recorded answer." if live.reproduced else f"  {live.reason}")


@click.command("counterfactual")
@click.argument("run")
@click.option("--stage", help="The inference to start from: a stage id (or prefix) or a turn number "
                              "(default: the first call each edit changes).")
@click.option("--remove", "remove", multiple=True, metavar="ITEM",
              help="Leave out the item (a tool result: the tool returns nothing, its call kept).")
@click.option("--replace", "replace", metavar="ITEM", help="Replace the item's text (with --with).")
@click.option("--with", "with_text", metavar="TEXT", help="The replacement text for --replace.")
@click.option("--returned-nothing", "nothing", multiple=True, metavar="ITEM",
              help="A tool result: the tool returned nothing (its call kept).")
@click.option("--returned-error", "failed", multiple=True, metavar="ITEM",
              help="A tool result: the tool failed (its call kept).")
@click.option("--restore", "restore", multiple=True, metavar="ITEM",
              help="Put an item the memory window or the prompt cap left out back in.")
@repeat_option
@same_option
@new_calls_option
@provider_option
@tools_option
@db_option
@json_option
def counterfactual_command(
    run: str, stage: str | None, remove: tuple[str, ...], replace: str | None, with_text: str | None,
    nothing: tuple[str, ...], failed: tuple[str, ...], restore: tuple[str, ...], repeats: int,
    same_ref: str, new_calls: str, provider_name: str, tools_ref: str | None, db: str, as_json: bool,
) -> None:
    """Re-run RUN with items edited, and say whether the answer flips.

    ITEM is an item's name (memory:profile.city, result:weather#1, call:weather#1, ...) or its hash
    (or a unique prefix). A control re-run with no edit comes first: when it does not reproduce the
    recording, the verdict is inconclusive. Model calls before the first edited one are served from
    the recording; from there the live model answers. Tool calls identical to recorded ones get the
    recorded results. Each re-run is recorded as a run forked from RUN. Verdict: flips, holds or
    inconclusive.
    """
    if (replace is None) != (with_text is None):
        raise click.UsageError("--replace ITEM and --with TEXT go together")
    if not (remove or nothing or failed or restore or replace is not None):
        raise click.UsageError("say what to change: --remove ITEM or --replace ITEM --with TEXT (or "
                               "--returned-nothing, --returned-error, --restore)")
    import asyncio

    from ._counterfactual import counterfactual  # here, once the arguments are known to be good
    from ._edits import Edit
    from ._render import render_counterfactual

    edits = [Edit.remove(item) for item in remove]
    edits += [Edit.returned_nothing(item) for item in nothing]
    edits += [Edit.returned_error(item) for item in failed]
    edits += [Edit.restore(item) for item in restore]
    if replace is not None and with_text is not None:
        edits.append(Edit.replace(replace, with_text))
    with _open(db) as store:
        source = store.get_run(store.resolve_run_id(run))
        provider, tools = live_provider(source, provider_name), load_tools(source, tools_ref)
        progress = None if as_json else _progress
        result: CounterfactualResult = asyncio.run(counterfactual(
            store, source.id, edits=edits, stage=stage, provider=provider, tools=tools, repeats=repeats,
            comparator=load_comparator(same_ref), new_calls=new_calls,
            on_outcome=(lambda o: progress(f"re-run {o.run_id}: {o.result}")) if progress else None,
        ))
    _echo_json(result.to_dict()) if as_json else click.echo(render_counterfactual(result))


def _alternatives(values: Sequence[str]) -> dict[str, str]:
    out = {}
    for value in values:
        name, sep, text = value.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{value!r} is not ITEM=TEXT", param_hint="--alternative")
        out[name] = text
    return out


@click.command("blame")
@click.argument("run")
@repeat_option
@same_option
@new_calls_option
@click.option("--include-tools", is_flag=True, help="Test the tool definitions too.")
@click.option("--alternative", "alternatives", multiple=True, metavar="ITEM=TEXT",
              help="Test a model output of the run (call:weather#1, output:turn1) by putting TEXT in its place "
                   "(a tool call's TEXT is its JSON arguments).")
@click.option("--left-out/--no-left-out", default=True, show_default=True,
              help="Also restore what the memory window or the prompt cap left out of the answering call.")
@click.option("--bisect-above", type=click.IntRange(1), default=8, show_default=True,
              help="With more suspects than this, test the most likely alone, then the rest in groups.")
@provider_option
@tools_option
@db_option
@json_option
def blame_command(
    run: str, repeats: int, same_ref: str, new_calls: str, include_tools: bool, alternatives: tuple[str, ...],
    left_out: bool, bisect_above: int, provider_name: str, tools_ref: str | None, db: str, as_json: bool,
) -> None:
    """Find the context items that made RUN answer as it did: each suspect `why` names, most likely first,
    is edited in a counterfactual (after a control re-run); the items whose edit flips the answer are
    reported, causes first, each with its chain, and the re-runs made and time taken."""
    import asyncio

    from ._blame import blame
    from ._render import render_blame

    with _open(db) as store:
        source = store.get_run(store.resolve_run_id(run))
        report: BlameReport = asyncio.run(blame(
            store, source.id, provider=live_provider(source, provider_name), tools=load_tools(source, tools_ref),
            repeats=repeats, comparator=load_comparator(same_ref), new_calls=new_calls,
            include_tool_definitions=include_tools, include_left_out=left_out,
            alternatives=_alternatives(alternatives), bisect_above=bisect_above,
            on_progress=None if as_json else _progress,
        ))
    _echo_json(report.to_dict()) if as_json else click.echo(render_blame(report))


@click.command("dropped")
@click.argument("run")
@db_option
@json_option
def dropped_command(run: str, db: str, as_json: bool) -> None:
    """For each inference of RUN, the context that was available but not sent, and what left it out."""
    from tracer import Store, dropped_context

    from ._render import render_dropped

    with Store.open(db, read_only=True) as store:
        reports = dropped_context(store, store.resolve_run_id(run))
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in reports], indent=2, ensure_ascii=False))
    else:
        click.echo(render_dropped(reports))


def _progress(line: str) -> None:
    click.echo(f"  {line}", err=True)


def live_provider(run: Run, name: str = "auto") -> Provider:
    """The live model to re-run ``run`` against (see the module docstring)."""
    if ":" in name:
        return _provider_from(name)
    if name not in ("auto", "offline-demo", "openai"):
        raise click.BadParameter(f"{name!r} is not auto, offline-demo, openai or MODULE:FUNC", param_hint="--provider")
    if name == "offline-demo" or (name == "auto" and "offline-demo" in run.labels):
        from ..providers._demo import OfflineDemoModel

        return OfflineDemoModel()
    if not os.environ.get("OPENAI_API_KEY"):
        raise EvidenceError(
            f"run {run.id} was made with model {run.model or 'unknown'}; set OPENAI_API_KEY (and OPENAI_BASE_URL "
            f"for a compatible server) to re-run it against a live model, or pass --provider offline-demo or "
            f"--provider MODULE:FUNC"
        )
    from ..providers import OpenAIProvider

    return OpenAIProvider(run.model or os.environ.get("FOOTPRINT_MODEL") or "gpt-4o-mini")


def _provider_from(ref: str) -> Provider:
    """A Provider, a function returning one, or a model function (request -> response) for a FunctionModel."""
    from ..providers import FunctionModel, Provider

    value = _import(ref, "--provider")
    if isinstance(value, Provider):
        return value
    if isinstance(value, type) and issubclass(value, Provider):
        value = value()
        return value
    if not callable(value):
        raise click.BadParameter(f"{ref} is not a Provider or a function", param_hint="--provider")
    try:
        takes_request = len(inspect.signature(value).parameters) >= 1
    except (TypeError, ValueError):
        takes_request = True
    if takes_request:
        return FunctionModel(value, name=ref)
    made = value()
    if not isinstance(made, Provider):
        raise click.BadParameter(f"{ref}() returned a {type(made).__name__}, not a Provider", param_hint="--provider")
    return made


def _import(ref: str, what: str) -> Any:
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise click.BadParameter(f"{ref!r} is not MODULE:NAME", param_hint=what)
    if os.getcwd() not in sys.path:  # as `python -m` does: your project's modules, from where you stand
        sys.path.append(os.getcwd())
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise click.BadParameter(f"cannot load {ref}: {exc}", param_hint=what) from None


def load_tools(run: Run, ref: str | None) -> Sequence[Tool] | ToolRegistry:
    """The real tools for new calls: ``ref`` (MODULE:NAME), or the demo's tools for a demo run."""
    from ..errors import UserError
    from ..tools import Tool, ToolRegistry

    if ref is None:
        from ..demo import demo_registry, load_scenario

        try:
            demo_agent = load_scenario().agent
        except UserError:  # no demo scenario next to this install: no default tools
            return ()
        return demo_registry() if run.agent == demo_agent else ()
    value = _import(ref, "--tools")
    if callable(value) and not isinstance(value, Tool | ToolRegistry):
        value = value()
    if isinstance(value, ToolRegistry):
        return value
    if isinstance(value, Tool):
        return [value]
    if isinstance(value, list | tuple) and all(isinstance(t, Tool) for t in value):
        return list(value)
    raise click.BadParameter(f"{ref} is not a ToolRegistry, a Tool or a list of tools", param_hint="--tools")


def _normalized(original: str, answer: str) -> bool:
    return " ".join(original.lower().split()) == " ".join(answer.lower().split())


def load_comparator(ref: str) -> Comparator:
    """``exact``, ``normalized``, or a function (original, new) -> bool named MODULE:FUNC."""
    if ref == "exact":
        return lambda original, answer: original == answer
    if ref == "normalized":
        return _normalized
    value = _import(ref, "--same")
    if not callable(value):
        raise click.BadParameter(f"{ref} is not a function", param_hint="--same")
    function: Callable[[str, str], bool] = value
    return function

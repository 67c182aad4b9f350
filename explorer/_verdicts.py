"""Replay, counterfactual and blame from the explorer, as verdicts a screen can show.

These re-run recorded runs (``agent.evidence``) and record the re-runs as runs forked from the
original, so they need a store this process can write. Each function blocks (it runs the agent's
loop on an event loop of its own), so screens call them from worker threads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from agent import Tool, ToolRegistry
from agent.evidence import Edit, blame, counterfactual, replay
from agent.evidence.cli import live_provider, load_tools
from agent.providers import Provider
from tracer import Run, Store, one_line

#: The live model a re-run is answered by, chosen from the original run (its labels, its model).
ProviderFor = Callable[[Run], Provider]
#: The real tools for tool calls the recording did not make, chosen from the original run.
ToolsFor = Callable[[Run], Sequence[Tool] | ToolRegistry]


def default_provider_for(run: Run) -> Provider:
    """The offline demo model for the runs it made; otherwise OpenAI (needs ``OPENAI_API_KEY``)."""
    return live_provider(run, "auto")


def default_tools_for(run: Run) -> Sequence[Tool] | ToolRegistry:
    """The demo's tools for demo runs, none otherwise (calls the recording made are served from it)."""
    return load_tools(run, None)


def chosen_evidence(provider_name: str = "auto", tools_ref: str | None = None) -> tuple[ProviderFor, ToolsFor]:
    """The model and tools re-runs use when given ``--provider`` and ``--tools`` as ``footprint blame`` takes
    them; a MODULE:FUNC that cannot be loaded fails here (click.BadParameter), before any screen opens."""
    probe = Run(id="-", session_id=None, agent="-", status="answered", input="", output=None, model=None,
                started_at=0.0)
    if ":" in provider_name or provider_name not in ("auto", "openai"):
        live_provider(probe, provider_name)  # what does not need the run: a name or a MODULE:FUNC
    if tools_ref is not None:
        load_tools(probe, tools_ref)
    return (lambda run: live_provider(run, provider_name)), (lambda run: load_tools(run, tools_ref))


@dataclass
class Verdict:
    """What an evidence action found: a headline verdict, lines of detail, and the runs it recorded."""

    action: str  # replay | counterfactual | blame
    verdict: str  # identical | differs | flips | holds | inconclusive | culprits found | no culprit
    lines: list[tuple[str, str]] = field(default_factory=list)  # (text, style)
    runs: list[str] = field(default_factory=list)

    def add(self, text: str, style: str = "") -> None:
        """Add a line of detail."""
        self.lines.append((text, style))


_STYLES = {"flips": "bold red", "holds": "green", "inconclusive": "yellow", "same": "green", "changed": "red",
           "error": "red"}


def replay_verdict(store: Store, run_id: str) -> Verdict:
    """Replay ``run_id`` from its recording (no model, no tools) and say whether it came out the same."""
    result = asyncio.run(replay(store, run_id))
    verdict = Verdict("replay", "identical" if result.identical else "differs", runs=[result.run_id])
    verdict.add(f"Replayed as run {result.run_id}: {result.model_calls} model call(s) and "
                f"{result.tool_calls} tool result(s) served from the recording; nothing live was called.", "dim")
    verdict.add(f"{result.status}: {one_line(result.answer, 300)}")
    if result.identical:
        verdict.add("Identical to the recording at every stage.", "green")
    else:
        verdict.add(f"Differs from the recording: {result.divergence.reason}", "red")
    return verdict


def counterfactual_verdict(store: Store, run_id: str, item_hash: str, *, provider: Provider,
                           tools: Sequence[Tool] | ToolRegistry = (), repeats: int = 3) -> Verdict:
    """Re-run ``run_id`` without the item ``item_hash``, ``repeats`` times: does the answer flip?"""
    result = asyncio.run(counterfactual(store, run_id, edits=[Edit.remove(item_hash)], provider=provider,
                                        tools=tools, repeats=repeats))
    verdict = Verdict("counterfactual", result.verdict, runs=[o.run_id for o in result.outcomes])
    for edit in result.edits:
        verdict.add(f"Removed {edit.item.kind} ({edit.source}): {one_line(edit.item.text, 200)}", "bold")
    verdict.add(f"from inference {result.stage_name!r}; the original answer ({result.original_status}):", "dim")
    verdict.add(f"  {one_line(result.original_answer, 300)}")
    for outcome in result.outcomes:
        detail = outcome.error if outcome.result == "error" else outcome.answer
        verdict.add(f"re-run {outcome.run_id} {outcome.result}: {one_line(detail, 300)}", _STYLES.get(outcome.result, ""))
    verdict.add(f"{result.verdict}: {result.changed} of {len(result.outcomes)} re-runs answered differently",
                _STYLES.get(result.verdict, "bold"))
    return verdict


def blame_verdict(store: Store, run_id: str, *, provider: Provider, tools: Sequence[Tool] | ToolRegistry = (),
                  repeats: int = 3, on_progress: Callable[[str], None] | None = None) -> Verdict:
    """Test every item `why` names for the answer of ``run_id``; the culprits are those whose removal flips it."""
    report = asyncio.run(blame(store, run_id, provider=provider, tools=tools, repeats=repeats,
                               on_progress=on_progress))
    culprits = report.culprits
    verdict = Verdict("blame", "culprits found" if culprits else "no culprit",
                      runs=[r for s in culprits for r in s.run_ids])
    verdict.add(f"The answer: {one_line(report.answer, 300)}", "dim")
    for suspect in culprits:
        verdict.add(f"culprit ({suspect.verdict}, {suspect.changed}/{suspect.repeats}): {suspect.source}: "
                    f"{one_line(suspect.text, 200)}", "bold red")
    for suspect in report.tested:
        if suspect not in culprits:
            verdict.add(f"{suspect.verdict} ({suspect.via}): {suspect.source}: {one_line(suspect.text, 120)}",
                        _STYLES.get(suspect.verdict, "dim"))
    for suspect in report.left_out:  # what the window or the prompt cap left out, restored
        verdict.add(f"{suspect.verdict} (restored): {suspect.source}: {one_line(suspect.text, 120)}",
                    _STYLES.get(suspect.verdict, "dim"))
    for skipped in report.skipped:
        verdict.add(f"not tested ({skipped.reason}): {one_line(skipped.text, 100)}", "dim")
    for note in report.notes:
        verdict.add(note, "yellow")
    return verdict

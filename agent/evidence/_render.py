"""Plain-text renderings of replays, counterfactuals, blame reports, run comparisons and dropped context."""

from __future__ import annotations

from collections.abc import Sequence

from tracer import DroppedContext, Origin, one_line

from ._blame import BlameReport, Suspect
from ._counterfactual import CounterfactualResult
from ._replay import ReplayResult


def short(text: str | None, limit: int = 70) -> str:
    """``text`` on one line, cut to ``limit`` columns with an ellipsis, quoted; its control
    characters written as ``\\xNN``, as ``footprint show`` and ``why`` write them (not ``repr``'s
    doubled backslashes)."""
    return f"'{one_line(text, limit)}'"


def _origin(origin: Origin) -> str:
    if origin.kind == "stage":
        return f"run {origin.run_id}"
    return f"{origin.kind} {origin.source or ''}".rstrip()


def render_replay(result: ReplayResult) -> str:
    """A replay in a few lines."""
    lines = [
        f"Replayed run {result.source_run_id} as run {result.run_id} (forked from it, labelled replay).",
        f"  {result.status}: {short(result.answer, 300)}",
        f"  {result.model_calls} model call(s) and {result.tool_calls} tool result(s) served from the recording; "
        f"no model was called and no tool was run.",
    ]
    if result.identical:
        lines.append("  Identical to the recording: the same stages, the same context at every inference, the same "
                     "outputs.")
    else:
        lines.append(f"  Differs from the recording: {result.divergence.reason}")
    return "\n".join(lines)


def _control_line(result: CounterfactualResult) -> str:
    control = result.control
    if control is None:
        return ""
    if control.reproduced:
        return "Control: a re-run with no edit reproduced the recorded context and answer."
    return f"Control failed: {control.reason}"


def render_counterfactual(result: CounterfactualResult) -> str:
    """A counterfactual: the edit, the control, the outcomes and the verdict."""
    lines = [f"Counterfactual on run {result.source_run_id} from inference {result.stage_name!r} ({result.stage_id}):"]
    verbs = {"remove": "removed", "replace": "replaced", "nothing": "the tool returned nothing for",
             "error": "the tool failed for", "restore": "restored"}
    for edit in result.edits:
        lines.append(f"  {verbs.get(edit.action, edit.action)} {edit.item.kind} {edit.name} ({edit.item.hash[:12]}): "
                     f"{short(edit.item.text)}")
        if edit.replacement is not None and edit.action in ("replace", "error"):
            lines.append(f"    with {short(edit.replacement.text)}")
    lines.append(_control_line(result))
    lines.append(f"Original answer ({result.original_status}):")
    lines.append(f"    {short(result.original_answer, 300)}")
    for number, outcome in enumerate(result.outcomes, 1):
        detail = outcome.error if outcome.result == "error" else outcome.answer
        lines.append(f"  re-run {number}  {outcome.run_id}  {outcome.result}:")
        lines.append(f"    {short(detail, 300)}")
    if result.reason:
        lines.append(f"Verdict: inconclusive ({result.reason})")
    else:
        lines.append(f"Verdict: {result.verdict} ({result.changed} of {len(result.outcomes)} re-runs answered "
                     f"differently)")
    lines.append(f"{result.reruns} re-run(s) in {result.seconds:.2f} s")
    return "\n".join(line for line in lines if line)


def _suspect_line(suspect: Suspect, width: int = 44) -> str:
    return (f"  {suspect.verdict:<12} {suspect.via:<14} {suspect.name[:28]:<28} {suspect.item_hash[:12]}  "
            f"{suspect.kind:<15} {short(suspect.text, width)}")


def render_blame(report: BlameReport) -> str:
    """The culprits first with their chains, then everything tested and skipped, then the cost."""
    lines = [f"Blame for run {report.run_id}, which answered:", f"    {short(report.answer, 300)}", ""]
    culprits = report.culprits
    if culprits:
        lines.append("Culprits (editing the item alone changes the answer; causes first):")
        for rank, suspect in enumerate(culprits, 1):
            edit = {"nothing": "the tool returning nothing", "replace": "the alternative", "remove": "removing it"}
            lines.append(f"  {rank}. {suspect.name} ({suspect.kind} {suspect.item_hash[:12]}): {short(suspect.text)}")
            lines.append(f"     {suspect.verdict} with {edit.get(suspect.action, suspect.action)}: {suspect.changed} "
                         f"of {suspect.repeats} re-runs changed (runs {', '.join(suspect.run_ids)})")
            for link in (suspect.chain.links if suspect.chain else []):
                lines.append(f"     <- {link.text}")
            if suspect.chain and suspect.chain.try_next:
                lines.append(f"     try: {suspect.chain.try_next}")
    elif report.tested and all(s.reason for s in report.tested):
        lines.append("Nothing can be concluded: no re-run could test an item (the reasons are below).")
    else:
        lines.append("No single item's edit changes the answer.")
    for suspect in report.omissions:
        lines.append(f"  Left out, and restoring it changes the answer: {suspect.name}: {short(suspect.text)}")
    lines += ["", f"Tested ({len(report.tested)} items in rank order, {len(report.groups)} group test(s)):"]
    lines += [_suspect_line(s) for s in sorted(report.tested, key=lambda s: s.rank)]
    reasons: dict[str, list[str]] = {}
    for suspect in report.tested:
        if suspect.reason:
            reasons.setdefault(suspect.reason, []).append(suspect.name)
    for reason, names in reasons.items():  # one control failing says the same of every item it covers
        named = names[0] if len(names) == 1 else f"{len(names)} items ({', '.join(names[:3])}{', …' if len(names) > 3 else ''})"
        lines.append(f"  {named}: inconclusive: {reason}")
    if report.left_out:
        lines += ["", f"Left out of the answering call, restored ({len(report.left_out)} items):"]
        lines += [_suspect_line(s) for s in report.left_out]
    restored = {s.item_hash for s in report.left_out}
    skipped_here = [s for s in report.skipped if s.item_hash not in restored]  # those are listed just above
    if skipped_here:
        lines += ["", "Not tested:"]
        for skipped in skipped_here:
            lines.append(f"  {skipped.name[:28]:<28} {skipped.kind:<15} {short(skipped.text, 36):<38} {skipped.reason}")
    for note in report.notes:
        lines += ["", f"Note: {note}"]
    lines += ["", f"{report.reruns} re-run(s) (controls included) in {report.seconds:.2f} s"]
    return "\n".join(lines)


def render_dropped(reports: Sequence[DroppedContext]) -> str:
    """Per inference: how much was sent, and each item left out with what left it out."""
    if not reports:
        return "The run made no model call."
    lines = []
    for report in reports:
        lines.append(f"{report.stage_name} ({report.stage_id}): {report.sent} item(s) sent, "
                     f"{len(report.items)} left out")
        for item in report.items:
            lines.append(f"  {item.dropped_by:<18} {item.item_kind:<15} {short(item.text, 50):<52} <- "
                         f"{_origin(item.origin)}")
    return "\n".join(lines)

"""Plain-text renderings of recordings for the terminal: run lists, flowcharts, evidence, diffs.

Every function returns lines (no colour, no terminal codes), so the CLI prints them, tests compare
them, and a pipe gets the same text a person sees.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ._diff import RunDivergence, SnapshotDiff, estimate_tokens
from ._rank import RankedItem
from ._records import EdgeKind, Origin, OriginKind, Run, Stage, StageKind
from ._rundata import RunData
from ._why import Evidence, EvidenceNode

_SPACES = re.compile(r"\s+")


def one_line(text: str | None, width: int = 60) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    flat = _SPACES.sub(" ", text or "").strip()
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, right: Iterable[int] = ()) -> list[str]:
    """Aligned columns; ``right`` names the columns to right-align (numbers)."""
    cells = [[("" if v is None else str(v)) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    align_right = set(right)

    def fmt(row: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in align_right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip()

    return [fmt(headers), fmt(["-" * w for w in widths]), *(fmt(r) for r in cells)]


def when(timestamp: float | None) -> str:
    """A timestamp as local date and time to the second."""
    if timestamp is None:
        return "-"
    return dt.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S")


def duration(start: float | None, end: float | None) -> str:
    """A duration in ms (or s past ten seconds); ``running`` while it has not ended."""
    if start is None or end is None:
        return "running"
    ms = (end - start) * 1000
    return f"{ms / 1000:.1f} s" if ms >= 10_000 else f"{ms:.1f} ms"


# ---------------------------------------------------------------------- runs


def runs_table(runs: Sequence[Run], stage_counts: dict[str, int]) -> list[str]:
    """The list of runs, newest first."""
    rows = [
        (r.id, when(r.started_at), r.agent, r.session_id or "-", r.status, stage_counts.get(r.id, 0),
         r.tokens_in + r.tokens_out, one_line(r.input, 40))
        for r in runs
    ]
    return table(("run", "started", "agent", "session", "status", "stages", "tokens", "input"), rows, right=(5, 6))


# ---------------------------------------------------------------------- show


def _context_size(data: RunData, stage: Stage) -> str:
    entries = data.inputs.get(stage.id, [])
    sent = [e for e in entries if e.included]
    tokens = sum(estimate_tokens(data.items[e.item_hash].text) for e in sent if e.item_hash in data.items)
    out = f"context {len(sent)} items, ~{tokens} tokens"
    left_out = len(entries) - len(sent)
    return out + (f" ({left_out} not in context)" if left_out else "")


def _stage_row(data: RunData, stage: Stage, incoming: dict[str, set[str]]) -> list[str]:
    notes = []
    if stage.kind == StageKind.INFERENCE:
        notes.append(_context_size(data, stage))
    elif stage.kind == StageKind.TOOL and data.outputs.get(stage.id):
        result = data.items.get(data.outputs[stage.id][0])
        if result is not None:
            notes.append(f"-> {one_line(result.text, 40)}")
    kinds = incoming.get(stage.id, set()) - {EdgeKind.NEXT.value, EdgeKind.FORK.value, EdgeKind.JOIN.value}
    if kinds:
        notes.append(f"({', '.join(sorted(kinds))})")
    if stage.error:
        notes.append(f"error: {one_line(stage.error, 50)}")
    return [str(stage.seq), stage.kind, one_line(stage.name, 32), stage.status, duration(stage.started_at, stage.ended_at),
            "  ".join(notes)]


def show_run(data: RunData, children: Mapping[str, RunData] | None = None) -> list[str]:
    """A run's flowchart as text: stages in order, parallel branches as a fork/join block.

    ``children`` (run id -> its data) are the runs its ``subagent`` stages started, at any depth
    (see :func:`tracer.child_runs`): each is drawn inside the stage that started it, framed by its
    agent's boundary, so a team's runs read as one flowchart.
    """
    run = data.run
    lines = [
        f"run      {run.id}",
        f"agent    {run.agent}   session {run.session_id or '-'}   status {run.status}",
        f"model    {run.model or '-'}   tokens {run.tokens_in} in / {run.tokens_out} out   cost ${run.cost:.4f}",
        f"started  {when(run.started_at)}   took {duration(run.started_at, run.ended_at)}",
        f"input    {one_line(run.input, 100)}",
    ]
    if run.output:
        lines.append(f"output   {one_line(run.output, 100)}")
    if run.error:
        lines.append(f"error    {one_line(run.error, 100)}")
    if run.forked_from_run:
        lines.append(f"forked   from run {run.forked_from_run} at stage {run.forked_from_stage or '-'}")
    parent = run.attributes.get("parent_run")
    if parent:
        lines.append(f"child    of run {parent} ({run.attributes.get('parent_agent', '?')}) at stage "
                     f"{run.attributes.get('parent_stage', '-')}")
    if children:
        agents = _team_agents(data, children)
        lines.append(f"team     {len(agents)} agents: {', '.join(agents)}")
    lines.append("")
    rows = _flow_rows(data, children or {}, "", set())
    lines += table(("#", "kind", "name", "status", "duration", ""), rows, right=(0, 4))
    return lines


def _team_agents(data: RunData, children: Mapping[str, RunData]) -> list[str]:
    agents = [data.run.agent]
    for child in children.values():
        if child.run.agent not in agents:
            agents.append(child.run.agent)
    return agents


def _flow_rows(data: RunData, children: Mapping[str, RunData], pad: str, drawn: set[str]) -> list[list[str]]:
    drawn.add(data.run.id)
    incoming: dict[str, set[str]] = {}
    forks: dict[str, list[str]] = {}
    for edge in data.edges:
        incoming.setdefault(edge.dst, set()).add(edge.kind)
        if edge.kind == EdgeKind.FORK:
            forks.setdefault(edge.src, []).append(edge.dst)
    branch_of = {dst: src for src, dsts in forks.items() for dst in dsts}
    by_id = {s.id: s for s in data.stages}
    rows: list[list[str]] = []

    def add(row: list[str], prefix: str = "") -> None:
        row[1] = pad + prefix + row[1]
        rows.append(row)

    for stage in sorted(data.stages, key=lambda s: s.seq):
        if stage.id in branch_of and branch_of[stage.id] in by_id:
            continue  # shown inside its fork block
        add(_stage_row(data, stage, incoming))
        branches = sorted((by_id[d] for d in forks.get(stage.id, []) if d in by_id), key=lambda s: s.seq)
        if branches:
            order = "in order" if stage.attributes.get("sequential") else "in parallel"
            add(["", f"┌ fork: {len(branches)} {order}", "", "", "", ""])
            for i, branch in enumerate(branches):
                add(_stage_row(data, branch, incoming), "├─ " if i < len(branches) - 1 else "└─ ")
            add(["", "└ join", "", "", "", ""])
        child = children.get(str(stage.attributes.get("child_run", ""))) if stage.kind == StageKind.SUBAGENT else None
        if child is not None and child.run.id not in drawn:
            rows.append(["", f"{pad}╭─ agent {child.run.agent}", "", child.run.status,
                         duration(child.run.started_at, child.run.ended_at), f"run {child.run.id}"])
            rows.extend(_flow_rows(child, children, pad + "│  ", drawn))
            rows.append(["", f"{pad}╰─ {child.run.agent}", "", "", "",
                         f'{child.run.status}: "{one_line(child.run.output or child.run.error, 40)}"'])
    return rows


# ---------------------------------------------------------------------- why


def _short_run(run_id: str | None) -> str:
    return "-" if run_id is None else (run_id if len(run_id) <= 16 else run_id[:16] + "…")


def describe_origin(origin: Origin | None, stage: EvidenceNode | None, root_run: str) -> str:
    """Where an item came from, e.g. ``memory profile.city (run r-0193…, stage memory load)``."""
    if origin is None:
        return "unknown origin"
    head = origin.kind if origin.kind != OriginKind.STAGE or stage is None else (stage.stage_kind or "stage")
    if origin.source:
        head = f"{head} {origin.source}"
    if origin.stage_id is None:
        return head
    where = "this run" if origin.run_id == root_run else f"run {_short_run(origin.run_id)}"
    name = stage.stage_name if stage is not None and stage.stage_name else origin.stage_id
    return f"{head} ({where}, stage {name})"


def why_tree(evidence: Evidence, run_id: str, *, width: int = 60) -> list[str]:
    """The evidence as an indented tree, then what was not in context and what dropped it."""
    lines: list[str] = []

    def item_line(node: EvidenceNode, depth: int) -> None:
        stage = next((c for c in node.children if c.node == "stage"), None)
        role = node.item_kind or "?"
        text = f'"{one_line(node.text, width)}"' if node.text is not None else f"(item {node.item_hash} not stored)"
        arrow = describe_origin(node.origin, stage, run_id)
        pad = "  " * depth
        if node.seen:
            lines.append(f"{pad}{role}  {text}  [shown above]")
            return
        if stage is not None and stage.seen:
            lines.append(f"{pad}{role}  {text}  <- {arrow}  [stage shown above]")
            return
        note = f"  [{stage.note}]" if stage is not None and stage.note else ""
        lines.append(f"{pad}{role}  {text}  <- {arrow}{note}")
        if stage is not None:
            for child in stage.children:
                item_line(child, depth + 1)

    root = evidence.root
    lines.append(f"why: {root.item_kind or 'item'} of run {run_id}")
    item_line(root, 1)
    if len(evidence.runs) > 1:
        lines.append("")
        lines.append(f"walked {len(evidence.runs)} runs of the session: {', '.join(evidence.runs)}")
    lines.append("")
    if not evidence.not_in_context:
        lines.append("not in context: nothing was left out")
        return lines
    lines.append("not in context (available but not sent):")
    seen: set[str] = set()
    for dropped in evidence.not_in_context:
        if dropped.item_hash in seen:
            continue
        seen.add(dropped.item_hash)
        origin = describe_origin(dropped.origin, None, run_id)
        lines.append(f'  {dropped.item_kind}  "{one_line(dropped.text, width)}"  <- {origin}  '
                     f"dropped by {dropped.dropped_by}")
    return lines


def ranked_lines(ranked: Sequence[RankedItem], run_id: str, *, width: int = 56, limit: int | None = None) -> list[str]:
    """`why`'s suspects, most likely first: rank, score, name, kind, text, and the reasons."""
    shown = list(ranked if limit is None else ranked[:limit])
    lines = [f"why: the items the answer of run {run_id} rests on, most likely first"]
    for rank_no, item in enumerate(shown, 1):
        label = item.name or item.item_hash[:12]
        lines.append(f"{rank_no:>3}. {item.score:6.2f}  {label:<26} {item.kind:<15} \"{one_line(item.text, width)}\"")
        if item.reasons:
            lines.append(f"{'':>13}{'; '.join(item.reasons)}")
    if limit is not None and len(ranked) > limit:
        lines.append(f"  ({len(ranked) - limit} more; --all lists them, --order context shows the walk)")
    return lines


# ---------------------------------------------------------------------- diff


def snapshot_diff_lines(diff: SnapshotDiff, *, width: int = 60) -> list[str]:
    """A snapshot diff: each changed item, then the token estimate per origin kind."""
    lines: list[str] = []
    if not diff.entries:
        lines.append(f"snapshots are the same ({diff.kept} items)")
    else:
        rows = []
        for e in diff.entries:
            origin = e.origin_kind + (f" {e.origin_source}" if e.origin_source else "")
            text = one_line(e.text, width)
            if e.before_text is not None:
                text = f'"{one_line(e.before_text, width // 2)}" -> "{one_line(e.text, width // 2)}"'
            else:
                text = f'"{text}"'
            sign = "-" if e.change == "dropped" else "+"
            rows.append((e.change, e.item_kind, origin, f"{sign}{e.tokens}", text))
        lines += table(("change", "kind", "origin", "tokens", "item"), rows, right=(3,))
        lines.append(f"{diff.kept} items kept")
    lines.append("")
    kinds = sorted(set(diff.tokens_before) | set(diff.tokens_after))
    rows2 = [
        (k, diff.tokens_before.get(k, 0), diff.tokens_after.get(k, 0),
         f"{diff.tokens_after.get(k, 0) - diff.tokens_before.get(k, 0):+d}")
        for k in kinds
    ]
    total_a, total_b = sum(diff.tokens_before.values()), sum(diff.tokens_after.values())
    rows2.append(("total", total_a, total_b, f"{total_b - total_a:+d}"))
    lines += table(("origin kind", "tokens A", "tokens B", "change"), rows2, right=(1, 2, 3))
    return lines


def run_diff_lines(a: RunData, b: RunData, divergence: RunDivergence) -> list[str]:
    """Where two runs first diverge, and the snapshot diff at that point."""
    lines = [f"A  {a.run.id}  {a.run.status}  {one_line(a.run.output or a.run.error, 60)}",
             f"B  {b.run.id}  {b.run.status}  {one_line(b.run.output or b.run.error, 60)}", ""]
    if divergence.index is None:
        lines.append("the runs do not diverge: same stages, same context, same outputs")
        return lines
    lines.append(f"first divergence at stage #{divergence.index}: {divergence.reason}")
    for label, data, stage_id in (("A", a, divergence.stage_a), ("B", b, divergence.stage_b)):
        if stage_id and data.has_stage(stage_id):
            stage = data.stage(stage_id)
            lines.append(f"  {label}: {stage.kind} {stage.name!r} ({stage.id})")
    if divergence.snapshot is not None:
        lines.append("")
        lines += snapshot_diff_lines(divergence.snapshot)
    return lines

"""Plain-text renderings of recordings for the terminal: run lists, flowcharts, evidence, diffs.

Every function returns lines (no colour, no terminal codes), so the CLI prints them, tests compare
them, and a pipe gets the same text a person sees. A recorded text may hold terminal codes (a message
sent to a host by anyone): they are shown escaped (:func:`for_terminal`), never sent to the terminal.
"""

from __future__ import annotations

import datetime as dt
import re
import textwrap
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ._compare import RunComparison, StagePair
from ._diff import SnapshotDiff, diff_snapshots, estimate_tokens
from ._lineage import started_run
from ._names import item_names
from ._rank import RankedItem
from ._records import (
    PARENT_AGENT,
    PARENT_STAGE,
    EdgeKind,
    Origin,
    OriginKind,
    Run,
    Stage,
    StageKind,
)
from ._rundata import RunData
from ._why import SHOWN_ABOVE, Evidence, EvidenceNode

_SPACES = re.compile(r"\s+")
#: the characters a terminal acts on rather than shows (colours, the window title, moving the
#: cursor): C0 controls but tab and newline, DEL, and the C1 controls
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def for_terminal(text: str) -> str:
    """``text`` with each control character a terminal would act on written as ``\\xNN`` (a
    Windows line end is a line end)."""
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text.replace("\r\n", "\n"))


def cells(text: str) -> int:
    """How many terminal columns ``text`` takes: a wide character (CJK, most emoji) two, a combining mark none."""
    if text.isascii():
        return len(text)
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def one_line(text: str | None, width: int = 60) -> str:
    """``text`` on one line, cut to ``width`` terminal columns with an ellipsis (nothing for no room)."""
    if width <= 0:
        return ""
    text = for_terminal(text or "")
    # only the start of a long text can show: measure a prefix, longer until it overflows or is all
    # of it (measuring all of a 30 KB message to show 40 columns took the explorer's why screen 60 s)
    size = 2 * width + 16
    while True:
        flat = _SPACES.sub(" ", text[:size]).lstrip()
        if size >= len(text):
            flat = flat.rstrip()
            if cells(flat) <= width:
                return flat
            break
        if cells(flat) > width:
            break
        size *= 2
    kept, used = [], 0
    for char in flat:
        used += cells(char)
        if used > width - 1:
            break
        kept.append(char)
    return "".join(kept) + "…"


def wrapped(label: str, text: str | None, *, width: int = 100, pad: int = 9) -> list[str]:
    """``label`` and the whole of ``text``, wrapped to ``width`` with the continuation lines indented.

    Nothing is cut: a person reading an answer in a terminal sees all of it.
    """
    first = f"{label:<{pad - 1}} "
    body = [line for para in for_terminal(text or "").splitlines() or [""]
            for line in (textwrap.wrap(para, max(20, width - pad), break_long_words=True) or [""])]
    return [(first if i == 0 else " " * pad) + line for i, line in enumerate(body)]


def duration_text(seconds: float) -> str:
    """A duration to read: ``850 µs``, ``12.3 ms``, ``4.1 s``."""
    if seconds < 0.001:
        return f"{seconds * 1_000_000:.0f} µs"
    if seconds < 10:
        return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"
    return f"{seconds:.1f} s"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, right: Iterable[int] = ()) -> list[str]:
    """Aligned columns; ``right`` names the columns to right-align (numbers).

    A cell's terminal codes are escaped (``\\x1b``) before its width is measured, as they will be printed.
    """
    rows_text = [[("" if v is None else for_terminal(str(v))) for v in row] for row in rows]
    widths = [cells(h) for h in headers]
    for row in rows_text:
        widths = [max(w, cells(c)) for w, c in zip(widths, row, strict=True)]
    align_right = set(right)

    def fmt(row: Sequence[str]) -> str:
        padded = ((" " * (w - cells(c)) + c) if i in align_right else (c + " " * (w - cells(c)))
                  for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        return "  ".join(padded).rstrip()

    return [fmt(headers), fmt(["-" * w for w in widths]), *(fmt(r) for r in rows_text)]


def when(timestamp: float | None) -> str:
    """A timestamp as local date and time to the second."""
    if timestamp is None:
        return "-"
    return dt.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S")


def duration(start: float | None, end: float | None) -> str:
    """A duration in µs, ms or s (:func:`duration_text`); ``running`` while it has not ended."""
    if start is None or end is None:
        return "running"
    return duration_text(max(0.0, end - start))


# ---------------------------------------------------------------------- runs


def runs_table(runs: Sequence[Run], stage_counts: dict[str, int], *, width: int = 100) -> list[str]:
    """The list of runs, newest first; the input takes what the other columns leave of ``width``."""
    rows = [
        [r.id, when(r.started_at), r.agent, r.session_id or "-", r.status, str(stage_counts.get(r.id, 0)),
         str(r.tokens_in + r.tokens_out), r.input]
        for r in runs
    ]
    headers = ("run", "started", "agent", "session", "status", "stages", "tokens", "input")
    used = sum(max(cells(h), *(cells(row[i]) for row in rows)) + 2 for i, h in enumerate(headers[:-1])) if rows else 0
    for row in rows:
        row[-1] = one_line(row[-1], max(20, width - used))
    return table(headers, rows, right=(5, 6))


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


def show_run(
    data: RunData, children: Mapping[str, RunData] | None = None, *, width: int = 100, context: bool = False
) -> list[str]:
    """A run's flowchart as text: stages in order, parallel branches as a fork/join block.

    ``children`` (run id -> its data) are the runs its ``subagent`` stages started, at any depth
    (see :func:`tracer.child_runs`): each is drawn inside the stage that started it, framed by its
    agent's boundary, so a team's runs read as one flowchart. The input, answer and error are
    shown whole, wrapped to ``width``. With ``context``, each inference's snapshot follows, item
    by item with its name and hash (what ``why --item`` and ``counterfactual --remove`` take).
    """
    run = data.run
    lines = [
        f"run      {run.id}",
        f"agent    {run.agent}   session {run.session_id or '-'}   status {run.status}",
        f"model    {run.model or '-'}   tokens {run.tokens_in} in / {run.tokens_out} out   cost ${run.cost:.4f}",
        f"started  {when(run.started_at)}   took {duration(run.started_at, run.ended_at)}",
        *wrapped("input", run.input, width=width),
    ]
    if run.output:
        lines += wrapped("output", run.output, width=width)
    if run.error:
        lines += wrapped("error", run.error, width=width)
    if run.forked_from_run:
        lines.append(f"forked   from run {run.forked_from_run} at stage {run.forked_from_stage or '-'}")
    if run.parent_run:
        lines.append(f"child    of run {run.parent_run} ({run.attributes.get(PARENT_AGENT, '?')}) at stage "
                     f"{run.attributes.get(PARENT_STAGE, '-')}")
    if children:
        agents = _team_agents(data, children)
        lines.append(f"team     {len(agents)} agents: {', '.join(agents)}")
    lines.append("")
    rows = _flow_rows(data, children or {}, "", set())
    lines += table(("#", "kind", "name", "status", "duration", "detail"), rows, right=(0, 4))
    if context:
        lines += context_lines(data, width=width)
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
            add(["", f"┌ fork: {len(branches)} {order}" if len(branches) > 1 else "┌ fork: 1 branch", "", "", "", ""])
            for i, branch in enumerate(branches):
                add(_stage_row(data, branch, incoming), "├─ " if i < len(branches) - 1 else "└─ ")
            add(["", "└ join", "", "", "", ""])
        child = children.get(started_run(stage) or "")
        if child is not None and child.run.id not in drawn:
            rows.append(["", f"{pad}╭─ agent {child.run.agent}", "", child.run.status,
                         duration(child.run.started_at, child.run.ended_at), f"run {child.run.id}"])
            rows.extend(_flow_rows(child, children, pad + "│  ", drawn))
            rows.append(["", f"{pad}╰─ {child.run.agent}", "", "", "",
                         f'{child.run.status}: "{one_line(child.run.output or child.run.error, 40)}"'])
    return rows


def context_lines(data: RunData, *, width: int = 100) -> list[str]:
    """Each inference's snapshot: the items in order, each with its name, hash, origin and text."""
    names = item_names(data)
    lines: list[str] = []
    for stage in sorted(data.stages, key=lambda s: s.seq):
        entries = data.inputs.get(stage.id, [])
        if stage.kind != StageKind.INFERENCE or not entries:
            continue
        lines += ["", f"context of #{stage.seq} {stage.kind} {stage.name!r} ({stage.id})"]
        heads = []
        for entry in entries:
            item = data.items.get(entry.item_hash)
            heads.append((names.get(entry.item_hash, "?"), entry.item_hash[:12], item.kind if item else "missing"))
        # the text takes the width the other columns leave (two columns of indent, two between columns)
        used = 2 + sum(max(cells(for_terminal(h[i])) for h in [("name", "hash", "kind"), *heads]) + 2 for i in range(3))
        rows = []
        for entry, head in zip(entries, heads, strict=True):
            item = data.items.get(entry.item_hash)
            note = "" if entry.included else f"  (not sent: dropped by {entry.dropped_by})"
            rows.append((*head, one_line(item.text if item else "", max(20, width - used - cells(note))) + note))
        lines += ["  " + line for line in table(("name", "hash", "kind", "text"), rows)]
    return lines


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


def why_tree(evidence: Evidence, run_id: str, *, width: int = 100, names: dict[str, str] | None = None) -> list[str]:
    """The evidence as an indented tree, then what was not in context and what dropped it.

    Each item is shown with its name (``names``: hash -> name, see :func:`tracer.item_names`) and
    the start of its hash, the two things ``why --item`` and ``counterfactual --remove`` take.
    """
    lines: list[str] = []
    names = names or {}

    def label(item_hash: str | None) -> str:
        if not item_hash:
            return ""
        name = names.get(item_hash)
        return f"  [{name} {item_hash[:8]}]" if name else f"  [{item_hash[:8]}]"

    def item_line(node: EvidenceNode, depth: int) -> None:
        if node.node == SHOWN_ABOVE:
            lines.append(f"{'  ' * depth}({node.count} more items of this context, shown above)")
            return
        stage = next((c for c in node.children if c.node == "stage"), None)
        role = node.item_kind or "?"
        pad = "  " * depth
        room = max(30, width - len(pad) - 40)
        text = f'"{one_line(node.text, room)}"' if node.text is not None else f"(item {node.item_hash} not stored)"
        arrow = describe_origin(node.origin, stage, run_id)
        if node.seen:
            lines.append(f"{pad}{role}  {text}{label(node.item_hash)}  [shown above]")
            return
        if stage is not None and stage.seen:
            lines.append(f"{pad}{role}  {text}  <- {arrow}{label(node.item_hash)}  [stage shown above]")
            return
        note = f"  [{stage.note}]" if stage is not None and stage.note else ""
        lines.append(f"{pad}{role}  {text}  <- {arrow}{label(node.item_hash)}{note}")
        if stage is not None:
            for child in stage.shown():
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
        lines.append(f'  {dropped.item_kind}  "{one_line(dropped.text, max(30, width - 50))}"  <- {origin}  '
                     f"dropped by {dropped.dropped_by}{label(dropped.item_hash)}")
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


def _stage_pair_line(pair: StagePair) -> str:
    mark = {"same": "=", "differs": "≠", "only_a": "A", "only_b": "B"}[pair.change]
    stage = pair.a or pair.b
    assert stage is not None
    reasons = f"  {'; '.join(pair.reasons)}" if pair.change != "same" else ""
    return f"  {mark} {stage.kind:<11} {stage.name:<28}{reasons}".rstrip()


def comparison_lines(
    comparison: RunComparison, runs: tuple[RunData, RunData] | None = None, *, width: int = 100
) -> list[str]:
    """Two runs side by side (``footprint diff A B``): both answers whole, the first divergence, the
    context diff at the first inference that saw something else (item by item, tokens per origin
    kind; needs the two ``runs``), the stages, tool calls and usage."""
    a, b = comparison.a, comparison.b
    lines: list[str] = []
    for label, run in (("A", a), ("B", b)):
        lines.append(f"{label}  {run.id}  {run.status}:")
        lines += wrapped("", run.output if run.output is not None else (run.error or "(no answer)"), width=width, pad=4)
    lines += [f"Answers: {'the same' if comparison.same_answer else 'differ'}", ""]
    first = comparison.first_divergence
    if first is None:
        lines.append("The runs do not diverge: the same stages, context and outputs.")
    else:
        lines.append(f"First divergence: {first.label}: {'; '.join(first.reasons)}")
        if first.context is not None:
            lines += ["", "Context there (A -> B):"]
            lines += ["  " + line for line in snapshot_diff_lines(first.context, width=max(40, width - 50))]
        if first.outputs is not None and first.outputs.entries:
            lines += ["", "Output there (A -> B):"]
            for entry in first.outputs.entries:
                if entry.before_text is not None:
                    lines.append(f"  {entry.change}: {entry.item_kind}:")
                    lines += wrapped("    A", entry.before_text, width=width, pad=8)
                    lines += wrapped("    B", entry.text, width=width, pad=8)
                else:
                    side = "A" if entry.change == "dropped" else "B"
                    lines += wrapped(f"  only in {side}: {entry.item_kind}", entry.text, width=width, pad=4)
        for dropped in first.dropped:
            lines.append(f"  left out in {dropped.side.upper()} only ({dropped.dropped_by}): {dropped.item_kind} "
                         f"{one_line(dropped.text, max(30, width - 50))}")
        model_saw = next((p for p in comparison.stages if p.change != "same" and p.context is not None
                          and p.a is not None and p.b is not None and p.a.kind == StageKind.INFERENCE), None)
        if runs is not None and model_saw is not None and model_saw.a is not None and model_saw.b is not None:
            a_data, b_data = runs
            context = diff_snapshots(a_data.snapshot(model_saw.a.id), b_data.snapshot(model_saw.b.id),
                                     {**a_data.items, **b_data.items})
            lines += ["", f"What the model saw at {model_saw.label} (A -> B):"]
            lines += ["  " + line for line in snapshot_diff_lines(context, width=max(40, width - 50))]
    lines += ["", "Stages:"]
    lines += [_stage_pair_line(p) for p in comparison.stages]
    if comparison.tool_calls:
        room = max(30, (width - 20) // 2)
        lines += ["", "Tool calls:"]
        for call in comparison.tool_calls:
            if call.change in ("same", "result"):
                lines.append(f"  {call.change:<9} {call.name_a}({call.arguments_a})")
                if call.change == "result":
                    lines.append(f"            A {one_line(call.result_a, room)}  B {one_line(call.result_b, room)}")
            elif call.change == "only_b":
                lines.append(f"  only B    {call.name_b}({call.arguments_b})")
            elif call.change == "only_a":
                lines.append(f"  only A    {call.name_a}({call.arguments_a})")
            else:
                lines.append(f"  {call.change:<9} A {call.name_a}({call.arguments_a})  B {call.name_b}({call.arguments_b})")
    usage = comparison.usage
    lines += [
        "",
        f"Tokens in   A {usage.tokens_in[0]:>7}  B {usage.tokens_in[1]:>7}  ({usage.tokens_in[1] - usage.tokens_in[0]:+d})",
        f"Tokens out  A {usage.tokens_out[0]:>7}  B {usage.tokens_out[1]:>7}  ({usage.tokens_out[1] - usage.tokens_out[0]:+d})",
        f"Cost        A ${usage.cost[0]:.6f}  B ${usage.cost[1]:.6f}",
    ]
    return lines

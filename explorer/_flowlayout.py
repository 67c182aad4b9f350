"""Laying out a run's flowchart as a character canvas: stages as boxes, edges as lines.

Stages are put in layers (a stage sits one layer below the latest stage it follows), so the tool
calls of a parallel batch share a layer and stand side by side. Edges between neighbouring layers
are drawn in the two rows between them; an edge that skips layers runs down a lane on the left,
and an edge that goes back up (a loop) runs up a lane on the right. A stage that follows a stage
with stages inside it (a tool call running a plan, a plan step handing work to a sub-agent) is
drawn after those, so a plan reads top to bottom.

A team's run is one flowchart: the run a ``subagent`` stage started is laid out the same way and
drawn inside a frame right under that stage, the frame naming the agent, how its run ended and
its answer — the agent boundary. The canvas is plain data (a character and a style key per cell),
so the widget only colours and crops it, and tests can read it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from tracer import Edge, RunData, Stage, StageKind, StageStatus, one_line, started_run

from ._format import duration, tokens

BOX_W = 22
BOX_H = 3
GAP_X = 2
GAP_Y = 2

_UP, _DOWN, _LEFT, _RIGHT = 1, 2, 4, 8
_GLYPHS = {
    _UP: "│", _DOWN: "│", _UP | _DOWN: "│", _LEFT: "─", _RIGHT: "─", _LEFT | _RIGHT: "─",
    _DOWN | _RIGHT: "┌", _DOWN | _LEFT: "┐", _UP | _RIGHT: "└", _UP | _LEFT: "┘",
    _UP | _DOWN | _RIGHT: "├", _UP | _DOWN | _LEFT: "┤", _LEFT | _RIGHT | _DOWN: "┬",
    _LEFT | _RIGHT | _UP: "┴", _UP | _DOWN | _LEFT | _RIGHT: "┼",
}


@dataclass(frozen=True)
class Box:
    """Where a stage's box sits on the canvas (``layer`` and ``column`` in its own run's flowchart)."""

    stage_id: str
    layer: int
    column: int
    x: int
    y: int
    run_id: str = ""

    @property
    def center(self) -> int:
        """The x of the box's middle column (where edges attach)."""
        return self.x + BOX_W // 2


@dataclass
class FlowLayout:
    """A run's flowchart as a canvas of ``height`` rows of ``width`` cells.

    ``chars[y][x]`` is the character of a cell and ``styles[y][x]`` its style key: ``"box:<stage
    id>"`` inside a box, ``"edge:<kind>"`` on an edge, ``"frame:<run id>"`` on the frame of a
    sub-agent's run, ``""`` for blank space. ``boxes`` holds the stages of the team's runs drawn
    inside too; ``layers`` are the top run's.
    """

    boxes: dict[str, Box]
    layers: list[list[str]]
    width: int
    height: int
    chars: list[list[str]] = field(repr=False)
    styles: list[list[str]] = field(repr=False)

    def row_text(self, y: int) -> str:
        """Row ``y`` as plain text (for tests and plain-text rendering)."""
        return "".join(self.chars[y]).rstrip()

    def text(self) -> str:
        """The whole canvas as plain text."""
        return "\n".join(self.row_text(y) for y in range(self.height))

    def neighbour(self, stage_id: str, direction: str) -> str | None:
        """The stage to move to from ``stage_id`` by an arrow key (``up``, ``down``, ``left``, ``right``).

        Up and down go to the nearest row of boxes above or below, preferring the boxes straight
        above or below (so a move stays inside a sub-agent's frame until its end), then the box
        whose middle is nearest; left and right go to the nearest box of the same row.
        """
        box = self.boxes.get(stage_id)
        if box is None:
            return None
        if direction in ("left", "right"):
            sign = 1 if direction == "right" else -1
            row = [b for b in self.boxes.values() if b.y == box.y and (b.x - box.x) * sign > 0]
            return min(row, key=lambda b: abs(b.x - box.x)).stage_id if row else None
        sign = 1 if direction == "down" else -1
        ahead = [b for b in self.boxes.values() if (b.y - box.y) * sign > 0]
        straight = [b for b in ahead if b.x < box.x + BOX_W and box.x < b.x + BOX_W] or ahead
        if not straight:
            return None
        nearest = min(abs(b.y - box.y) for b in straight)
        return min((b for b in straight if abs(b.y - box.y) == nearest),
                   key=lambda b: abs(b.center - box.center)).stage_id


def _layers(stages: list[Stage], edges: Iterable[Edge]) -> dict[str, int]:
    seq = {s.id: s.seq for s in stages}
    preds: dict[str, list[str]] = {}
    for e in edges:
        if e.src in seq and e.dst in seq and seq[e.src] < seq[e.dst]:
            preds.setdefault(e.dst, []).append(e.src)
    inside: dict[str, list[str]] = {}  # stage -> the stages recorded inside it, at any depth
    parent = {s.id: s.parent_id for s in stages if s.parent_id in seq}
    for stage in stages:
        holder = parent.get(stage.id)
        while holder is not None:
            inside.setdefault(holder, []).append(stage.id)
            holder = parent.get(holder)
    layer: dict[str, int] = {}
    previous: str | None = None
    for stage in stages:
        sources = preds.get(stage.id)
        if sources:
            # after its sources, and after what ran inside them (unless it is inside them itself)
            ends = [layer[d] for p in sources if stage.id not in inside.get(p, ())
                    for d in inside.get(p, ()) if d in layer]
            layer[stage.id] = max([layer[p] for p in sources] + ends) + 1
        else:
            # a stage recorded without edges follows the stage before it
            layer[stage.id] = layer[previous] + 1 if previous is not None else 0
        previous = stage.id
    return layer


#: The kinds of stage whose box shows the stage's last output (the question, the answer, ...).
OUTPUT_LABELLED = frozenset({StageKind.INPUT, StageKind.ANSWER, StageKind.RESUME, StageKind.ERROR})


def _box_label(stage: Stage, data: RunData) -> tuple[str, str, str]:
    """The box's top label, its middle line, and its bottom label."""
    inner = BOX_W - 2
    name = stage.name if stage.name and stage.name != stage.kind else ""
    if stage.kind in OUTPUT_LABELLED:
        produced = data.outputs.get(stage.id) or []
        item = data.items.get(produced[-1]) if produced else None
        if item is not None and item.text:
            name = item.text
    elif stage.kind == StageKind.TOOL:
        args = str(stage.attributes.get("arguments", ""))
        if len(stage.name) + len(args) <= inner - 2:
            name = f"{stage.name}{args}"
    middle = f" {one_line(name, inner - 2):<{inner - 2}} "
    notes = []
    if stage.status != StageStatus.OK:
        notes.append(stage.status)
    if stage.kind == StageKind.INFERENCE:
        used = int(stage.attributes.get("input_tokens", 0) or 0) + int(stage.attributes.get("output_tokens", 0) or 0)
        if used:
            notes.append(f"{tokens(used)} tok")
    took = duration(stage.started_at, stage.ended_at)
    if took:
        notes.append(took)
    return stage.kind, middle, " ".join(notes)


def default_stage(data: RunData) -> str | None:
    """The stage a run's screen selects first: its answer, else its last stage (None for no stages)."""
    stages = sorted(data.stages, key=lambda s: s.seq)
    for stage in reversed(stages):
        if stage.kind == StageKind.ANSWER:
            return stage.id
    return stages[-1].id if stages else None


def layout(data: RunData, children: Mapping[str, RunData] | None = None) -> FlowLayout:
    """The flowchart of ``data`` laid out on a canvas.

    ``children`` (run id -> its data, at any depth: see :func:`tracer.child_runs`) are the runs its
    ``subagent`` stages started: each is drawn framed under the stage that started it.
    """
    return _layout(data, children or {}, {data.run.id})


def _child_of(stage: Stage, children: Mapping[str, RunData], drawn: set[str]) -> RunData | None:
    child = children.get(started_run(stage) or "")
    return child if child is not None and child.run.id not in drawn else None


def _layout(data: RunData, children: Mapping[str, RunData], drawn: set[str]) -> FlowLayout:
    stages = sorted(data.stages, key=lambda s: s.seq)
    by_id = {s.id: s for s in stages}
    edges = [e for e in data.edges if e.src in by_id and e.dst in by_id]
    layer_of = _layers(stages, edges)
    layers: list[list[str]] = [[] for _ in range(max(layer_of.values(), default=-1) + 1)]
    for stage in stages:
        layers[layer_of[stage.id]].append(stage.id)

    # a subagent stage with its child's run: the box, and the child's flowchart framed under it
    inner: dict[str, FlowLayout] = {}
    for stage in stages:
        child = _child_of(stage, children, drawn)
        if child is not None:
            drawn.add(child.run.id)
            inner[stage.id] = _layout(child, children, drawn)
    size = {sid: (max(BOX_W, inner[sid].width + 4), BOX_H + inner[sid].height + 2) if sid in inner else (BOX_W, BOX_H)
            for sid in by_id}

    skip = [e for e in edges if by_id[e.src].seq < by_id[e.dst].seq and layer_of[e.dst] > layer_of[e.src] + 1]
    back = [e for e in edges if by_id[e.src].seq >= by_id[e.dst].seq]
    x0 = 2 * len(skip)

    def row_width(row: list[str]) -> int:
        return sum(size[s][0] for s in row) + (len(row) - 1) * GAP_X

    content = max((row_width(row) for row in layers), default=0)
    top = GAP_Y if any(layer_of[e.dst] == 0 for e in back) else 0
    width = x0 + content + (2 * len(back) + 1 if back else 0)
    layer_y = [top]
    for row in layers:
        layer_y.append(layer_y[-1] + max(size[s][1] for s in row) + GAP_Y)

    boxes: dict[str, Box] = {}
    for number, row in enumerate(layers):
        x = x0 + (content - row_width(row)) // 2
        for column, stage_id in enumerate(row):
            node_w = size[stage_id][0]
            boxes[stage_id] = Box(stage_id, number, column, x + (node_w - BOX_W) // 2, layer_y[number], data.run.id)
            x += node_w + GAP_X

    def gap_below(layer: int) -> int:
        return layer_y[layer + 1] - GAP_Y

    lines: dict[tuple[int, int], int] = {}
    line_style: dict[tuple[int, int], str] = {}
    arrows: dict[tuple[int, int], str] = {}
    leaving: set[str] = set()

    def mark(x: int, y: int, bits: int, kind: str) -> None:
        lines[(x, y)] = lines.get((x, y), 0) | bits
        if line_style.get((x, y), "next") == "next":
            line_style[(x, y)] = kind

    def hline(y: int, xa: int, xb: int, kind: str) -> None:
        lo, hi = min(xa, xb), max(xa, xb)
        for x in range(lo, hi + 1):
            mark(x, y, (_LEFT if x > lo else 0) | (_RIGHT if x < hi else 0), kind)

    def vline(x: int, ya: int, yb: int, kind: str) -> None:
        lo, hi = min(ya, yb), max(ya, yb)
        for y in range(lo, hi + 1):
            mark(x, y, (_UP if y > lo else 0) | (_DOWN if y < hi else 0), kind)

    def leave(stage_id: str, kind: str) -> tuple[Box, int]:
        """The source's box and the gap row below its layer, a line drawn down to it from the node."""
        box = boxes[stage_id]
        leaving.add(stage_id)
        row = gap_below(box.layer)
        vline(box.center, box.y + size[stage_id][1] - 1, row, kind)
        return box, row

    for lane, e in enumerate(skip + back):
        src, row_a = leave(e.src, e.kind)
        dst = boxes[e.dst]
        enter = gap_below(dst.layer - 1) if dst.layer > 0 else 0
        if e in skip:
            lane_x = 2 * lane
        else:
            lane_x = x0 + content + 1 + 2 * (lane - len(skip))
        hline(row_a, src.center, lane_x, e.kind)
        vline(lane_x, row_a, enter, e.kind)
        hline(enter, lane_x, dst.center, e.kind)
        mark(dst.center, enter, _DOWN, e.kind)
        arrows.setdefault((dst.center, enter + 1), e.kind)

    for e in edges:
        if e in skip or e in back:
            continue
        src, row_a = leave(e.src, e.kind)
        dst = boxes[e.dst]
        hline(row_a, src.center, dst.center, e.kind)
        mark(dst.center, row_a, _DOWN, e.kind)
        arrows.setdefault((dst.center, row_a + 1), e.kind)

    height = max([b.y + size[sid][1] for sid, b in boxes.items()] + [y + 1 for (_, y) in lines]
                 + [y + 1 for (_, y) in arrows] + [0])
    chars = [[" "] * width for _ in range(height)]
    styles = [[""] * width for _ in range(height)]
    for (x, y), bits in lines.items():
        chars[y][x] = _GLYPHS.get(bits, "┼")
        styles[y][x] = f"edge:{line_style[(x, y)]}"
    for (x, y), kind in arrows.items():
        chars[y][x] = "▼"
        styles[y][x] = f"edge:{kind}"
        if kind != "next":
            for i, ch in enumerate(kind):
                if x + 2 + i < width and chars[y][x + 2 + i] == " ":
                    chars[y][x + 2 + i] = ch
                    styles[y][x + 2 + i] = f"edge:{kind}"
    all_boxes = dict(boxes)
    for stage_id, box in boxes.items():
        framed = inner.get(stage_id)
        _draw_box(chars, styles, box, by_id[stage_id], data, stage_id in leaving and framed is None)
        if framed is not None:
            child = children[started_run(by_id[stage_id]) or ""]
            node_x = box.center - size[stage_id][0] // 2
            all_boxes.update(_draw_frame(chars, styles, framed, child, node_x, box.y + BOX_H, size[stage_id][0],
                                         stage_id in leaving))
    return FlowLayout(all_boxes, layers, width, height, chars, styles)


def _draw_frame(chars: list[list[str]], styles: list[list[str]], framed: FlowLayout, child: RunData, x: int, y: int,
                width: int, leaves: bool) -> dict[str, Box]:
    """Draw a sub-agent's flowchart ``framed`` in a frame at ``(x, y)``; its boxes moved to where they are."""
    run = child.run
    key = f"frame:{run.id}"
    title = f" agent {run.agent} "
    if len(title) + len(run.id) + 3 <= width - 4:
        title += f"· {run.id} "
    ending = run.output if run.output is not None else (run.error or "")
    footer = f" {one_line(f'{run.status}: {ending}' if ending else run.status, width - 6)} "
    top = "╭─" + f" {one_line(title.strip(), width - 6)} " + "─" * width
    top = top[: width - 1] + "╮"
    bottom = "╰─" + footer + "─" * width
    bottom = bottom[: width - 1] + "╯"
    if leaves:
        mid = width // 2
        bottom = bottom[:mid] + ("┬" if bottom[mid] == "─" else bottom[mid]) + bottom[mid + 1:]
    rows = [top] + ["│" + " " * (width - 2) + "│"] * framed.height + [bottom]
    for dy, text in enumerate(rows):
        for dx, ch in enumerate(text):
            chars[y + dy][x + dx] = ch
            styles[y + dy][x + dx] = key if ch != " " else ""
    inner_x = x + (width - framed.width) // 2
    for dy in range(framed.height):
        for dx in range(framed.width):
            if framed.chars[dy][dx] != " " or framed.styles[dy][dx]:
                chars[y + 1 + dy][inner_x + dx] = framed.chars[dy][dx]
                styles[y + 1 + dy][inner_x + dx] = framed.styles[dy][dx]
    return {sid: Box(sid, b.layer, b.column, b.x + inner_x, b.y + y + 1, b.run_id) for sid, b in framed.boxes.items()}


def _draw_box(chars: list[list[str]], styles: list[list[str]], box: Box, stage: Stage, data: RunData,
              leaves: bool) -> None:
    inner = BOX_W - 2
    kind, middle, bottom = _box_label(stage, data)
    top_label = f" {one_line(kind, inner - 3)} "
    top = "┌" + top_label + "─" * (inner - len(top_label)) + "┐"
    bottom_label = f" {one_line(bottom, inner - 4)} " if bottom else ""
    base = "─" * (inner - len(bottom_label) - 1) + bottom_label + "─"
    if leaves:
        mid = BOX_W // 2 - 1  # the border's cell at the box's middle column
        if base[mid] == "─":
            base = base[:mid] + "┬" + base[mid + 1:]
    rows = [top, "│" + middle + "│", "└" + base + "┘"]
    key = f"box:{stage.id}"
    for dy, text in enumerate(rows):
        line, style = chars[box.y + dy], styles[box.y + dy]
        for dx, ch in enumerate(text[:BOX_W]):
            line[box.x + dx] = ch
            style[box.x + dx] = key

"""Laying out flowcharts: layers, parallel boxes side by side, edges of every kind, arrow-key moves."""

from __future__ import annotations

from pathlib import Path

from explorer._flowlayout import BOX_W, layout
from tracer import Edge, Run, RunData, Stage, Store


def _run(stages: list[tuple[str, str, str]], edges: list[tuple[str, str, str]]) -> RunData:
    run = Run("r1", None, "agent", "answered", "q", "a", None, 0.0, 1.0)
    return RunData(
        run=run,
        stages=[Stage(sid, "r1", seq, kind, name, "ok", float(seq), float(seq) + 0.5)
                for seq, (sid, kind, name) in enumerate(stages)],
        edges=[Edge("r1", a, b, kind) for a, b, kind in edges],
    )


def test_parallel_tool_calls_share_a_layer_and_stand_side_by_side(sample_path: Path) -> None:
    with Store.open(sample_path, read_only=True) as store:
        data = store.load_run("r-000002")
    flow = layout(data)
    tools = [s.id for s in data.stages if s.kind == "tool"]
    boxes = [flow.boxes[t] for t in tools]
    assert boxes[0].layer == boxes[1].layer and boxes[0].y == boxes[1].y
    assert boxes[1].x >= boxes[0].x + BOX_W
    text = flow.text()
    assert text.count("▼ fork") == 2 and "▼ join" in text
    assert "check_availability" in text


def test_a_back_edge_runs_up_a_lane_on_the_right_and_a_skip_edge_down_the_left() -> None:
    data = _run(
        [("a", "input", "in"), ("b", "inference", "turn 1"), ("c", "tool", "t"), ("d", "answer", "done")],
        [("a", "b", "next"), ("b", "c", "next"), ("c", "b", "loop"), ("c", "d", "next"), ("a", "d", "next")],
    )
    flow = layout(data)
    assert [flow.boxes[s].layer for s in "abcd"] == [0, 1, 2, 3]
    right = max(b.x for b in flow.boxes.values()) + BOX_W
    loop_cells = [(x, y) for y in range(flow.height) for x in range(flow.width) if flow.styles[y][x] == "edge:loop"]
    assert loop_cells and max(x for x, _ in loop_cells) > right, "the loop edge goes round on the right"
    assert "▼ loop" in flow.text()
    left = min(b.x for b in flow.boxes.values())
    skip = [(x, y) for y in range(flow.height) for x in range(flow.width)
            if flow.styles[y][x] == "edge:next" and x < left]
    assert skip, "an edge that skips layers runs down a lane left of the boxes"


def test_stages_recorded_without_edges_follow_each_other() -> None:
    flow = layout(_run([("a", "input", ""), ("b", "inference", ""), ("c", "answer", "")], []))
    assert [flow.boxes[s].layer for s in "abc"] == [0, 1, 2]


def test_resume_edges_are_labelled() -> None:
    data = _run([("p", "pause", "awaiting a person"), ("r", "resume", "resume")], [("p", "r", "resume")])
    assert "▼ resume" in layout(data).text()


def test_arrow_keys_move_to_the_nearest_box_of_the_next_layer() -> None:
    data = _run(
        [("b", "tool_batch", "2"), ("t1", "tool", "x"), ("t2", "tool", "y"), ("i", "inference", "turn 2")],
        [("b", "t1", "fork"), ("b", "t2", "fork"), ("t1", "i", "join"), ("t2", "i", "join")],
    )
    flow = layout(data)
    assert flow.neighbour("b", "down") in ("t1", "t2")
    assert flow.neighbour("t1", "right") == "t2" and flow.neighbour("t2", "right") is None
    assert flow.neighbour("t2", "down") == "i" and flow.neighbour("i", "up") in ("t1", "t2")
    assert flow.neighbour("b", "up") is None


def test_a_failed_stage_says_so_on_its_box() -> None:
    data = _run([("a", "input", ""), ("e", "error", "provider_error")], [("a", "e", "next")])
    data.stages[1] = Stage("e", "r1", 1, "error", "provider_error", "error", 1.0, 1.2)
    assert "error" in layout(data).text().splitlines()[-1]

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


def _team() -> tuple[RunData, dict[str, RunData]]:
    """A lead whose tool runs a plan: step 1 hands work to a helper (a child run), then step 2, then the answer."""
    lead = _run(
        [("a", "input", "q"), ("t", "tool", "execute_plan"), ("p1", "plan_step", "step 1"),
         ("s", "subagent", "helper"), ("p2", "plan_step", "step 2"), ("z", "answer", "done")],
        [("a", "t", "next"), ("t", "p1", "next"), ("p1", "s", "next"), ("p1", "p2", "next"), ("t", "z", "join")],
    )
    lead.stages[2:5] = [Stage("p1", "r1", 2, "plan_step", "step 1", "ok", 2.0, 2.5, parent_id="t"),
                        Stage("s", "r1", 3, "subagent", "helper", "ok", 3.0, 3.5, parent_id="p1",
                              attributes={"child_run": "r2"}),
                        Stage("p2", "r1", 4, "plan_step", "step 2", "ok", 4.0, 4.5, parent_id="t")]
    helper = RunData(run=Run("r2", None, "helper", "answered", "help", "helped", None, 3.0, 3.4,
                             attributes={"parent_run": "r1", "parent_stage": "s"}),
                     stages=[Stage(sid, "r2", seq, kind, sid, "ok", 3.0 + seq / 10, 3.05 + seq / 10)
                             for seq, (sid, kind) in enumerate([("h1", "input"), ("h2", "inference"), ("h3", "answer")])],
                     edges=[Edge("r2", "h1", "h2", "next"), Edge("r2", "h2", "h3", "next")])
    return lead, {"r2": helper}


def test_a_sub_agents_run_is_drawn_framed_under_the_stage_that_started_it() -> None:
    lead, children = _team()
    flow = layout(lead, children)
    sub, first, last, after = (flow.boxes[s] for s in ("s", "h1", "h3", "p2"))
    assert {b.run_id for b in (first, last)} == {"r2"} and sub.run_id == "r1"
    assert sub.y < first.y < last.y < after.y, "the helper's stages sit under its stage, the next step below them"
    frame = [(x, y) for y in range(flow.height) for x in range(flow.width) if flow.styles[y][x] == "frame:r2"]
    xs, ys = [x for x, _ in frame], [y for _, y in frame]
    assert min(xs) < first.x and max(xs) > first.x + BOX_W and min(ys) < first.y and max(ys) > last.y + 2
    text = flow.text()
    assert "agent helper · r2" in text and "answered: helped" in text
    # the plan reads top to bottom: the answer (joined from the plan's tool) is drawn after the plan
    assert flow.boxes["z"].y > after.y
    # arrow keys walk into the frame and out of it
    assert flow.neighbour("s", "down") == "h1" and flow.neighbour("h1", "up") == "s"
    assert flow.neighbour("h3", "down") == "p2" and flow.neighbour("p2", "up") == "h3"


def test_without_its_children_a_team_run_is_drawn_alone_and_a_run_is_drawn_once() -> None:
    lead, children = _team()
    assert set(layout(lead).boxes) == {"a", "t", "p1", "s", "p2", "z"}
    looped = dict(children)
    looped["r2"].stages.append(Stage("back", "r2", 3, "subagent", "lead", "ok", 3.3, 3.35,
                                     attributes={"child_run": "r1"}))
    looped["r1"] = lead  # a child naming the run above it as its own child: drawn once, not forever
    flow = layout(lead, looped)
    assert "back" in flow.boxes and "agent helper" in flow.text() and "agent lead" not in flow.text()
    assert not any(style.startswith("frame:r1") for row in flow.styles for style in row)

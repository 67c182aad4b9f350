"""dropped_context: per inference, what was available but not sent."""

from __future__ import annotations

from pathlib import Path

from tracer import ContextItem, Item, Origin, Recorder, Store, dropped_context


def test_dropped_context_lists_each_inference_with_what_left_it_out(tmp_path: Path) -> None:
    with Store.open(tmp_path / "d.duckdb") as store:
        run = Recorder(store).start_run(agent="a", input="hi")
        old = ContextItem(Item.of_text("user", "old"), Origin("user", "r-0", "s-0", "input"))
        cut = ContextItem(Item.of_text("prompt_section", "## Time"), Origin("prompt_section", run.id, "s-p", "time"))
        now = ContextItem(Item.of_text("user", "hi"), Origin("user", run.id, "s-i", "input"))
        with run.stage("inference", "turn 1") as first:
            first.inputs([now], dropped=[(cut, "prompt_length_cap"), (old, "memory_window")])
        with run.stage("inference", "turn 2", after=[first]) as second:
            second.inputs([old, now])
        run.end("answered", output="ok")
        store.flush()
        reports = dropped_context(store, run.id)
        assert [(r.stage_name, r.turn, r.sent) for r in reports] == [("turn 1", 1, 1), ("turn 2", 2, 2)]
        assert [(d.item_kind, d.text, d.dropped_by) for d in reports[0].items] == [
            ("prompt_section", "## Time", "prompt_length_cap"), ("user", "old", "memory_window")]
        assert reports[1].items == []
        assert reports[0].to_dict()["dropped"][1]["origin"]["run_id"] == "r-0"
        # the same rows through the documented SQL view
        rows = store.query("SELECT text, dropped_by FROM context WHERE run_id = ? AND NOT included ORDER BY position",
                           [run.id])
        assert rows == [("## Time", "prompt_length_cap"), ("old", "memory_window")]

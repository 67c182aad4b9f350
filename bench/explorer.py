"""The explorer's benchmark: first paint of the runs table, opening a big run, peak memory.

    .venv/bin/python bench/explorer.py              # 100,000 runs (builds the store once, ~minutes)
    .venv/bin/python bench/explorer.py --runs 5000  # a quicker look

What each figure means (each measured in a fresh subprocess, the app headless at 120x40):

* first paint of the runs table: from opening the store to the first page of runs drawn on the
  screen (the table reads one page of 100; it never loads every run). Python's own start-up and
  imports are reported apart.
* open a run of 500 stages (first in the process, then again): from asking for the run screen to
  its flowchart and the selected stage's details drawn (the run: 124 turns of inference -> tool
  batch -> 2 parallel tools, each inference's snapshot holding the whole conversation so far).
  The open reads the run's outline (stages, edges, outputs) and the snapshot of the stage it shows
  (the answer); the other ~31,000 snapshot entries are read a stage at a time, when shown.
* show the last inference's snapshot: from selecting it (its ~500 entries not read yet) to its
  items drawn, read on a worker thread.
* peak memory: the peak resident set of the process with the big store open, after the first
  paint and after paging down through 1,000 runs.

The store is built through the public Recorder (the same rows an agent writes) and kept in the
temporary directory, so later runs of the benchmark reuse it (``--rebuild`` makes it again).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _child import print_figures, run_child

TARGETS = {"first_paint_s": 1.0, "open_run_s": 0.5, "peak_rss_mb": 300.0}
BIG_RUN_INPUT = "the benchmark's run of 500 stages"


def build(path: Path, runs: int) -> str:
    """Record ``runs`` small runs and one run of ~500 stages into a new store; returns the big run's id."""
    from tracer import ContextItem, EdgeKind, Item, ItemKind, Origin, OriginKind, Recorder, Store

    started = time.perf_counter()
    store = Store.open(path)
    recorder = Recorder(store)
    system = ContextItem(Item.of_text(ItemKind.SYSTEM, "You are a helpful assistant."), Origin(OriginKind.CONFIG))
    for n in range(runs):
        run = recorder.start_run(agent=f"agent-{n % 5}", input=f"question number {n}", session_id=f"s{n // 4}",
                                 model="gpt-4o-mini")
        with run.stage("input", "user message") as first:
            user = first.output(Item.of_text(ItemKind.USER, f"question number {n}"), origin_kind=OriginKind.USER)
        with run.stage("inference", "turn 1", after=[first]) as inference:
            inference.inputs([system, user])
            answer = inference.output(Item.of_text(ItemKind.ASSISTANT, f"answer number {n}"))
            inference.set(input_tokens=40, output_tokens=8)
        with run.stage("answer", "answer", after=[inference]) as last:
            last.inputs([answer])
            last.output(answer.item)
        run.end("answered" if n % 17 else "failed", output=f"answer number {n}", tokens_in=40, tokens_out=8,
                cost=0.0000108)
        if n and n % 10_000 == 0:
            print(f"  {n:,} runs recorded ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    big = recorder.start_run(agent="agent-big", input=BIG_RUN_INPUT, session_id="big")
    with big.stage("input", "user message") as first:
        history = [first.output(Item.of_text(ItemKind.USER, BIG_RUN_INPUT), origin_kind=OriginKind.USER)]
    after: list[Any] = [first]
    edge = EdgeKind.NEXT
    for turn in range(1, 125):
        with big.stage("inference", f"turn {turn}", after=after, edge=edge) as inference:
            inference.inputs([system, *history])
            calls = [inference.output(Item("tool_call", {"id": f"c{turn}{k}", "name": "lookup",
                                                         "arguments": json.dumps({"k": k, "turn": turn})}))
                     for k in range(2)]
        history += calls
        with big.stage("tool_batch", "2 tool call(s)", after=[inference]) as batch:
            pass  # a batch stage records no content of its own
        tools = []
        for k in range(2):
            with big.stage("tool", "lookup", after=[batch], edge=EdgeKind.FORK, parent=batch) as tool:
                tool.inputs([calls[k]])
                tool.set(arguments=json.dumps({"k": k}), duration_ms=1.5)
                history.append(tool.output(Item("tool_result", {"call_id": f"c{turn}{k}", "name": "lookup",
                                                                "content": f"result {turn}.{k}", "is_error": False})))
            tools.append(tool)
        after, edge = tools, EdgeKind.JOIN
    with big.stage("inference", "turn 125", after=after, edge=edge) as inference:
        inference.inputs([system, *history])
        answer = inference.output(Item.of_text(ItemKind.ASSISTANT, "done"))
    with big.stage("answer", "answer", after=[inference]) as last:
        last.inputs([answer])
        last.output(answer.item)
    big.end("answered", output="done")
    store.close()
    print(f"  built {path} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return big.id


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _settle(pilot: Any, until: Any, limit: float = 60.0) -> None:
    deadline = time.perf_counter() + limit
    while not until():
        if time.perf_counter() > deadline:
            raise TimeoutError("the explorer did not get there in time")
        await pilot.pause(0.005)
    # draw what was loaded (a pause without a delay would wait for the process to go idle, which
    # it does not while the rest of a run is being read on a thread)
    await pilot.pause(0)


def child_first_paint(db: str) -> dict[str, float]:
    """Open the store in the explorer; time the first painted page of runs; page down; memory."""
    imported = time.perf_counter()
    from explorer import build_app
    from explorer.components.runs_table import RunsTable
    from tracer import Store

    import_s = time.perf_counter() - imported
    out: dict[str, float] = {"import_s": import_s}

    async def main() -> None:
        started, cpu = time.perf_counter(), time.process_time()
        store = Store.open(db, read_only=True)
        app = build_app(store, poll_interval=None)
        async with app.run_test(size=(120, 40)) as pilot:
            await _settle(pilot, lambda: bool(app.screen.query(RunsTable)) and app.screen.query_one(RunsTable).row_count)
            out["first_paint_s"] = time.perf_counter() - started
            out["first_paint_cpu_s"] = time.process_time() - cpu
            out["rss_after_paint_mb"] = _rss_mb()
            table = app.screen.query_one(RunsTable)
            out["total_runs"] = table.total
            while table.row_count < 1000:
                await pilot.press("end")
                await _settle(pilot, lambda: not table._loading)
            out["rows_loaded"] = table.row_count
            out["peak_rss_mb"] = _rss_mb()
        store.close()

    asyncio.run(main())
    return out


def child_open_run(db: str) -> dict[str, float]:
    """Time opening the 500-stage run from the runs screen, then showing its last inference's snapshot."""
    from explorer import build_app
    from explorer.components.flowchart import Flowchart
    from explorer.components.snapshot_view import SnapshotView
    from explorer.components.stage_detail import StageDetail
    from explorer.components.stage_info_view import StageInfoView
    from explorer.screens.run import RunScreen
    from tracer import RunFilter, Store

    out: dict[str, float] = {}

    async def main() -> None:
        store = Store.open(db, read_only=True)
        [big] = store.list_runs(RunFilter(search=BIG_RUN_INPUT), limit=1)
        out["snapshot_entries"] = store.query("SELECT count(*) FROM context WHERE run_id = ?", [big.id])[0][0]
        app = build_app(store, poll_interval=None)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()

            def shown() -> bool:
                screen = app.screen
                if not isinstance(screen, RunScreen) or screen.data is None:
                    return False
                detail = screen.query_one(StageDetail)
                return (screen.query_one(Flowchart).flow is not None and detail.current == "stage-info"
                        and not detail.query_one(StageInfoView).waiting)

            # the first open pays for Textual's first use of the run screen's widgets; the second does not
            for key in ("open_run", "open_run_again"):
                started, cpu = time.perf_counter(), time.process_time()
                app.open_run(big.id)
                await _settle(pilot, shown)
                out[f"{key}_s"] = time.perf_counter() - started
                out[f"{key}_cpu_s"] = time.process_time() - cpu
                screen = app.screen
                assert isinstance(screen, RunScreen) and screen.data is not None
                out[f"{key}_entries_read"] = sum(len(v) for v in screen.data.inputs.values())
                out["stages"] = len(screen.data.stages)
                if key == "open_run_again":
                    break
                app.pop_screen()
                await pilot.pause()

            last = screen.data.inferences()[-1]

            def snapshot_shown() -> bool:
                detail = screen.query_one(StageDetail)
                if detail.current != "snapshot":
                    return False
                view = detail.query_one(SnapshotView)
                return not view.waiting and view.stage is last and view.table.row_count > 0

            started, cpu = time.perf_counter(), time.process_time()
            screen.select_stage(last.id)
            await _settle(pilot, snapshot_shown)
            out["last_snapshot_s"] = time.perf_counter() - started
            out["last_snapshot_cpu_s"] = time.process_time() - cpu
            out["last_snapshot_rows"] = screen.query_one(SnapshotView).table.row_count
            out["rss_mb"] = _rss_mb()
        store.close()

    asyncio.run(main())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000, help="runs in the store (default 100,000)")
    parser.add_argument("--rebuild", action="store_true", help="build the store again")
    parser.add_argument("--child", nargs=2, metavar=("WHAT", "DB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        what, db = args.child
        if what == "migrate":
            from tracer import Store

            Store.open(db).close()
            print_figures({})
            return
        figures = child_first_paint(db) if what == "first-paint" else child_open_run(db)
        print_figures(figures)
        return
    path = Path(tempfile.gettempdir()) / f"footprint-bench-explorer-{args.runs}.duckdb"
    if args.rebuild and path.exists():
        path.unlink()
    if not path.exists():
        print(f"building a store of {args.runs:,} runs (once; reused by later runs of this benchmark)…",
              file=sys.stderr)
        partial = path.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        build(partial, args.runs)
        os.replace(partial, path)
    else:
        # a store built by an older footprint is migrated by a writable open (a no-op otherwise),
        # as the children open it read-only, which refuses an older schema; in a process of its
        # own, as a child's peak memory counts its parent's at the fork
        run_child(__file__, "--child", "migrate", str(path))
    paint = run_child(__file__, "--child", "first-paint", str(path))
    opened = run_child(__file__, "--child", "open-run", str(path))
    rows = [
        ("first paint of the runs table", f"{paint['first_paint_s']:.3f} s", f"< {TARGETS['first_paint_s']} s",
         f"cpu {paint['first_paint_cpu_s']:.2f} s; {int(paint['total_runs']):,} runs in the store; "
         f"imports took {paint['import_s']:.2f} s more"),
        ("open a run of 500 stages", f"{opened['open_run_s']:.3f} s", f"< {TARGETS['open_run_s']} s",
         f"cpu {opened['open_run_cpu_s']:.2f} s; {int(opened['stages'])} stages; "
         f"{int(opened['open_run_entries_read']):,} of its {int(opened['snapshot_entries']):,} snapshot entries read"),
        ("  the same run again", f"{opened['open_run_again_s']:.3f} s", f"< {TARGETS['open_run_s']} s",
         f"cpu {opened['open_run_again_cpu_s']:.2f} s"),
        ("  then its last inference", f"{opened['last_snapshot_s']:.3f} s", "-",
         f"cpu {opened['last_snapshot_cpu_s']:.2f} s; its snapshot of {int(opened['last_snapshot_rows'])} "
         f"items read on selecting it"),
        ("peak memory, store open", f"{paint['peak_rss_mb']:.0f} MB", f"< {TARGETS['peak_rss_mb']:.0f} MB",
         f"{paint['rss_after_paint_mb']:.0f} MB after the first paint; peak after paging to "
         f"{int(paint['rows_loaded']):,} rows"),
    ]
    load = os.getloadavg()[0]
    print(f"footprint explorer benchmark (python {sys.version.split()[0]}, {os.cpu_count()} cores, "
          f"load average {load:.1f} at the end: wall times stretch with it, cpu times much less)")
    width = max(len(r[0]) for r in rows)
    for name, value, target, note in rows:
        aim = f"(target {target})" if target != "-" else ""
        print(f"  {name:<{width}}  {value:>9}  {aim:<16}  {note}")


if __name__ == "__main__":
    main()

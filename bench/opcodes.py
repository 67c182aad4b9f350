"""Python opcodes per inference, per function, on the peers' workload: a count that does not move
with the machine's load.

Each mode runs in its own process with ``PYTHONHASHSEED=0`` (set and re-run when it is not), the
workload of ``bench/peers.py`` (runs of ``--k`` rounds of a ``lookup(i)`` tool, then an answer).
After ``--warmup`` runs, a ``sys.settrace`` hook counts the opcode events of every frame on the
agent's thread over ``--runs`` runs; ``threading.settrace`` counts those of the threads started
after the store opened (the store's writer; with the plain-function tool, the tool's worker too)
between two flushes of the store. The same code counts nearly the same every time (the agent's
thread within a few opcodes an inference: a producer's branch follows whether the writer is busy;
the writer's within a few percent: its batches follow the clock), so two trees can be compared a
run apart on a busy machine. What a count does not show is time spent outside Python (DuckDB, the
GIL's hand-overs, waiting for a core).

    .venv/bin/python bench/opcodes.py                                  # off, exit; coroutine tool
    .venv/bin/python bench/opcodes.py --modes off,exit,sync --tool sync --top 40
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from _child import add_child_options, run_child, serve_child
from peers import one_run, workload


def _counter(counts: collections.Counter[str], on: list[bool]) -> Any:
    """A trace function counting each frame's opcode events into ``counts`` while ``on[0]``."""

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "opcode" and on[0]:
            code = frame.f_code
            counts[f"{Path(code.co_filename).name}:{code.co_qualname}"] += 1
        return local

    def start(frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        return local

    return start


async def _count(mode: str, variant: str, runs: int, warmup: int, k: int, path: Path) -> dict[str, Any]:
    agent_counts: collections.Counter[str] = collections.Counter()
    other_counts: collections.Counter[str] = collections.Counter()
    on = [False]
    # the threads started from here on: the store's writer, the tool's worker
    threading.settrace(_counter(other_counts, on))
    agent, _, store = workload(k, mode, variant, path)
    for r in range(warmup):
        await one_run(agent, r)
    if store is not None:
        store.flush()
    on[0] = True
    sys.settrace(_counter(agent_counts, on))
    for r in range(runs):
        await one_run(agent, warmup + r)
    sys.settrace(None)
    if store is not None:
        store.flush()  # the writer's share of these runs is counted up to here
    on[0] = False
    threading.settrace(None)
    if store is not None:
        store.close()
    inferences = runs * (k + 1)
    return {"agent": {f: c / inferences for f, c in agent_counts.items()},
            "other": {f: c / inferences for f, c in other_counts.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", default="off,exit", help="comma-separated modes; the first is the base (default off,exit)")
    parser.add_argument("--tool", choices=("sync", "async"), default="async", help="tool variant (default async)")
    parser.add_argument("--runs", type=int, default=20, help="runs counted (default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="runs before counting (default 3)")
    parser.add_argument("--k", type=int, default=10, help="tool rounds per run (default 10)")
    parser.add_argument("--top", type=int, default=25, help="functions listed (default 25)")
    add_child_options(parser)
    args = parser.parse_args()
    if args.child:
        serve_child(lambda tmp: _count(args.mode, args.tool, args.runs, args.warmup, args.k, tmp / "fp.duckdb"),
                    prefix="footprint-opcodes-")
        return
    modes = args.modes.split(",")
    counted: dict[str, dict[str, dict[str, float]]] = {}
    for mode in modes:
        counted[mode] = run_child(__file__, "--child", "--mode", mode, "--tool", args.tool, "--runs", str(args.runs),
                                  "--warmup", str(args.warmup), "--k", str(args.k),
                                  env={**os.environ, "PYTHONHASHSEED": "0"})
    print(f"opcodes an inference, {args.tool} tool, {args.runs} runs x {args.k + 1} inferences (PYTHONHASHSEED=0)")
    for mode in modes:
        print(f"  {mode:<5} agent's thread {sum(counted[mode]['agent'].values()):8,.0f}   "
              f"other threads {sum(counted[mode]['other'].values()):8,.0f}")
    base = modes[0]
    for mode in modes[1:]:
        for thread in ("agent", "other"):
            was, now = counted[base][thread], counted[mode][thread]
            diff = {f: now.get(f, 0.0) - was.get(f, 0.0) for f in was.keys() | now.keys()}
            where = "the agent's thread" if thread == "agent" else "other threads"
            print(f"{mode} - {base}, {where}: {sum(diff.values()):+,.0f}")
            for name, value in sorted(diff.items(), key=lambda kv: -abs(kv[1]))[:args.top]:
                if abs(value) >= 0.5:
                    print(f"  {value:+9.1f}  {name}")


if __name__ == "__main__":
    main()

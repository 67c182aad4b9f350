"""The agent loop's speed, with recording off and on.

A ScriptedModel answers each run after ``--rounds`` tool rounds (one call of an async no-op tool
per round), so a run makes ``rounds + 1`` inferences. The same loop is timed three ways:

    off    recorder=None (a NullRecorder: nothing is built or written)
    exit   Recorder(Store on a temp file), durability "exit": rows go to the writer thread in
           batches; "with flush" ends the timed region after store.close() (all committed)
    sync   durability "sync": each stage is committed before the next one starts

Modes are interleaved and each figure is the best of ``--repeat`` rounds, because a shared
machine's load only ever makes a round slower. "main CPU" is the CPU time of the loop's thread
(the writer's work shows in the wall time, not there).

Targets (issue 18): ``exit`` (with flush) costs at most 1.5x ``off``; ``sync`` does >= 1,200
inferences/s (2x LangGraph checkpointing every step on this machine; ``bench/peers.py`` runs the
peers' own workload, ``../shared/peers/side_by_side.sh`` the peers beside it).

    .venv/bin/python bench/loop.py [--runs 300] [--rounds 10] [--repeat 5] [--profile exit]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import tempfile
import time
from pathlib import Path

from agent import Agent, tool
from agent.providers import ScriptedModel, calls
from tracer import Recorder, Store


@tool
async def noop(step: int) -> str:
    """Do nothing.

    Args:
        step: which round this is
    """
    return "ok"


def script(rounds: int) -> list[object]:
    # fixed call ids: every run sends the same items, as a conversation template would
    return [calls(("noop", {"step": i}, f"call_{i}")) for i in range(rounds)] + ["done"]


async def run_mode(mode: str, runs: int, rounds: int, workdir: Path) -> dict[str, float]:
    """Time ``runs`` runs in ``mode``: seconds without and with the final flush, and main-thread CPU."""
    store = None
    recorder = None
    if mode != "off":
        store = Store.open(workdir / f"{mode}-{time.monotonic_ns()}.duckdb")
        recorder = Recorder(store, durability=mode)
    model = ScriptedModel(script(rounds), repeat=True, keep_requests=0)
    agent = Agent("bench", provider=model, tools=[noop], recorder=recorder, max_turns=rounds + 5)
    cpu = time.thread_time()
    start = time.perf_counter()
    for _ in range(runs):
        agent.memory.clear_messages(agent.conversation_id)  # each run starts a fresh conversation
        result = await agent.run("go")
        if result.status != "answered":
            raise SystemExit(f"bench run failed: {result.error}")
    loop_done = time.perf_counter()
    if store is not None:
        store.close()
    end = time.perf_counter()
    return {"loop": loop_done - start, "total": end - start, "cpu": time.thread_time() - cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=300, help="runs per round (default 300; sync does a third)")
    parser.add_argument("--rounds", type=int, default=10, help="tool rounds per run (default 10)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds per mode; the best is reported (default 5)")
    parser.add_argument("--profile", choices=("off", "exit", "sync"), help="profile one mode and print the top")
    args = parser.parse_args()
    per_run = args.rounds + 1

    with tempfile.TemporaryDirectory(prefix="footprint-bench-") as tmp:
        workdir = Path(tmp)
        asyncio.run(run_mode("off", 20, args.rounds, workdir))  # warm-up: imports, caches
        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            asyncio.run(run_mode(args.profile, args.runs, args.rounds, workdir))
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
            return
        runs = {"off": args.runs, "exit": args.runs, "sync": max(1, args.runs // 3)}
        best: dict[str, dict[str, float]] = {}
        for _ in range(args.repeat):
            for mode in ("off", "exit", "sync"):
                figures = asyncio.run(run_mode(mode, runs[mode], args.rounds, workdir))
                rates = {k: runs[mode] * per_run / v for k, v in figures.items()}
                kept = best.setdefault(mode, rates)
                for key, rate in rates.items():
                    kept[key] = max(kept[key], rate)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"agent loop: {args.runs} runs x {per_run} inferences ({args.rounds} tool rounds), best of "
          f"{args.repeat}; load average {load:.1f} on {os.cpu_count()} cores")
    print(f"{'mode':<5} {'inferences/s':>13} {'x off':>6}   {'no final flush':>14} {'x off':>6}   "
          f"{'main CPU inf/s':>14} {'x off':>6}")
    off = best["off"]
    for mode, rate in best.items():
        print(f"{mode:<5} {rate['total']:>13,.0f} {off['total'] / rate['total']:>6.2f}   {rate['loop']:>14,.0f} "
              f"{off['loop'] / rate['loop']:>6.2f}   {rate['cpu']:>14,.0f} {off['cpu'] / rate['cpu']:>6.2f}")
    ratio = off["total"] / best["exit"]["total"]
    rate = best["sync"]["total"]
    print(f"targets: exit <= 1.5x off: {'met' if ratio <= 1.5 else 'MISSED'} ({ratio:.2f}x); "
          f"sync >= 1,200 inferences/s: {'met' if rate >= 1200 else 'MISSED'} ({rate:,.0f}/s)")


if __name__ == "__main__":
    main()

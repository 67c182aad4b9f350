"""The agent loop's speed, with recording off and on.

A ScriptedModel answers each run after ``--rounds`` tool rounds (one async no-op tool call per
round), so a run makes ``rounds + 1`` inferences. The same loop is timed three ways:

    off    recorder=None (a NullRecorder: nothing is built or written)
    exit   Recorder(Store on a temp file), durability "exit": rows go to the writer thread in
           batches; the timed region ends after store.close() (everything committed)
    sync   durability "sync": each stage is committed before the next one starts

Targets: ``exit`` costs at most 1.25x ``off``, and the recorded loop does >= 2,000 inferences/s.

    .venv/bin/python bench/loop.py [--runs 300] [--rounds 10] [--profile exit]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import tempfile
import time
from pathlib import Path

from agent import Agent, tool
from agent.providers import ScriptedModel, calls
from tracer import Recorder, Store


@tool(timeout=None)
async def noop(step: int) -> str:
    """Do nothing.

    Args:
        step: which round this is
    """
    return "ok"


def script(rounds: int) -> list[object]:
    # fixed call ids: every run sends the same items, as a real conversation template would
    return [calls(("noop", {"step": i}, f"call_{i}")) for i in range(rounds)] + ["done"]


async def run_mode(mode: str, runs: int, rounds: int, workdir: Path) -> dict[str, float]:
    """Time ``runs`` runs in ``mode``; returns seconds with and without the final flush."""
    store = None
    recorder = None
    if mode != "off":
        store = Store.open(workdir / f"{mode}.duckdb")
        recorder = Recorder(store, durability=mode)
    model = ScriptedModel(script(rounds), repeat=True)
    agent = Agent("bench", provider=model, tools=[noop], recorder=recorder, max_turns=rounds + 5)
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
    return {"loop": loop_done - start, "total": end - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=300, help="runs per mode (default 300)")
    parser.add_argument("--rounds", type=int, default=10, help="tool rounds per run (default 10)")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions; the median is reported (default 3)")
    parser.add_argument("--profile", choices=("off", "exit", "sync"), help="profile one mode and print the top")
    args = parser.parse_args()
    inferences = args.runs * (args.rounds + 1)

    with tempfile.TemporaryDirectory(prefix="footprint-bench-") as tmp:
        workdir = Path(tmp)
        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            asyncio.run(run_mode(args.profile, args.runs, args.rounds, workdir))
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
            return
        asyncio.run(run_mode("off", 20, args.rounds, workdir))  # warm-up: imports, caches
        figures: dict[str, dict[str, float]] = {}
        for mode in ("off", "exit", "sync"):
            samples = []
            for i in range(args.repeat):
                sub = workdir / f"{mode}-{i}"
                sub.mkdir()
                samples.append(asyncio.run(run_mode(mode, args.runs, args.rounds, sub)))
            figures[mode] = {k: statistics.median(s[k] for s in samples) for k in ("loop", "total")}

    print(f"agent loop: {args.runs} runs x {args.rounds + 1} inferences ({args.rounds} tool rounds), "
          f"median of {args.repeat}")
    print(f"{'mode':<6} {'inferences/s':>13} {'(no final flush)':>17} {'x off':>7} {'(no flush)':>11}")
    base = figures["off"]["total"]
    for mode, f in figures.items():
        print(f"{mode:<6} {inferences / f['total']:>13,.0f} {inferences / f['loop']:>17,.0f} "
              f"{f['total'] / base:>7.2f} {f['loop'] / base:>11.2f}")
    exit_ratio = figures["exit"]["total"] / base
    exit_rate = inferences / figures["exit"]["total"]
    print(f"targets: exit <= 1.25x off: {'met' if exit_ratio <= 1.25 else 'MISSED'} ({exit_ratio:.2f}x); "
          f"recorded >= 2,000 inferences/s: {'met' if exit_rate >= 2000 else 'MISSED'} ({exit_rate:,.0f}/s)")


if __name__ == "__main__":
    main()

"""footprint on the peer comparison's workload (``../shared/peers/``), from the project alone.

The workload is the harness's: RUNS runs of K rounds, each round one call of a ``lookup(i)`` tool
returning a ~200-character record, then a final answer from a ScriptedModel (keep_requests=0);
every run starts a fresh conversation. Modes:

    off     recorder=None
    exit    Recorder(Store on a temp file), durability "exit"; the timed region includes store.close()
    sync    durability "sync": every stage is durable before the next one starts

and two tool variants: ``sync`` (a plain ``def lookup``, run in a worker thread) and ``async``
(``async def lookup``, run inline). Each case runs in its own process, the cases interleaved round
after round so the machine's drift hits them alike; the median over rounds is reported, with the
CPU time per inference of the agent's thread, of the writer thread and of the whole process
(DuckDB's own threads included), how long per inference the agent's thread was off the CPU during
the loop (``wait``: its wall time less its CPU time: waiting for the tool's worker thread, for the
GIL, or for a core), the time the store's close took (in brackets its parts: writing the last
batch, then DuckDB's checkpoint; the rest is closing the file), and the load average at each start.

Targets (issue 18, quoted as ratios within one run): ``exit`` costs <= 1.5x ``off`` on both tool
variants; ``sync`` >= 1,200 inferences/s (2x LangGraph's checkpointed run on this machine).

    .venv/bin/python bench/peers.py [--rounds 5] [--runs 200] [--k 10] [--modes off,exit,sync]
    .venv/bin/python bench/peers.py --profile sync --tool sync     # cProfile of the agent's thread
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _child import add_child_options, run_child, serve_child

from agent import Agent, Tool, tool
from agent.providers import ScriptedModel, calls
from tracer import Recorder, Store


def _record(i: int) -> str:
    return f"record {i}: " + "x" * 200


def lookup_tool(variant: str) -> Tool:
    """The harness's ``lookup(i)`` tool, as a plain function (``sync``) or a coroutine (``async``)."""
    if variant == "sync":
        @tool
        def lookup(i: int) -> str:
            """Look up record i.

            Args:
                i: the record number
            """
            return _record(i)

        return lookup

    @tool(name="lookup")
    async def lookup_async(i: int) -> str:
        """Look up record i.

        Args:
            i: the record number
        """
        return _record(i)

    return lookup_async


def _thread_cpu(native_id: int | None) -> float:
    """CPU seconds of one thread of this process (0 when unknown)."""
    if native_id is None:
        return 0.0
    try:
        fields = Path(f"/proc/self/task/{native_id}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def workload(k: int, mode: str, variant: str, path: Path) -> tuple[Agent, ScriptedModel, Store | None]:
    """The workload's agent in one mode and tool variant (recording into a store at ``path`` unless
    ``off``), its scripted model and its store."""
    script: list[Any] = [calls(("lookup", {"i": i}, f"c{i}")) for i in range(k)]
    script.append(f"final answer after {k} lookups")
    store = recorder = None
    if mode != "off":
        store = Store.open(path)
        recorder = Recorder(store, durability=mode)
    model = ScriptedModel(script, repeat=True, keep_requests=0)
    agent = Agent("lookup", provider=model, persona="You are a lookup agent.", tools=[lookup_tool(variant)],
                  recorder=recorder, max_turns=k + 5)
    return agent, model, store


async def one_run(agent: Agent, r: int) -> None:
    """Run ``r`` of the workload: a fresh conversation, answered after the tool rounds."""
    agent.memory.clear_messages(agent.conversation_id)
    result = await agent.run(f"question {r}")
    if result.status != "answered" or not result.answer.startswith("final answer"):
        raise SystemExit(f"bench run failed: {result.status} {result.error}")


async def run_case(runs: int, k: int, mode: str, variant: str, workdir: Path) -> dict[str, Any]:
    """Time ``runs`` runs in one mode and tool variant; figures as a dict."""
    path = workdir / f"fp-{mode}-{variant}-{time.monotonic_ns()}.duckdb"
    agent, model, store = workload(k, mode, variant, path)
    writer = getattr(getattr(store, "_writer", None), "_thread", None)
    writer_id = writer.native_id if writer is not None else None
    writer_cpu, main_cpu = _thread_cpu(writer_id), time.thread_time()
    process_cpu = time.process_time()
    started = time.perf_counter()
    for r in range(runs):
        await one_run(agent, r)
    writer_cpu = _thread_cpu(writer_id) - writer_cpu  # before close: the thread is gone after it
    loop_done = time.perf_counter()
    loop_cpu = time.thread_time() - main_cpu
    flushed = checkpointed = loop_done
    if store is not None:
        store.flush()  # the last batch (what the writer had not written yet) ...
        flushed = time.perf_counter()
        store.query("CHECKPOINT")  # ... DuckDB's checkpoint (close would make it: timed apart) ...
        checkpointed = time.perf_counter()
        store.close()  # ... and the file's close
    seconds = time.perf_counter() - started
    main_cpu = time.thread_time() - main_cpu
    process_cpu = time.process_time() - process_cpu
    inferences = runs * (k + 1)
    if model.calls_made != inferences:
        raise SystemExit(f"expected {inferences} model calls, made {model.calls_made}")
    size = sum(p.stat().st_size for p in workdir.iterdir() if p.name.startswith(path.name))
    return {"inf_s": inferences / seconds, "main_us": main_cpu / inferences * 1e6,
            "process_us": process_cpu / inferences * 1e6,
            "writer_us": writer_cpu / inferences * 1e6, "db_bytes": size,
            "close_ms": (started + seconds - loop_done) * 1e3, "last_batch_ms": (flushed - loop_done) * 1e3,
            "checkpoint_ms": (checkpointed - flushed) * 1e3,
            "off_cpu_us": ((loop_done - started) - loop_cpu) / inferences * 1e6}


def _profile(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="footprint-peers-") as tmp:
        asyncio.run(run_case(10, args.k, args.profile, args.tool, Path(tmp)))  # warm-up
        profiler = cProfile.Profile()
        profiler.enable()
        figures = asyncio.run(run_case(args.runs, args.k, args.profile, args.tool, Path(tmp)))
        profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(35)
    print(f"profiled {args.profile} / {args.tool} tool: {figures['inf_s']:,.0f} inferences/s (profiler on)")


def _close_split(rows: list[dict[str, Any]]) -> str:
    """The close's median last batch and checkpoint, in ms, as "(batch, ckpt)"; the rest is the file's close."""
    batch = statistics.median(r["last_batch_ms"] for r in rows)
    checkpoint = statistics.median(r["checkpoint_ms"] for r in rows)
    return f"({batch:,.0f}, {checkpoint:,.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="rounds; each case once per round (default 5)")
    parser.add_argument("--runs", type=int, default=200, help="runs per case (default 200, as the harness)")
    parser.add_argument("--k", type=int, default=10, help="tool rounds per run (default 10, as the harness)")
    parser.add_argument("--modes", default="off,exit,sync", help="comma-separated modes (default off,exit,sync)")
    parser.add_argument("--tools", default="sync,async", help="tool variants (default sync,async)")
    parser.add_argument("--profile", choices=("off", "exit", "sync"), help="profile one mode in this process")
    parser.add_argument("--tool", choices=("sync", "async"), default="sync", help="the tool variant to profile")
    add_child_options(parser)
    args = parser.parse_args()
    if args.child:
        serve_child(lambda tmp: run_case(args.runs, args.k, args.mode, args.tool, tmp), prefix="footprint-peers-")
        return
    if args.profile:
        _profile(args)
        return
    cases = [(m, t) for t in args.tools.split(",") for m in args.modes.split(",")]
    results: dict[tuple[str, str], list[dict[str, Any]]] = {case: [] for case in cases}
    loads: list[float] = []
    print(f"peers workload: {args.runs} runs x {args.k + 1} inferences, {args.rounds} rounds, "
          f"{os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for _ in range(args.rounds):
        for mode, variant in cases:
            loads.append(os.getloadavg()[0])
            results[(mode, variant)].append(run_child(__file__, "--child", "--mode", mode, "--tool", variant,
                                                      "--runs", str(args.runs), "--k", str(args.k)))
    print(f"1-min load average at case starts: min {min(loads):.2f} median {statistics.median(loads):.2f} "
          f"max {max(loads):.2f}; now {os.getloadavg()[0]:.2f}")
    print(f"{'tool':<6} {'mode':<5} {'median inf/s':>12} {'min-max':>15} {'x off':>6} "
          f"{'CPU us/inf: main':>16} {'writer':>6} {'all':>5} {'wait':>5} {'close ms (batch, ckpt)':>22} "
          f"{'store B/run':>11}")
    median: dict[tuple[str, str], float] = {}
    for (mode, variant), rows in results.items():
        rates = [r["inf_s"] for r in rows]
        median[(mode, variant)] = statistics.median(rates)
    for (mode, variant), rows in results.items():
        rate = median[(mode, variant)]
        off = median.get(("off", variant))
        ratio = f"{off / rate:.2f}" if off else "-"
        store = statistics.median(r["db_bytes"] for r in rows) / args.runs
        print(f"{variant:<6} {mode:<5} {rate:>12,.0f} {min(r['inf_s'] for r in rows):>7,.0f}-"
              f"{max(r['inf_s'] for r in rows):<7,.0f} {ratio:>6} "
              f"{statistics.median(r['main_us'] for r in rows):>16,.0f} "
              f"{statistics.median(r['writer_us'] for r in rows):>6,.0f} "
              f"{statistics.median(r['process_us'] for r in rows):>5,.0f} "
              f"{statistics.median(r['off_cpu_us'] for r in rows):>5,.0f} "
              f"{statistics.median(r['close_ms'] for r in rows):>9,.0f} {_close_split(rows):>12} {store:>11,.0f}")
    for variant in args.tools.split(","):
        if ("off", variant) in median and ("exit", variant) in median:
            ratio = median[("off", variant)] / median[("exit", variant)]
            print(f"target exit <= 1.5x off ({variant} tool): {'met' if ratio <= 1.5 else 'MISSED'} ({ratio:.2f}x)")
        if ("sync", variant) in median:
            rate = median[("sync", variant)]
            print(f"target sync >= 1,200 inferences/s ({variant} tool): {'met' if rate >= 1200 else 'MISSED'} "
                  f"({rate:,.0f}/s)")


if __name__ == "__main__":
    main()

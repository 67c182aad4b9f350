"""Blame at size: counterfactual groups, re-runs and wall time per blame for 10, 30, 100 and 300 suspects.

    .venv/bin/python bench/blame.py                 # 5 scenarios per size
    .venv/bin/python bench/blame.py --per-size 10 --sizes 10,100
    .venv/bin/python bench/blame.py --cases 1000    # the property suite's measures on 1000 scenarios
    .venv/bin/python bench/blame.py --session 220   # the worst case: a long session whose every message counts

Scenarios come from the property suite's generator (``tests/agent/evidence/planted.py``): a planted
culprit among look-alike benign items of several kinds, windows and caps on or off. Target: at most
40 group tests at 100 suspects (growth like the logarithm). Figures depend on the machine's load:
the load average is printed; compare sizes within one run.

``--session N`` records one session of N turns under a memory window that drops hundreds of
messages, with a model whose answer counts the messages it sees: removing or restoring any of them
changes the answer, so group testing splits down to every suspect alone. It prints the suspects,
the re-runs and the seconds the blame of the last turn took.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent import Agent, ConversationMemory, tool
from agent.evidence import blame
from agent.providers import FunctionModel, ModelRequest, ModelResponse, calls
from tests.agent.evidence.planted import depot_model, planted
from tracer import Recorder, Store, rank, why


async def sizes(store: Store, wanted: list[int], per_size: int, order: str) -> None:
    print(f"blame in {order} order")
    print(f"{'suspects':>9} {'tested':>7} {'groups':>7} {'groups max':>10} {'re-runs':>8} {'s/blame':>8} "
          f"{'first ok':>9}")
    for size in wanted:
        groups, reruns, seconds, tested, right = [], [], [], [], 0
        for seed in range(per_size):
            case = await planted(10_000 * size + seed, store, benign=size)
            started = time.perf_counter()
            report = await blame(store, case.run_id, provider=FunctionModel(depot_model), tools=case.tools,
                                 repeats=1, order=order)
            seconds.append(time.perf_counter() - started)
            groups.append(len(report.groups))
            reruns.append(report.reruns)
            tested.append(len(report.tested))
            right += bool(report.culprits) and report.culprits[0].item_hash == case.culprit
        print(f"{size:>9} {statistics.mean(tested):>7.0f} {statistics.mean(groups):>7.1f} {max(groups):>10} "
              f"{statistics.mean(reruns):>8.1f} {statistics.mean(seconds):>8.2f} {right:>4}/{per_size}")


async def cases(store: Store, count: int) -> None:
    first = top5 = benign = 0
    started = time.perf_counter()
    for seed in range(count):
        case = await planted(seed, store)
        report = await blame(store, case.run_id, provider=FunctionModel(depot_model), tools=case.tools, repeats=1)
        first += bool(report.culprits) and report.culprits[0].item_hash == case.culprit
        benign += sum(1 for s in [*report.tested, *report.left_out]
                      if s.verdict == "flips" and s.item_hash not in {case.culprit, *case.derived})
        top5 += case.culprit in [r.item_hash for r in rank(why(store, case.run_id))][:5]
    took = time.perf_counter() - started
    print(f"{count} scenarios in {took:.0f} s: culprit first {first}/{count} ({100 * first / count:.1f}%), "
          f"why top 5 {top5}/{count} ({100 * top5 / count:.1f}%), benign items convicted: {benign}")


@tool
def lookup(n: int) -> dict[str, object]:
    """Look up a record.

    Args:
        n: the record number
    """
    return {"n": n, "value": f"record {n} " + "data " * 50}


def counting_model(request: ModelRequest) -> str | ModelResponse:
    """Answers with how many messages it sees; every third turn looks a record up first."""
    messages = request.chat_messages()
    last = messages[-1]
    if last["role"] == "user":
        n = int(str(last["content"]).split()[-1])
        if n % 3 == 0:
            return calls(("lookup", {"n": n}))
        return f"Answer to turn {n}: seen {len(messages)} messages."
    return f"Tool said: {str(last['content'])[:40]}"


async def session(store: Store, turns: int) -> None:
    agent = Agent("counter", provider=FunctionModel(counting_model), tools=[lookup],
                  memory=ConversationMemory(max_tokens=1500), recorder=Recorder(store), session_id="long")
    started = time.perf_counter()
    for i in range(1, turns + 1):
        result = await agent.run("Please answer question " + "padding " * (i % 7 * 10) + f" {i}")
        assert result.status == "answered", (i, result.error)
    store.flush()
    recorded = time.perf_counter() - started
    started = time.perf_counter()
    report = await blame(store, result.run_id, provider=FunctionModel(counting_model), tools=[lookup])
    took = time.perf_counter() - started
    print(f"session of {turns} turns recorded in {recorded:.1f} s; blame of the last turn: "
          f"{len(report.tested)} suspects, {len(report.left_out)} left out by the window, {len(report.groups)} "
          f"group tests, {report.reruns} re-runs in {took:.1f} s ({1000 * took / max(report.reruns, 1):.1f} ms a re-run)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,30,100,300", help="suspect counts, comma-separated")
    parser.add_argument("--per-size", type=int, default=5, help="scenarios per size")
    parser.add_argument("--order", default="rank,context",
                        help="blame's test order(s): rank (why's ranking) and/or context (the culprit at a random place)")
    parser.add_argument("--cases", type=int, default=0, help="run the property measures on this many scenarios")
    parser.add_argument("--session", type=int, default=0, metavar="N",
                        help="blame the last turn of an N-turn session whose every message counts")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, Store.open(Path(folder) / "bench.duckdb") as store:
        if args.session:
            asyncio.run(session(store, args.session))
        elif args.cases:
            asyncio.run(cases(store, args.cases))
        else:
            for order in args.order.split(","):
                asyncio.run(sizes(store, [int(s) for s in args.sizes.split(",")], args.per_size, order))
    print(f"load average: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()

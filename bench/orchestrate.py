"""A team's speed with recording off and on, against a single agent's loop measured beside it.

The team: a lead agent executes a 5-step plan (one execute_plan call) whose steps are a search
tool, the researcher agent (as a tool), a condition, the writer agent (as a tool) and a decision
by the researcher; then it answers. One team run is 3 agents, 5 plan steps, 4 runs recorded
(the lead's and three sub-agent runs) and 5 inferences. Each mode is timed as in bench/loop.py:

    off    recorder=None for every agent
    exit   one Recorder on a temp DuckDB file (durability "exit"), the time including the final flush

The single agent is bench/loop.py's loop (one no-op tool per round, 6 inferences per run), timed
the same two ways in the same process, so the two ratios share the machine's load. Modes are
interleaved and the best of ``--repeat`` rounds is reported.

Target: the team's recording ratio (exit / off time) is at most the single agent's.

``--blame N`` then blames N generated teams (agent.orchestration.testing: random trees of agents
and tools, each model using a random part of its results) and counts how often the responsible
agent and the decisive stage are the ones the team's construction says (the earliest stage with a
path of use to the answer), with the counterfactual re-runs it took.

``--blame-plans N`` blames N generated plan teams (a lead executing a random plan whose steps other
agents do, one agent's tool planted wrong) and counts how often the culprit and its decisive stage
are named, and how often a stage of anyone else is convicted.

    .venv/bin/python bench/orchestrate.py [--runs 200] [--repeat 5] [--blame 200] [--blame-plans 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from agent import Agent, Tool
from agent.orchestration import (
    AgentConfig,
    AgentOrchestrator,
    PlanRunner,
    PlanStep,
    PlanStore,
    agent_tool,
    blame_team,
    plan_tools,
)
from agent.orchestration.testing import (
    agents_of,
    build_team,
    expected_decisive,
    random_plan_team,
    random_team,
)
from agent.providers import FunctionModel, ModelRequest, ModelResponse, ScriptedModel, calls
from tracer import Recorder, Store


def _results(request: ModelRequest) -> list[str]:
    last = max(i for i, ci in enumerate(request.context) if ci.item.kind == "user")
    return [str(ci.item.body["content"]) for ci in request.context[last:] if ci.item.kind == "tool_result"]


def researcher_model(request: ModelRequest) -> str:
    return f"notes on {request.last_user_text()[:40]}"


def writer_model(request: ModelRequest) -> str:
    return f"report: {request.last_user_text()[:60]}"


def lead_model(request: ModelRequest) -> ModelResponse | str:
    results = _results(request)
    if not results:
        plan_id = request.last_user_text().split()[-1]
        return calls(("execute_plan", {"plan_id": plan_id}), text="running the plan")
    details = json.loads(results[0])
    return f"{details['status']}: {details['steps'][3]['result']}"


def team(recorder: Recorder | None) -> tuple[AgentOrchestrator, PlanStore]:
    def config(name: str, fn: Any, tools: list[Tool]) -> AgentConfig:
        return AgentConfig(name=name, system_prompt=f"You are the {name}.", model="bench",
                           provider=FunctionModel(fn, keep_requests=0), tools=tools, recorder=recorder)

    search = Tool("search", "Search", {"type": "object", "properties": {"q": {"type": "string"}}},
                  lambda a: f"found {a.get('q', '')}", durable=True)
    researcher = AgentOrchestrator(config("researcher", researcher_model, []))
    writer = AgentOrchestrator(config("writer", writer_model, []))
    store = PlanStore()
    runner = PlanRunner(store, tools=[search, agent_tool(researcher), agent_tool(writer)], decider=researcher)
    lead = AgentOrchestrator(config("lead", lead_model, plan_tools(runner)))
    return lead, store


def plan_steps() -> list[PlanStep]:
    return [
        PlanStep(1, "search", tool_name="search", tool_args={"q": "tallest towers"}),
        PlanStep(2, "research", tool_name="ask_researcher", tool_args={"task": "{{step.1}}"}, depends_on=[1]),
        PlanStep(3, "found anything?", type="condition", config={"step": 2, "not_empty": True}, depends_on=[2]),
        PlanStep(4, "write", tool_name="ask_writer", tool_args={"task": "{{step.2}}"}, depends_on=[3]),
        PlanStep(5, "check", type="llm_decision", depends_on=[4]),
    ]


async def team_mode(mode: str, runs: int, workdir: Path) -> float:
    store = Store.open(workdir / f"team-{mode}-{time.monotonic_ns()}.duckdb") if mode == "exit" else None
    lead, plans = team(Recorder(store) if store is not None else None)
    start = time.perf_counter()
    for _ in range(runs):
        plan = await plans.create("bench", "tallest towers", plan_steps())
        context = await lead.execute(f"run plan {plan.id}")
        if context.status != "completed" or not context.response.startswith("completed"):
            raise SystemExit(f"team run failed: {context.error or context.response}")
        await plans.delete(plan.id)
    if store is not None:
        store.close()
    return time.perf_counter() - start


async def single_mode(mode: str, runs: int, workdir: Path, rounds: int = 5) -> float:
    store = Store.open(workdir / f"single-{mode}-{time.monotonic_ns()}.duckdb") if mode == "exit" else None
    noop = Tool("noop", "Do nothing", {"type": "object", "properties": {"step": {"type": "integer"}}}, lambda a: "ok")
    model = ScriptedModel([calls(("noop", {"step": i}, f"call_{i}")) for i in range(rounds)] + ["done"],
                          repeat=True, keep_requests=0)
    agent = Agent("bench", provider=model, tools=[noop], recorder=Recorder(store) if store else None)
    start = time.perf_counter()
    for _ in range(runs):
        agent.memory.clear_messages(agent.conversation_id)
        if (await agent.run("go")).status != "answered":
            raise SystemExit("single-agent run failed")
    if store is not None:
        store.close()
    return time.perf_counter() - start


async def blame_cases(cases: int) -> dict[str, float]:
    """Blame ``cases`` generated teams; how often the agent and the stage are right, and the cost."""
    agent_right = stage_right = reruns = agents = 0
    start = time.perf_counter()
    for seed in range(cases):
        spec = random_team(random.Random(seed))
        agents += sum(1 for _ in agents_of(spec))
        with Store.open(":memory:") as store:
            lead, members = build_team(spec, Recorder(store))
            context = await lead.execute("start")
            report = await blame_team(store, context.run_id or "", agents=members, repeats=1)
            store.flush()
            stages = [(s.ended_at or 0.0, d.run.agent, s.name, s.id)
                      for d in (store.load_run(r) for r in report.agents) for s in d.stages if s.kind == "tool"]
            expected = expected_decisive(spec, stages)
            got = (report.responsible_agent, report.decisive.stage_id) if report.decisive else None
            if expected is None:
                agent_right += got is None
            else:
                agent_right += got is not None and got[0] == expected[0]
            stage_right += got == expected
            reruns += sum(len(t.fork_runs) for t in report.tested)
    return {"cases": cases, "agent": agent_right, "stage": stage_right, "reruns": reruns, "agents": agents,
            "seconds": time.perf_counter() - start}


async def plan_blame_cases(cases: int) -> dict[str, float]:
    """Blame ``cases`` generated plan teams (one agent's tool planted wrong): how often the culprit and its
    decisive stage are named, how often an innocent stage is convicted, and the cost."""
    agent_right = stage_right = convicted = reruns = 0
    start = time.perf_counter()
    for seed in range(cases):
        spec = random_plan_team(random.Random(seed))
        with Store.open(":memory:") as store:
            team = await spec.build(Recorder(store))
            context = await team.run()
            report = await blame_team(store, context.run_id or "", agents=team.members, repeats=1)
            store.flush()
            culprit = spec.culprit_stages(store, context.run_id or "")
            carrying = spec.carrying_steps()
            expected = min((t for t in report.tested if culprit.get(t.stage_id) in carrying),
                           key=lambda t: t.finished_at, default=None)
            agent_right += report.responsible_agent == spec.culprit
            stage_right += expected is not None and report.decisive is expected
            convicted += any(t.verdict == "flips" and t.stage_id not in culprit for t in report.tested)
            reruns += sum(len(t.fork_runs) for t in report.tested)
    return {"cases": cases, "agent": agent_right, "stage": stage_right, "convicted": convicted, "reruns": reruns,
            "seconds": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200, help="team runs per round (default 200)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds per mode; the best is reported (default 5)")
    parser.add_argument("--blame", type=int, default=0, metavar="N", help="also blame N generated teams")
    parser.add_argument("--blame-plans", type=int, default=0, metavar="N",
                        help="also blame N generated plan teams with one agent's tool planted wrong")
    args = parser.parse_args()
    best: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="footprint-bench-") as tmp:
        workdir = Path(tmp)
        asyncio.run(team_mode("off", 10, workdir))  # warm-up
        for _ in range(args.repeat):
            for kind, timed in (("team", team_mode), ("single", single_mode)):
                for mode in ("off", "exit"):
                    seconds = asyncio.run(timed(mode, args.runs, workdir))
                    key = f"{kind} {mode}"
                    best[key] = min(best.get(key, seconds), seconds)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"orchestration: {args.runs} runs per round, best of {args.repeat}; load average {load:.1f} on "
          f"{os.cpu_count()} cores")
    print("team run: 3 agents, 5 plan steps, 4 runs, 5 inferences; single run: 1 agent, 6 inferences")
    print(f"{'':<7} {'off runs/s':>11} {'recorded runs/s':>16} {'recorded / off time':>20}")
    ratios = {}
    for kind in ("team", "single"):
        off, on = best[f"{kind} off"], best[f"{kind} exit"]
        ratios[kind] = on / off
        print(f"{kind:<7} {args.runs / off:>11,.0f} {args.runs / on:>16,.0f} {on / off:>19.2f}x")
    met = ratios["team"] <= ratios["single"]
    print(f"target: team recording ratio <= single agent's: {'met' if met else 'MISSED'} "
          f"({ratios['team']:.2f}x vs {ratios['single']:.2f}x)")
    if args.blame:
        found = asyncio.run(blame_cases(args.blame))
        n = found["cases"]
        print(f"blame on {n} generated teams ({found['agents'] / n:.1f} agents each): responsible agent right "
              f"{found['agent']:.0f}/{n}, decisive stage right {found['stage']:.0f}/{n}; "
              f"{found['reruns'] / n:.1f} re-runs and {found['seconds'] / n * 1000:.0f} ms per team")
    if args.blame_plans:
        found = asyncio.run(plan_blame_cases(args.blame_plans))
        n = found["cases"]
        print(f"blame on {n} generated plan teams (a culprit's tool planted wrong): culprit named {found['agent']:.0f}/{n}, "
              f"its decisive stage {found['stage']:.0f}/{n}, an innocent stage convicted in {found['convicted']:.0f}/{n}; "
              f"{found['reruns'] / n:.1f} re-runs and {found['seconds'] / n * 1000:.0f} ms per team")


if __name__ == "__main__":
    main()

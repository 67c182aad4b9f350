"""Running plans: dependency order, retries with backoff, deadlocks, pause, cancellation mid-plan,
every step type, persistence in the session store, and the plan tools recorded as stages."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest

from agent import Tool
from agent.durable import InMemoryPersistence
from agent.orchestration import (
    AgentConfig,
    AgentOrchestrator,
    Plan,
    PlanDeadlockError,
    PlanError,
    PlanNotFoundError,
    PlanRunner,
    PlanStep,
    PlanStore,
    plan_tools,
)
from agent.providers import FunctionModel, ModelRequest, ModelResponse, ScriptedModel, calls
from tracer import Recorder, Store, child_run_ids


def text_tool(name: str, fn: Any) -> Tool:
    return Tool(name, name, {"type": "object", "properties": {"text": {"type": "string"}}}, fn, timeout=None)


class Calls:
    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []

    def tool(self, name: str, result: Any = None) -> Tool:
        async def run(arguments: dict[str, Any]) -> str:
            self.log.append((name, arguments.get("text", "")))
            return result(arguments) if callable(result) else (result or f"{name}:{arguments.get('text', '')}")

        return text_tool(name, run)


async def no_sleep(seconds: float) -> None:
    """The runner's wait between a step's retries, made instant (the test counts retries, not time)."""


async def plan_of(store: PlanStore, *steps: PlanStep) -> Plan:
    return await store.create("p", "a goal", list(steps))


async def test_steps_run_in_dependency_order_with_results_passed_on() -> None:
    record = Calls()
    store = PlanStore()
    plan = await plan_of(store, PlanStep(3, "report", tool_name="b", tool_args={"text": "{{step.1}}+{{step.2}}"},
                                         depends_on=[1, 2]),
                         PlanStep(1, "first", tool_name="a", tool_args={"text": "x"}),
                         PlanStep(2, "second", tool_name="a", tool_args={"text": "y"}, depends_on=[1]))
    done = await PlanRunner(store, tools=[record.tool("a"), record.tool("b")]).execute(plan.id)
    assert done.status == "completed" and done.current_step == 0 and done.note is None
    assert record.log == [("a", "x"), ("a", "y"), ("b", "a:x+a:y")]
    assert (await store.get(plan.id)).step(3).result == "b:a:x+a:y"


async def test_a_failing_step_is_retried_with_exponential_backoff() -> None:
    attempts: list[int] = []
    slept: list[float] = []

    async def flaky(arguments: dict[str, Any]) -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionError("try again")
        return "finally"

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    store = PlanStore()
    plan = await plan_of(store, PlanStep(1, "fetch", tool_name="fetch", max_retries=3))
    done = await PlanRunner(store, tools=[text_tool("fetch", flaky)], sleep=sleep, base_delay=0.5).execute(plan.id)
    assert done.status == "completed" and done.step(1).attempts == 3 and done.step(1).result == "finally"
    assert slept == [0.5, 1.0]


async def test_a_step_out_of_retries_fails_the_plan_and_skips_what_depends_on_it() -> None:
    slept: list[float] = []

    async def broken(arguments: dict[str, Any]) -> str:
        raise RuntimeError("disk full")

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    store = PlanStore()
    plan = await plan_of(store, PlanStep(1, "save", tool_name="save", max_retries=2),
                         PlanStep(2, "after", tool_name="ok", depends_on=[1]), PlanStep(3, "free", tool_name="ok"))
    record = Calls()
    done = await PlanRunner(store, tools=[text_tool("save", broken), record.tool("ok")], sleep=sleep,
                            base_delay=1).execute(plan.id)
    assert done.status == "failed" and "step 1 (save) failed: RuntimeError: disk full" in (done.note or "")
    assert [(s.status, s.attempts) for s in done.steps] == [("failed", 3), ("skipped", 0), ("completed", 1)]
    assert done.step(2).error == "step 1 failed" and slept == [1, 2]


async def test_an_unknown_tool_fails_at_once_without_retrying() -> None:
    slept: list[float] = []
    store = PlanStore()
    plan = await plan_of(store, PlanStep(1, "x", tool_name="nope"))
    done = await PlanRunner(store, sleep=lambda s: asyncio.sleep(0, slept.append(s))).execute(plan.id)  # type: ignore[func-returns-value]
    assert done.step(1).attempts == 1 and "no tool named 'nope'" in (done.step(1).error or "") and slept == []


async def test_a_deadlocked_plan_is_detected_before_anything_runs() -> None:
    record = Calls()
    store = PlanStore()
    plan = await plan_of(store, PlanStep(1, "a", tool_name="a"), PlanStep(2, "b", tool_name="a", depends_on=[9]))
    with pytest.raises(PlanDeadlockError, match="step 2 \\(b\\) waits for step 9, which the plan does not have"):
        await PlanRunner(store, tools=[record.tool("a")]).execute(plan.id)
    assert record.log == [] and (await store.get(plan.id)).status == "failed"
    # a cycle written straight into the store (not through add_step) is found too
    cyclic = Plan("loop", [PlanStep(1, "a", tool_name="a", depends_on=[2]), PlanStep(2, "b", tool_name="a",
                                                                                      depends_on=[1])])
    await store.save(cyclic)
    with pytest.raises(PlanDeadlockError, match="steps 1 -> 2 -> 1 wait on each other"):
        await PlanRunner(store, tools=[record.tool("a")]).execute(cyclic.id)


async def test_add_step_refuses_a_cycle_and_accepts_a_forward_reference() -> None:
    store = PlanStore()
    plan = await plan_of(store)
    await store.add_step(plan.id, PlanStep(1, "a", depends_on=[2]))  # step 2 comes later
    with pytest.raises(PlanDeadlockError, match="wait on each other"):
        await store.add_step(plan.id, PlanStep(2, "b", depends_on=[1]))
    with pytest.raises(PlanDeadlockError, match="cannot depend on itself"):
        await store.add_step(plan.id, PlanStep(3, "c", depends_on=[3]))
    assert [s.id for s in (await store.get(plan.id)).steps] == [1]


async def test_pause_stops_a_running_plan_at_the_next_step_and_execute_continues_it() -> None:
    store = PlanStore()
    record = Calls()
    plan = await plan_of(store, PlanStep(1, "a", tool_name="pauser"), PlanStep(2, "b", tool_name="a", depends_on=[1]))

    async def pauser(arguments: dict[str, Any]) -> str:
        await store.set_status(plan.id, "paused", "a person pressed pause")
        return "paused it"

    runner = PlanRunner(store, tools=[text_tool("pauser", pauser), record.tool("a")])
    paused = await runner.execute(plan.id)
    assert paused.status == "paused" and paused.note == "a person pressed pause"
    assert [s.status for s in paused.steps] == ["completed", "pending"] and record.log == []
    done = await runner.execute(plan.id)
    assert done.status == "completed" and record.log == [("a", "")] and done.step(1).attempts == 1


async def test_cancellation_mid_plan_keeps_finished_steps_and_a_rerun_does_only_the_rest() -> None:
    store = PlanStore()
    record = Calls()
    hang = asyncio.Event()
    started = asyncio.Event()

    async def slow(arguments: dict[str, Any]) -> str:
        started.set()
        await hang.wait()
        return "slow done"

    plan = await plan_of(store, PlanStep(1, "a", tool_name="a", tool_args={"text": "1"}),
                         PlanStep(2, "b", tool_name="slow", depends_on=[1]))
    runner = PlanRunner(store, tools=[record.tool("a"), text_tool("slow", slow)])
    model = ScriptedModel([calls(("execute_plan", {"plan_id": plan.id})), "done"])
    orchestrator = AgentOrchestrator(AgentConfig(name="planner", system_prompt="p", provider=model, model="m",
                                                 tools=plan_tools(runner)))
    task = asyncio.ensure_future(orchestrator.execute("run the plan"))
    await started.wait()
    assert orchestrator.cancel() is True
    context = await asyncio.wait_for(task, 5)
    assert context.status == "cancelled"
    stored = await store.get(plan.id)
    assert stored.status == "cancelled" and "during step 2" in (stored.note or "")
    assert [s.status for s in stored.steps] == ["completed", "pending"]
    hang.set()
    done = await runner.execute(plan.id)
    assert done.status == "completed" and record.log == [("a", "1")]


async def test_condition_steps_skip_what_depends_on_a_false_condition() -> None:
    store = PlanStore()
    record = Calls()
    plan = await plan_of(
        store, PlanStep(1, "look", tool_name="a", tool_args={"text": "sunny"}),
        PlanStep(2, "rainy?", type="condition", config={"step": 1, "contains": "rain"}, depends_on=[1]),
        PlanStep(3, "umbrella", tool_name="a", tool_args={"text": "umbrella"}, depends_on=[2]),
        PlanStep(4, "sunny?", type="condition", config={"step": 1, "equals": "a:sunny"}, depends_on=[1]),
        PlanStep(5, "hat", tool_name="a", tool_args={"text": "hat"}, depends_on=[4]))
    done = await PlanRunner(store, tools=[record.tool("a")]).execute(plan.id)
    assert done.status == "completed"
    assert [s.status for s in done.steps] == ["completed", "completed", "skipped", "completed", "completed"]
    assert done.step(3).error == "condition step 2 was false" and ("a", "umbrella") not in record.log


async def test_parallel_and_loop_steps() -> None:
    store = PlanStore()
    counter = {"n": 0}

    def count(arguments: dict[str, Any]) -> str:
        counter["n"] += 1
        return "ready" if counter["n"] >= 3 else "not yet"

    record = Calls()
    plan = await plan_of(
        store, PlanStep(1, "both", type="parallel", config={"calls": [{"tool": "a", "args": {"text": "x"}},
                                                                       {"tool": "a", "args": {"text": "y"}}]}),
        PlanStep(2, "poll", type="loop", config={"tool": "poll", "times": 5, "until": "ready"}))
    done = await PlanRunner(store, tools=[record.tool("a"), record.tool("poll", count)]).execute(plan.id)
    assert done.step(1).result == ["a:x", "a:y"] and done.step(2).result == "ready" and counter["n"] == 3
    bad = await plan_of(store, PlanStep(1, "none", type="parallel"), PlanStep(2, "many", type="loop",
                                                                            config={"tool": "a", "times": 99}))
    failed = await PlanRunner(store, tools=[record.tool("a")]).execute(bad.id)
    assert "needs config.calls" in (failed.step(1).error or "") and "loop times must be 1 to 20" in (
        failed.step(2).error or "")


async def test_user_input_pauses_without_a_person_and_takes_the_answer_later() -> None:
    store = PlanStore()
    record = Calls()
    plan = await plan_of(store, PlanStep(1, "ask", type="user_input", config={"question": "Which city?"}),
                         PlanStep(2, "book", tool_name="a", tool_args={"text": "{{step.1}}"}, depends_on=[1]))
    runner = PlanRunner(store, tools=[record.tool("a")])
    waiting = await runner.execute(plan.id)
    assert waiting.status == "paused" and "needs input from a person: Which city?" in (waiting.note or "")
    done = await runner.execute(plan.id, inputs={1: "Lyon"})
    assert done.status == "completed" and record.log == [("a", "Lyon")]

    async def person(question: str) -> str:
        return "Porto"

    again = await plan_of(store, PlanStep(1, "ask", type="user_input"), PlanStep(2, "b", tool_name="a",
                                                                               tool_args={"text": "{{step.1}}"},
                                                                               depends_on=[1]))
    assert (await PlanRunner(store, tools=[record.tool("a")], ask=person).execute(again.id)).step(2).result == "a:Porto"


async def test_llm_decisions_ask_the_decider_with_what_the_plan_found() -> None:
    store = PlanStore()
    seen: list[str] = []

    async def decide(prompt: str) -> str:
        seen.append(prompt)
        return "go north"

    record = Calls()
    plan = await plan_of(store, PlanStep(1, "look", tool_name="a", tool_args={"text": "map"}),
                         PlanStep(2, "which way", type="llm_decision", depends_on=[1]))
    done = await PlanRunner(store, tools=[record.tool("a")], decider=decide).execute(plan.id)
    assert done.step(2).result == "go north" and "Decide: which way" in seen[0] and "step 1: a:map" in seen[0]
    agent = AgentOrchestrator(AgentConfig(name="decider", system_prompt="p", model="m",
                                          provider=FunctionModel(lambda r: f"decided on {r.last_user_text()[:9]}")))
    other = await plan_of(store, PlanStep(1, "which", type="llm_decision"))
    assert (await PlanRunner(store, decider=agent).execute(other.id)).step(1).result == "decided on Plan goal"
    lone = await plan_of(store, PlanStep(1, "which", type="llm_decision"))
    assert "has no decider" in ((await PlanRunner(store).execute(lone.id)).step(1).error or "")


async def test_plans_persist_in_the_session_store_and_are_listed_and_deleted() -> None:
    persistence = InMemoryPersistence()
    first = PlanStore(persistence, "s1")
    plan = await first.create("trip", "go to Lyon")
    await first.add_step(plan.id, PlanStep(1, "book", tool_name="a"))
    again = PlanStore(persistence, "s1")
    assert [p.id for p in await again.list()] == [plan.id]
    assert (await again.get(plan.id)).steps[0].description == "book"
    assert await PlanStore(persistence, "s2").list() == []
    await again.delete(plan.id)
    with pytest.raises(PlanNotFoundError, match="no plan"):
        await first.get(plan.id)
    with pytest.raises(PlanNotFoundError):
        await first.delete(plan.id)
    with pytest.raises(PlanError, match="needs a goal"):
        await first.create("x", "  ")


def planner_model(request: ModelRequest) -> ModelResponse | str:
    """Creates a plan, adds two steps, executes it, reads the details, then answers."""
    results = [json.loads(ci.item.body["content"]) for ci in request.context if ci.item.kind == "tool_result"
               and not ci.item.body["is_error"]]
    errors = [ci.item.body["content"] for ci in request.context if ci.item.kind == "tool_result"
              and ci.item.body["is_error"]]
    if not results:
        return calls(("create_plan", {"name": "tower", "goal": "How tall is it?"}))
    plan_id = results[0]["plan_id"]
    if len(results) == 1 and not errors:
        return calls(("add_plan_step", {"plan_id": plan_id, "order": 2, "type": "tool_call", "name": "bogus",
                                        "tool_name": "nope"}))
    if len(results) == 1:
        return calls(("add_plan_step", {"plan_id": plan_id, "order": 1, "type": "tool_call", "name": "look",
                                        "tool_name": "a", "tool_args": {"text": "tower"}}),
                     ("add_plan_step", {"plan_id": plan_id, "order": 2, "type": "llm_decision", "name": "decide",
                                        "depends_on": [1]}))
    if len(results) == 3:
        return calls(("execute_plan", {"plan_id": plan_id}))
    if len(results) == 4:
        return calls(("list_plans", {}), ("get_plan_details", {"plan_id": plan_id}))
    return f"plan {results[-1]['status']}: {results[-1]['steps'][1]['result']}"


async def test_the_plan_tools_run_by_a_model_record_each_step_as_a_stage(store: Store) -> None:
    recorder = Recorder(store)
    decider = AgentOrchestrator(AgentConfig(name="decider", system_prompt="p", model="m", recorder=recorder,
                                            provider=FunctionModel(lambda r: "324 m")))
    record = Calls()
    runner = PlanRunner(PlanStore(), tools=[record.tool("a")], decider=decider)
    planner = AgentOrchestrator(AgentConfig(name="planner", system_prompt="p", model="m", recorder=recorder,
                                            provider=FunctionModel(planner_model),
                                            tools=[*plan_tools(runner), record.tool("a")]))
    context = await planner.execute("plan it")
    assert context.response == "plan completed: 324 m", context
    assert "names tool 'nope', which this plan cannot use" in context.tool_calls[1].result
    store.flush()
    run = store.load_run(context.run_id or "")
    execute_stage = next(s for s in run.stages if s.kind == "tool" and s.name == "execute_plan")
    steps = [s for s in run.stages if s.kind == "plan_step"]
    assert [s.name for s in steps] == ["step 1: look", "step 2: decide"]
    assert all(s.parent_id == execute_stage.id for s in steps)
    assert {(e.src, e.dst) for e in run.edges if e.dst == steps[1].id} == {(steps[0].id, steps[1].id)}
    assert [run.items[h].text for h in run.outputs[steps[0].id]] == ["a:tower"]
    # the decision's agent run is the child of the plan step that asked it
    [(subagent_id, child)] = child_run_ids(run)
    assert run.stage(subagent_id).parent_id == steps[1].id and store.get_run(child).agent == "decider"


async def test_plans_land_in_the_hosts_duckdb_session_store_and_survive_reopening(tmp_path: Any) -> None:
    from hosting.sessions import DuckDBPersistence

    path = str(tmp_path / "sessions.duckdb")
    first = DuckDBPersistence(path=path)
    store = PlanStore(first, "maya-1")
    record = Calls()
    plan = await plan_of(store, PlanStep(1, "a", tool_name="a", tool_args={"text": "x"}),
                         PlanStep(2, "b", tool_name="a", tool_args={"text": "{{step.1}}"}, depends_on=[1]))
    await PlanRunner(store, tools=[record.tool("a")]).execute(plan.id)
    await first.close()
    again = DuckDBPersistence(path=path)
    try:
        stored = await PlanStore(again, "maya-1").get(plan.id)
        assert stored.status == "completed" and stored.step(2).result == "a:a:x"
        assert await PlanStore(again, "someone-else").list() == []
    finally:
        await again.close()


async def test_cancelling_a_recorded_plan_cancels_the_sub_agent_inside_its_step(store: Store) -> None:
    recorder = Recorder(store)
    started = asyncio.Event()

    async def slow(arguments: dict[str, Any]) -> str:
        started.set()
        await asyncio.sleep(30)
        return "never"

    helper = AgentOrchestrator(AgentConfig(name="helper", system_prompt="p", model="m", recorder=recorder,
                                           provider=ScriptedModel([calls(("slow", {}))]),
                                           tools=[text_tool("slow", slow)]))
    plans = PlanStore()
    plan = await plans.create("p", "g", [PlanStep(1, "delegate", tool_name="ask_helper", tool_args={"task": "go"})])
    from agent.orchestration import agent_tool

    lead = AgentOrchestrator(AgentConfig(
        name="lead", system_prompt="p", model="m", recorder=recorder, tools=plan_tools(PlanRunner(
            plans, tools=[agent_tool(helper)])),
        provider=ScriptedModel([calls(("execute_plan", {"plan_id": plan.id})), "done"])))
    task = asyncio.ensure_future(lead.execute("go"))
    await started.wait()
    lead.cancel()
    assert (await asyncio.wait_for(task, 5)).status == "cancelled"
    assert helper.last_execution is not None and helper.last_execution.status == "cancelled"
    assert (await plans.get(plan.id)).status == "cancelled"
    store.flush()
    runs = {r.agent: store.load_run(r.id) for r in store.list_runs()}
    assert {a: d.run.status for a, d in runs.items()} == {"lead": "cancelled", "helper": "cancelled"}
    statuses = {(s.kind, s.status) for s in runs["lead"].stages}
    assert {("plan_step", "cancelled"), ("subagent", "cancelled"), ("tool", "cancelled")} <= statuses


async def test_running_a_long_plan_writes_a_few_small_values_per_step() -> None:
    class Counting(InMemoryPersistence):
        writes = 0

        async def write_value(self, ctx: Any, key: str, value: Any) -> None:
            Counting.writes += 1
            await super().write_value(ctx, key, value)

    store = PlanStore(Counting(), "long")
    n = 300
    steps = [PlanStep(i, f"s{i}", tool_name="a", tool_args={"text": f"{{{{step.{i - 1}}}}}" if i > 1 else "x"},
                      depends_on=[i - 1] if i > 1 else []) for i in range(1, n + 1)]
    plan = await store.create("long", "a long chain", steps)
    Counting.writes = 0
    done = await PlanRunner(store, tools=[text_tool("a", lambda a: a["text"][-8:] + ".")]).execute(plan.id)
    assert done.status == "completed" and done.step(n).status == "completed"
    # the start and the end store the whole plan; each step in between stores itself and the header
    assert Counting.writes <= 2 * (n + 1) + 2 * n


class _Interrupt(BaseException):
    """Not an Exception: what a KeyboardInterrupt or a SystemExit inside a step looks like."""


async def test_a_plan_running_now_is_refused_and_one_left_running_by_an_interrupt_resumes() -> None:
    store = PlanStore()
    record = Calls()
    started, release = asyncio.Event(), asyncio.Event()
    interrupt = True

    async def slow(arguments: dict[str, Any]) -> str:
        started.set()
        await release.wait()
        if interrupt:
            raise _Interrupt("stopped by hand")
        return "slow done"

    plan = await plan_of(store, PlanStep(1, "a", tool_name="a", tool_args={"text": "1"}),
                         PlanStep(2, "b", tool_name="slow", depends_on=[1]),
                         PlanStep(3, "c", tool_name="a", tool_args={"text": "{{step.2}}"}, depends_on=[2]))
    runner = PlanRunner(store, tools=[record.tool("a"), text_tool("slow", slow)])
    first = asyncio.ensure_future(runner.execute(plan.id))
    await started.wait()
    with pytest.raises(PlanError, match="already running"):  # the same plan, in flight in this process
        await PlanRunner(PlanStore(store.persistence, store.session_id), tools=[]).execute(plan.id)
    with pytest.raises(PlanError, match="is running"):
        await store.add_step(plan.id, PlanStep(4, "d", tool_name="a"))
    release.set()
    with pytest.raises(_Interrupt):
        await first
    stored = await store.get(plan.id)
    assert stored.status == "paused" and "interrupted during step 2" in (stored.note or "")
    assert "_Interrupt: stopped by hand" in (stored.note or "")
    assert [s.status for s in stored.steps] == ["completed", "pending", "pending"]
    interrupt = False
    done = await runner.execute(plan.id)
    assert done.status == "completed" and record.log == [("a", "1"), ("a", "slow done")]


async def test_a_plan_left_in_progress_by_a_crash_is_resumed(tmp_path: Any) -> None:
    from hosting.sessions import DuckDBPersistence

    path = tmp_path / "sessions.duckdb"
    program = tmp_path / "crash.py"
    program.write_text(f"""
import asyncio, os
from agent import Tool
from agent.orchestration import PlanRunner, PlanStep, PlanStore
from hosting.sessions import DuckDBPersistence

async def step(arguments):
    if arguments["text"] == "2":
        os._exit(9)  # the process dies mid-step: no handler runs, no status is written
    return "done " + arguments["text"]

async def main():
    store = PlanStore(DuckDBPersistence(path={str(path)!r}), "crash")
    steps = [PlanStep(i, f"s{{i}}", tool_name="step", tool_args={{"text": str(i)}},
                      depends_on=[i - 1] if i > 1 else []) for i in (1, 2, 3)]
    plan = await store.create("p", "a goal", steps)
    print(plan.id, flush=True)
    await PlanRunner(store, tools=[Tool("step", "step", {{"type": "object"}}, step)]).execute(plan.id)

asyncio.run(main())
""")
    process = await asyncio.create_subprocess_exec(sys.executable, str(program), stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 9
    plan_id = out.decode().split()[0]
    persistence = DuckDBPersistence(path=str(path))
    try:
        store = PlanStore(persistence, "crash")
        left = await store.get(plan_id)
        assert left.status == "in_progress" and [s.status for s in left.steps] == ["completed", "pending", "pending"]
        record = Calls()
        done = await PlanRunner(store, tools=[record.tool("step", lambda a: "again " + a["text"])]).execute(plan_id)
        assert done.status == "completed"
        assert record.log == [("step", "2"), ("step", "3")]  # step 1 is not run again
        assert [s.result for s in done.steps] == ["done 1", "again 2", "again 3"]
    finally:
        await persistence.close()


async def test_a_reference_to_a_step_it_does_not_depend_on_fails_the_step_at_once() -> None:
    store = PlanStore()  # add_step (the plan tools' way) takes steps one by one and cannot check this up front
    record = Calls()
    plan = await plan_of(store, PlanStep(1, "a", tool_name="a", tool_args={"text": "from 2: {{step.2}}"}),
                         PlanStep(2, "b", tool_name="a", tool_args={"text": "B"}),
                         PlanStep(3, "c", tool_name="a", tool_args={"text": "{{step.9}}"}, depends_on=[2]))
    done = await PlanRunner(store, tools=[record.tool("a")], sleep=no_sleep).execute(plan.id)
    assert [(s.status, s.attempts) for s in done.steps] == [("failed", 1), ("completed", 1), ("failed", 1)]
    assert "step 1 (a) uses step 2's result, which it was not given" in (done.step(1).error or "")
    assert "uses step 9's result" in (done.step(3).error or "") and "(2)" in (done.step(3).error or "")
    assert record.log == [("a", "B")]

"""The plan tools a model manages plans with: create, add a step, execute, pause, delete, list, details.

    tools = plan_tools(PlanRunner(PlanStore(persistence, session_id), tools=[search, book]))
    planner = AgentOrchestrator(AgentConfig(..., tools=[*tools, search, book]))

Every tool answers with JSON; a wrong plan id, a malformed step or a deadlocked plan is an error
result the model sees (and can act on), never a crashed run.
"""

from __future__ import annotations

import json
from typing import Any

from ..tools import Tool
from ._plan import DEFAULT_RETRIES, STEP_TYPES, Plan, PlanStep
from ._plan_runner import PlanRunner
from .errors import PlanError


def _summary(plan: Plan) -> dict[str, Any]:
    done = sum(1 for s in plan.steps if s.status == "completed")
    return {"plan_id": plan.id, "name": plan.name, "goal": plan.goal, "status": plan.status,
            "steps": len(plan.steps), "completed": done, "note": plan.note}


def _details(plan: Plan) -> dict[str, Any]:
    return {**_summary(plan), "current_step": plan.current_step, "steps": [
        {"id": s.id, "name": s.name, "type": s.type, "description": s.description, "tool": s.tool_name,
         "args": s.tool_args, "depends_on": s.depends_on, "status": s.status, "attempts": s.attempts,
         "result": s.result, "error": s.error} for s in plan.steps]}


def plan_json(value: Any) -> str:
    """What the plan tools answer with: ``value`` as JSON (execute_plan's result is a plan's details)."""
    return json.dumps(value, ensure_ascii=False, default=str)


_PLAN_ID = {"plan_id": {"type": "string", "description": "The plan's id (create_plan gives it)"}}


def plan_tools(runner: PlanRunner) -> list[Tool]:
    """The seven plan tools over ``runner``'s store (plans of one session)."""
    store = runner.store

    async def create_plan(args: dict[str, Any]) -> str:
        return plan_json(_summary(await store.create(str(args.get("name", "")), str(args["goal"]))))

    async def add_plan_step(args: dict[str, Any]) -> str:
        step = PlanStep(
            id=int(args["order"]), description=str(args.get("description") or args["name"]), type=str(args["type"]),
            name=str(args["name"]), tool_name=args.get("tool_name"), tool_args=dict(args.get("tool_args") or {}),
            depends_on=[int(d) for d in args.get("depends_on") or []], config=dict(args.get("config") or {}),
            max_retries=int(args.get("max_retries", DEFAULT_RETRIES)),
        )
        if step.type in ("tool_call",) and not step.tool_name:
            raise PlanError(f"step {step.id} is a tool_call and needs tool_name")
        if step.tool_name and step.tool_name not in runner.tools:
            raise PlanError(f"step {step.id} names tool {step.tool_name!r}, which this plan cannot use (its tools: "
                            f"{', '.join(runner.tools) or 'none'})")
        return plan_json(_details(await store.add_step(str(args["plan_id"]), step)))

    async def execute_plan(args: dict[str, Any]) -> str:
        inputs = {int(k): str(v) for k, v in (args.get("inputs") or {}).items()}
        return plan_json(_details(await runner.execute(str(args["plan_id"]), inputs)))

    async def pause_plan(args: dict[str, Any]) -> str:
        return plan_json(_summary(await store.set_status(str(args["plan_id"]), "paused", "paused by pause_plan")))

    async def delete_plan(args: dict[str, Any]) -> str:
        await store.delete(str(args["plan_id"]))
        return plan_json({"deleted": args["plan_id"]})

    async def list_plans(args: dict[str, Any]) -> str:
        return plan_json([_summary(p) for p in await store.list()])

    async def get_plan_details(args: dict[str, Any]) -> str:
        return plan_json(_details(await store.get(str(args["plan_id"]))))

    def schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
        return {"type": "object", "properties": properties, "required": required}

    step_properties = {
        **_PLAN_ID,
        "order": {"type": "integer", "minimum": 1, "description": "The step's number in the plan"},
        "type": {"type": "string", "enum": list(STEP_TYPES)},
        "name": {"type": "string"},
        "description": {"type": "string"},
        "tool_name": {"type": "string"},
        "tool_args": {"type": "object", "description": 'Arguments; "{{step.N}}" stands for step N\'s result'},
        "depends_on": {"type": "array", "items": {"type": "integer"}},
        "config": {"type": "object", "description": "condition: step, contains|equals|not_empty; parallel: calls; "
                                                    "loop: tool, args, times, until; user_input: question"},
        "max_retries": {"type": "integer", "minimum": 0, "maximum": 10},
    }
    return [
        Tool("create_plan", "Create a new plan for a goal", schema(
            {"name": {"type": "string"}, "goal": {"type": "string"}}, ["goal"]), create_plan, durable=False),
        Tool("add_plan_step", "Add a step to a plan", schema(step_properties, ["plan_id", "order", "type", "name"]),
             add_plan_step),
        Tool("execute_plan", "Run a plan's pending steps in dependency order (failed steps are retried)", schema(
            {**_PLAN_ID, "inputs": {"type": "object", "description": "Answers for user_input steps, by step number"}},
            ["plan_id"]), execute_plan, timeout=None),
        Tool("pause_plan", "Pause a plan; a running plan stops after its current step", schema(_PLAN_ID, ["plan_id"]),
             pause_plan),
        Tool("delete_plan", "Delete a plan", schema(_PLAN_ID, ["plan_id"]), delete_plan),
        Tool("list_plans", "List the plans of this session", schema({}, []), list_plans, durable=True),
        Tool("get_plan_details", "A plan with every step's status and result", schema(_PLAN_ID, ["plan_id"]),
             get_plan_details, durable=True),
    ]

"""Plans kept in a session's store: one value per plan (``plan.<id>``) in the session persistence.

The store is :class:`agent.durable.SessionPersistence` — the one storage design every session in
footprint uses — so plans live beside the conversation in the host's session store (memory, DuckDB,
PostgreSQL) and every change is one transaction.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ..durable import InMemoryPersistence, PersistenceContext, SessionPersistence
from ._plan import Plan, PlanStep, check_acyclic
from .errors import PlanDeadlockError, PlanError, PlanNotFoundError

PREFIX = "plan."
T = TypeVar("T")


class PlanStore:
    """The plans of one session."""

    def __init__(self, persistence: SessionPersistence | None = None, session_id: str = "plans") -> None:
        self.persistence: SessionPersistence = persistence if persistence is not None else InMemoryPersistence()
        self.session_id = session_id

    def _ctx(self) -> PersistenceContext:
        return PersistenceContext(self.session_id)

    async def _change(self, plan_id: str, change: Callable[[Plan], Awaitable[T] | T]) -> T:
        """Read, change and write one plan in one transaction."""

        async def work(ctx: PersistenceContext) -> T:
            plan = await self._read(ctx, plan_id)
            outcome = change(plan)
            if isinstance(outcome, Awaitable):
                outcome = await outcome
            plan.updated_at = time.time()
            await self.persistence.write_value(ctx, PREFIX + plan.id, plan.to_dict())
            return outcome  # type: ignore[return-value]

        return await self.persistence.transaction(self._ctx(), work)

    async def _read(self, ctx: PersistenceContext, plan_id: str) -> Plan:
        for key, value in await self.persistence.read_values(ctx, PREFIX + plan_id):
            if key == PREFIX + plan_id:
                try:
                    return Plan.from_dict(value)
                except (TypeError, ValueError) as exc:
                    raise PlanError(f"plan {plan_id} of session {self.session_id} is unreadable: {exc}") from exc
        raise PlanNotFoundError(f"no plan {plan_id!r} in session {self.session_id} (list_plans shows the plans)")

    async def create(self, name: str, goal: str, steps: list[PlanStep] | None = None) -> Plan:
        """A new, empty (or given) plan, stored."""
        if not goal.strip():
            raise PlanError("a plan needs a goal")
        plan = Plan(goal=goal, name=name or goal[:60], steps=list(steps or []))
        check_acyclic(plan.steps)
        await self.save(plan)
        return plan

    async def save(self, plan: Plan) -> None:
        """Store ``plan`` as it is (a new one, or one changed in hand)."""
        plan.updated_at = time.time()
        await self.persistence.transaction(
            self._ctx(), lambda ctx: self.persistence.write_value(ctx, PREFIX + plan.id, plan.to_dict()))

    async def get(self, plan_id: str) -> Plan:
        """The plan ``plan_id`` (:class:`PlanNotFoundError` when there is none)."""
        return await self._read(self._ctx(), plan_id)

    async def list(self) -> list[Plan]:
        """Every plan of the session, oldest first."""
        values = await self.persistence.read_values(self._ctx(), PREFIX)
        return sorted((Plan.from_dict(v) for _, v in values), key=lambda p: (p.created_at, p.id))

    async def delete(self, plan_id: str) -> None:
        """Remove the plan (a :class:`PlanNotFoundError` when there is none)."""

        async def work(ctx: PersistenceContext) -> None:
            await self._read(ctx, plan_id)
            await self.persistence.delete_value(ctx, PREFIX + plan_id)

        await self.persistence.transaction(self._ctx(), work)

    async def add_step(self, plan_id: str, step: PlanStep) -> Plan:
        """Add (or, with the same id, replace) a pending step; a dependency cycle is refused.

        A step may depend on a step not added yet; running the plan before it exists is a deadlock.
        """

        def add(plan: Plan) -> Plan:
            if plan.status == "in_progress":
                raise PlanError(f"plan {plan_id} is running; add steps once it stops (pause_plan)")
            if step.id in step.depends_on:
                raise PlanDeadlockError(f"step {step.id} cannot depend on itself")
            steps = [s for s in plan.steps if s.id != step.id] + [step]
            check_acyclic(steps)
            plan.steps = sorted(steps, key=lambda s: s.id)
            if plan.status == "completed":
                plan.status = "pending"
            return plan

        return await self._change(plan_id, add)

    async def set_status(self, plan_id: str, status: str, note: str | None = None) -> Plan:
        """Set the plan's status (pause_plan sets ``paused``; a running plan stops at its next step)."""

        def mark(plan: Plan) -> Plan:
            plan.status = status  # type: ignore[assignment]
            plan.note = note
            return plan

        return await self._change(plan_id, mark)

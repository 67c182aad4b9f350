"""Plans kept in a session's store: one value per plan (``plan.<id>``) in the session persistence.

The store is :class:`agent.durable.SessionPersistence` — the one storage design every session in
footprint uses — so plans live beside the conversation in the host's session store (memory, DuckDB,
PostgreSQL) and every change is one transaction.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, fields
from typing import Any, TypeVar

from ..durable import InMemoryPersistence, PersistenceContext, SessionPersistence
from ._plan import Plan, PlanStep, check_acyclic
from .errors import PlanDeadlockError, PlanError, PlanNotFoundError

PREFIX = "plan."  # plan.<id>: the plan without its steps
STEP_PREFIX = "planstep."  # planstep.<id>.<step id, 9 digits>: one step
T = TypeVar("T")

# The plans executing now in this process, by (persistence, session, plan id). The stored status
# cannot tell this: a plan stored in_progress may have been left so by a crash, and is resumable.
_EXECUTING: set[tuple[int, str, str]] = set()
_EXECUTING_LOCK = threading.Lock()


def _step_key(plan_id: str, step_id: int) -> str:
    return f"{STEP_PREFIX}{plan_id}.{step_id:09d}"


def _header(plan: Plan) -> dict[str, Any]:
    return {f.name: getattr(plan, f.name) for f in fields(plan) if f.name != "steps"}


class PlanStore:
    """The plans of one session: a value per plan and one per step, so running a step writes two small values."""

    def __init__(self, persistence: SessionPersistence | None = None, session_id: str = "plans") -> None:
        self.persistence: SessionPersistence = persistence if persistence is not None else InMemoryPersistence()
        self.session_id = session_id

    def _ctx(self) -> PersistenceContext:
        return PersistenceContext(self.session_id)

    async def _read_header(self, ctx: PersistenceContext, plan_id: str) -> dict[str, Any] | None:
        for key, value in await self.persistence.read_values(ctx, PREFIX + plan_id):
            if key == PREFIX + plan_id:
                return dict(value)
        return None

    async def _read(self, ctx: PersistenceContext, plan_id: str) -> Plan:
        header = await self._read_header(ctx, plan_id)
        if header is None:
            raise PlanNotFoundError(f"no plan {plan_id!r} in session {self.session_id} (list_plans shows the plans)")
        steps = [v for _, v in await self.persistence.read_values(ctx, f"{STEP_PREFIX}{plan_id}.")]
        try:
            return Plan.from_dict({**header, "steps": steps})
        except (TypeError, ValueError) as exc:
            raise PlanError(f"plan {plan_id} of session {self.session_id} is unreadable: {exc}") from exc

    async def _write(self, ctx: PersistenceContext, plan: Plan) -> None:
        """Write the whole plan: its header, every step, and drop the steps it no longer has."""
        plan.updated_at = time.time()
        keep = {_step_key(plan.id, s.id) for s in plan.steps}
        for key, _ in await self.persistence.read_values(ctx, f"{STEP_PREFIX}{plan.id}."):
            if key not in keep:
                await self.persistence.delete_value(ctx, key)
        for step in plan.steps:
            await self.persistence.write_value(ctx, _step_key(plan.id, step.id), asdict(step))
        await self.persistence.write_value(ctx, PREFIX + plan.id, _header(plan))

    async def _change(self, plan_id: str, change: Callable[[Plan], Plan]) -> Plan:
        """Read, change and write one plan in one transaction."""

        async def work(ctx: PersistenceContext) -> Plan:
            plan = change(await self._read(ctx, plan_id))
            await self._write(ctx, plan)
            return plan

        return await self.persistence.transaction(self._ctx(), work)

    def _executing_key(self, plan_id: str) -> tuple[int, str, str]:
        # id() is safe: an entry lives only while an execution holds this store (and its persistence)
        return (id(self.persistence), self.session_id, plan_id)

    @contextlib.contextmanager
    def executing(self, plan_id: str) -> Iterator[None]:
        """Mark ``plan_id`` as executing in this process while the block runs; a :class:`PlanError` when it
        already is (over the same persistence and session)."""
        key = self._executing_key(plan_id)
        with _EXECUTING_LOCK:
            if key in _EXECUTING:
                raise PlanError(f"plan {plan_id} of session {self.session_id} is already running; wait for it "
                                "to end, or stop it with pause_plan")
            _EXECUTING.add(key)
        try:
            yield
        finally:
            with _EXECUTING_LOCK:
                _EXECUTING.discard(key)

    def is_executing(self, plan_id: str) -> bool:
        """Whether ``plan_id`` is executing now in this process (not merely stored ``in_progress``)."""
        with _EXECUTING_LOCK:
            return self._executing_key(plan_id) in _EXECUTING

    async def create(self, name: str, goal: str, steps: list[PlanStep] | None = None) -> Plan:
        """A new, empty (or given) plan, stored."""
        if not goal.strip():
            raise PlanError("a plan needs a goal")
        plan = Plan(goal=goal, name=name or goal[:60], steps=sorted(steps or [], key=lambda s: s.id))
        ids = [s.id for s in plan.steps]
        if len(set(ids)) != len(ids):
            raise PlanError(f"plan {name or goal[:40]!r}: two steps share an id")
        check_acyclic(plan.steps)
        await self.save(plan)
        return plan

    async def save(self, plan: Plan) -> None:
        """Store ``plan`` as it is (a new one, or one changed in hand), in one transaction."""
        await self.persistence.transaction(self._ctx(), lambda ctx: self._write(ctx, plan))

    async def save_step(self, plan: Plan, step: PlanStep) -> None:
        """Store one step's progress and the plan's header (two small writes; the step is the truth)."""
        ctx = self._ctx()
        plan.updated_at = time.time()
        await self.persistence.write_value(ctx, _step_key(plan.id, step.id), asdict(step))
        await self.persistence.write_value(ctx, PREFIX + plan.id, _header(plan))

    async def status(self, plan_id: str) -> tuple[str, str | None] | None:
        """The stored status and note of the plan (None when it was deleted): what a running plan checks
        between steps."""
        header = await self._read_header(self._ctx(), plan_id)
        return None if header is None else (str(header.get("status")), header.get("note"))

    async def get(self, plan_id: str) -> Plan:
        """The plan ``plan_id`` (:class:`PlanNotFoundError` when there is none)."""
        return await self._read(self._ctx(), plan_id)

    async def list(self) -> list[Plan]:
        """Every plan of the session, oldest first."""
        ctx = self._ctx()
        ids = [str(v["id"]) for _, v in await self.persistence.read_values(ctx, PREFIX)]
        return sorted([await self._read(ctx, i) for i in ids], key=lambda p: (p.created_at, p.id))

    async def delete(self, plan_id: str) -> None:
        """Remove the plan and its steps (a :class:`PlanNotFoundError` when there is none)."""

        async def work(ctx: PersistenceContext) -> None:
            if await self._read_header(ctx, plan_id) is None:
                raise PlanNotFoundError(f"no plan {plan_id!r} in session {self.session_id}")
            for key, _ in await self.persistence.read_values(ctx, f"{STEP_PREFIX}{plan_id}."):
                await self.persistence.delete_value(ctx, key)
            await self.persistence.delete_value(ctx, PREFIX + plan_id)

        await self.persistence.transaction(self._ctx(), work)

    async def add_step(self, plan_id: str, step: PlanStep) -> Plan:
        """Add (or, with the same id, replace) a pending step; a dependency cycle is refused.

        A step may depend on a step not added yet; running the plan before it exists is a deadlock.
        """

        def add(plan: Plan) -> Plan:
            if self.is_executing(plan_id):
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

        async def work(ctx: PersistenceContext) -> Plan:
            header = await self._read_header(ctx, plan_id)
            if header is None:
                raise PlanNotFoundError(f"no plan {plan_id!r} in session {self.session_id}")
            header.update(status=status, note=note, updated_at=time.time())
            await self.persistence.write_value(ctx, PREFIX + plan_id, header)
            return await self._read(ctx, plan_id)

        return await self.persistence.transaction(self._ctx(), work)

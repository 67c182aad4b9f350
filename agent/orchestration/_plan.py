"""Plans: a goal broken into steps with dependencies, the prompt that asks a model for one, and the parser.

    prompt = planning_prompt("Book a trip to Lyon", tools)      # ask the model with this
    plan = parse_plan(response.text, tools=[t.name for t in tools])

A plan is JSON a model writes: ``{"goal": ..., "steps": [{"id": 1, "description": ..., "tool": ...,
"args": {...}, "depends_on": []}, ...]}`` (in a fenced block or bare). :func:`parse_plan` rejects
a malformed one with a :class:`PlanParseError` naming the step and what is wrong — no JSON, a
missing description, an unknown tool, a dependency on a step that does not exist, a cycle, a
``{{step.N}}`` for a step that does not exist or that the step does not depend on, directly or
through another step — so a
model shown the error can write the plan again.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ..tools import Tool
from .errors import PlanDeadlockError, PlanParseError

PlanStatus = Literal["pending", "in_progress", "completed", "failed", "paused", "cancelled"]
StepStatus = Literal["pending", "in_progress", "completed", "skipped", "failed"]
#: what a step does (see agent.orchestration._plan_runner for each one's config)
STEP_TYPES = ("tool_call", "llm_decision", "user_input", "condition", "parallel", "loop")
DEFAULT_RETRIES = 2


@dataclass
class PlanStep:
    """One step: what it does, what it waits for, and how it went."""

    id: int
    description: str
    type: str = "tool_call"
    name: str = ""
    tool_name: str | None = None
    tool_args: dict[str, Any] = field(default_factory=dict)
    depends_on: list[int] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    max_retries: int = DEFAULT_RETRIES
    status: StepStatus = "pending"
    result: Any = None
    error: str | None = None
    attempts: int = 0

    @property
    def label(self) -> str:
        """``step 2 (search flights)``."""
        return f"step {self.id} ({self.name or self.description[:40]})"


@dataclass
class Plan:
    """A goal and its steps; ``status`` says how far it got, ``current_step`` which step runs (0: none)."""

    goal: str
    steps: list[PlanStep] = field(default_factory=list)
    status: PlanStatus = "pending"
    current_step: int = 0
    id: str = field(default_factory=lambda: "plan-" + uuid.uuid4().hex[:12])
    name: str = ""
    note: str | None = None  # why it paused, failed or waits (a step that needs a person's input)
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)

    def step(self, step_id: int) -> PlanStep:
        """The step with ``step_id`` (a KeyError names the plan and the step)."""
        for step in self.steps:
            if step.id == step_id:
                return step
        raise KeyError(f"plan {self.id} has no step {step_id}")

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form (what the plan store keeps)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Plan:
        """From :meth:`to_dict`'s form."""
        fields = dict(data)
        fields["steps"] = [PlanStep(**s) for s in fields.get("steps", [])]
        return cls(**fields)


def planning_prompt(goal: str, tools: Iterable[Tool] = ()) -> str:
    """The prompt that asks a model to break ``goal`` into numbered steps using ``tools``."""
    listing = "\n".join(f"- {t.name}({t.signature()}): {t.description}" for t in tools) or "- (no tools)"
    return (
        f"Break this goal into the steps that reach it:\n\n{goal}\n\n"
        f"Tools you may use:\n{listing}\n\n"
        "Answer with one JSON object and nothing else:\n"
        '{"goal": "<the goal>", "steps": [\n'
        '  {"id": 1, "description": "<what this step does>", "tool": "<tool name or null>", '
        '"args": {<the tool\'s arguments>}, "depends_on": []},\n'
        '  {"id": 2, "description": "...", "tool": "...", "args": {}, "depends_on": [1]}\n'
        "]}\n\n"
        "Number the steps 1, 2, 3, ... in order. depends_on lists the ids of the steps whose results a step "
        'needs; a step may only depend on other steps of the plan, never on itself. Write "{{step.N}}" in an '
        "argument to use step N's result. A step without a tool is a decision for the model."
    )


#: ``{{step.N}}`` in a step's arguments: step N's result (N must be a step it depends on)
REFERENCE = re.compile(r"\{\{step\.(\d+)\}\}")
_FENCED = re.compile(r"```(?:json)?\s*\n(.*?)```", re.S)


def parse_plan(response: str, *, tools: Sequence[str] | None = None) -> Plan:
    """The plan in a model's ``response``; a :class:`PlanParseError` says what is malformed and where.

    ``tools`` (names) are the tools a step may name; without them any tool name is accepted.
    """
    data = _find_json(response)
    if not isinstance(data, dict):
        raise PlanParseError(f"the plan must be a JSON object with a steps list, not a {type(data).__name__}")
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise PlanParseError('the plan has no steps: expected "steps": [ {"id": 1, "description": ...}, ... ]')
    goal = data.get("goal", "")
    if not isinstance(goal, str):
        raise PlanParseError(f"the plan's goal must be text, not {type(goal).__name__}")
    steps = [_step(raw, index, tools) for index, raw in enumerate(raw_steps)]
    ids = [s.id for s in steps]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise PlanParseError(f"step ids must be unique; {', '.join(map(str, twice))} appear more than once")
    for step in steps:
        unknown = [d for d in step.depends_on if d not in ids]
        if unknown:
            raise PlanParseError(f"step {step.id} depends on step {unknown[0]}, which the plan does not have "
                                 f"(its steps: {', '.join(map(str, ids))})")
    for step in steps:
        for number in references(step.tool_args):
            if number not in ids:
                raise PlanParseError(f"step {step.id} uses {{{{step.{number}}}}}, but the plan has no step {number} "
                                     f"(its steps: {', '.join(map(str, ids))})")
            if number not in ancestors(steps, step):
                raise PlanParseError(f"step {step.id} uses step {number}'s result but does not depend on it, "
                                     f"directly or through another step; add {number} to its depends_on")
    try:
        check_acyclic(steps)
    except PlanDeadlockError as exc:
        raise PlanParseError(str(exc)) from None
    return Plan(goal=goal, steps=steps, name=str(data.get("name") or goal[:60]))


def ancestors(steps: Sequence[PlanStep], step: PlanStep) -> set[int]:
    """The steps ``step`` waits for: those it depends on, and theirs, and so on (a cycle ends the walk)."""
    by_id = {s.id: s for s in steps}
    found: set[int] = set()
    waiting = list(step.depends_on)
    while waiting:
        number = waiting.pop()
        if number not in found:
            found.add(number)
            above = by_id.get(number)
            if above is not None:
                waiting.extend(above.depends_on)
    return found


def references(value: Any) -> list[int]:
    """The step ids ``value`` (a step's arguments) refers to with ``{{step.N}}``, in order, each once."""
    if isinstance(value, str):
        return list(dict.fromkeys(int(n) for n in REFERENCE.findall(value)))
    if isinstance(value, Mapping):
        return list(dict.fromkeys(n for v in value.values() for n in references(v)))
    if isinstance(value, list):
        return list(dict.fromkeys(n for v in value for n in references(v)))
    return []


def _find_json(text: str) -> Any:
    if not isinstance(text, str) or not text.strip():
        raise PlanParseError("the response is empty; expected a JSON plan")
    candidates = [m.group(1) for m in _FENCED.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    error: json.JSONDecodeError | None = None
    for candidate in candidates:
        for start in (i for i, ch in enumerate(candidate) if ch == "{"):
            try:
                value, _ = decoder.raw_decode(candidate, start)
                return value
            except json.JSONDecodeError as exc:
                error = error or exc
    if error is not None:
        raise PlanParseError(f"the plan is not valid JSON: {error.msg} at line {error.lineno} column {error.colno}")
    raise PlanParseError("no JSON plan found in the response (expected an object with a steps list)")


def _step(raw: Any, index: int, tools: Sequence[str] | None) -> PlanStep:
    where = f"step {index + 1} of the list"
    if not isinstance(raw, dict):
        raise PlanParseError(f"{where} is not an object: {json.dumps(raw)[:60]}")
    step_id = raw.get("id", index + 1)
    if not isinstance(step_id, int) or isinstance(step_id, bool) or step_id < 1:
        raise PlanParseError(f"{where}: id must be a positive whole number, not {step_id!r}")
    where = f"step {step_id}"
    description = raw.get("description")
    if not isinstance(description, str) or not description.strip():
        raise PlanParseError(f"{where} has no description")
    tool = raw.get("tool", raw.get("tool_name"))
    if tool is not None and (not isinstance(tool, str) or not tool):
        raise PlanParseError(f"{where}: tool must be a tool's name or null, not {tool!r}")
    if tool is not None and tools is not None and tool not in tools:
        raise PlanParseError(f"{where} names tool {tool!r}, which is not available (tools: "
                             f"{', '.join(tools) or 'none'})")
    args = raw.get("args", raw.get("tool_args", {}))
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise PlanParseError(f"{where}: args must be an object, not {type(args).__name__}")
    depends = raw.get("depends_on", raw.get("dependsOn", []))
    if depends is None:
        depends = []
    if not isinstance(depends, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in depends):
        raise PlanParseError(f"{where}: depends_on must be a list of step ids, not {depends!r}")
    if step_id in depends:
        raise PlanParseError(f"{where} depends on itself")
    kind = raw.get("type") or ("tool_call" if tool else "llm_decision")
    if kind not in STEP_TYPES:
        raise PlanParseError(f"{where}: type {kind!r} is not one of {', '.join(STEP_TYPES)}")
    if kind == "tool_call" and tool is None:
        raise PlanParseError(f"{where} is a tool_call but names no tool")
    return PlanStep(step_id, description.strip(), kind, str(raw.get("name") or ""), tool, dict(args),
                    list(dict.fromkeys(depends)))


def check_acyclic(steps: Sequence[PlanStep]) -> None:
    """Raise :class:`PlanDeadlockError` naming the steps of a dependency cycle, if there is one."""
    by_id = {s.id: s for s in steps}
    waiting = {s.id: {d for d in s.depends_on if d in by_id} for s in steps}
    ready = [i for i, deps in waiting.items() if not deps]
    needed_by: dict[int, list[int]] = {}
    for step_id, deps in waiting.items():
        for dep in deps:
            needed_by.setdefault(dep, []).append(step_id)
    while ready:  # Kahn: take the steps nothing blocks, release what waited on them
        done = ready.pop()
        for later in needed_by.get(done, ()):
            waiting[later].discard(done)
            if not waiting[later]:
                ready.append(later)
        del waiting[done]
    if not waiting:
        return
    # every step left waits on another left: walk the waits until one repeats, that is the cycle
    path = [min(waiting)]
    while True:
        following = min(waiting[path[-1]])
        if following in path:
            cycle = [*path[path.index(following):], following]
            raise PlanDeadlockError(f"steps {' -> '.join(map(str, cycle))} wait on each other (a cycle)")
        path.append(following)

"""Hooks of a durable session, features that bundle them, and the actions lifecycle hooks return.

Every hook receives the session's :class:`SessionContext` first. ``instructions`` and ``tools``
answer for the session when given (superseding ``state``); ``model_changed`` sees every change of
provider or model and may return the hand-off message a reset history starts with. The lifecycle
hooks bracket the loop: ``before_agent_loop`` when the session leaves idle, ``after_agent_loop``
when it would settle, ``before_turn``/``after_turn`` around each turn (one recorded run),
``before_inference``/``after_inference`` around each model call. ``after_turn`` and
``after_agent_loop`` may return :data:`FeatureAction` s (steer, send, compact), applied together
before the loop goes on. A hook that raises — or an action that fails — never fails the run: it is
logged and recorded with the run.

Several :class:`DurableFeature` s merge into one :class:`DurableHooks` (:func:`merge_features`):
observing hooks fan out in order, instructions join (blank ones left out), tools concatenate,
actions concatenate, and the first hand-off message a feature returns wins.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from agent._hooks import _fan_out as fan_out

from ._settings import InferenceSettings

if TYPE_CHECKING:
    from agent.providers import Provider
    from agent.tools import ToolLike

    from ._providers import AgentProviders

log = logging.getLogger("footprint.agent.durable")


@dataclass(frozen=True)
class SessionContext:
    """What every hook and tool of a session is told: which session, and its settings now."""

    session_id: str
    provider: str
    model: str | None
    effort: str | None
    service_tier: str | None
    run_id: str | None = None


@dataclass(frozen=True)
class ModelChange:
    """A change of provider or model, as ``model_changed`` sees it."""

    previous_provider: str
    provider: str
    previous_model: str | None
    model: str | None
    providers: AgentProviders
    previous_provider_instance: Provider | None
    provider_instance: Provider | None
    was_reset: bool  # the change was incompatible and the history was erased


@dataclass(frozen=True)
class Steer:
    """Action: queue ``text`` on the steering queue."""

    text: str
    settings: InferenceSettings = field(default_factory=InferenceSettings)


@dataclass(frozen=True)
class Send:
    """Action: queue ``text`` on the send queue."""

    text: str
    settings: InferenceSettings = field(default_factory=InferenceSettings)


@dataclass(frozen=True)
class Compact:
    """Action: compact the conversation (the shared compaction)."""


FeatureAction = Steer | Send | Compact
Hook = Callable[..., Any]


@dataclass
class DurableHooks:
    """The hooks of one session (every one optional; see the module docstring for when each fires)."""

    on_event: Hook | None = None
    instructions: Callable[[SessionContext], str] | None = None
    tools: Callable[[SessionContext], Sequence[ToolLike]] | None = None
    model_changed: Callable[[SessionContext, ModelChange], str | None] | None = None
    before_agent_loop: Hook | None = None
    before_turn: Hook | None = None
    before_inference: Hook | None = None
    after_inference: Hook | None = None
    after_turn: Callable[[SessionContext], Sequence[FeatureAction] | None] | None = None
    after_agent_loop: Callable[[SessionContext], Sequence[FeatureAction] | None] | None = None


@dataclass
class DurableFeature(DurableHooks):
    """A named capability: any subset of the hooks, merged with other features by :func:`merge_features`."""

    name: str = "feature"


def merge_features(features: Sequence[DurableHooks]) -> DurableHooks:
    """One set of hooks running every feature's, by the rules in the module docstring."""
    merged = DurableHooks()
    for f in fields(DurableHooks):
        implemented = [getattr(feature, f.name) for feature in features if getattr(feature, f.name) is not None]
        if not implemented:
            continue
        if len(implemented) == 1:
            setattr(merged, f.name, implemented[0])
        elif f.name == "instructions":
            setattr(merged, f.name, _joined(implemented))
        elif f.name in ("tools", "after_turn", "after_agent_loop"):
            setattr(merged, f.name, _concatenated(implemented))
        elif f.name == "model_changed":
            setattr(merged, f.name, _first_answer(implemented))
        else:
            setattr(merged, f.name, fan_out(implemented))  # every feature observes, even if one fails
    return merged


def _joined(hooks: list[Hook]) -> Hook:
    def instructions(ctx: SessionContext) -> str:
        return "\n\n".join(text for hook in hooks if (text := hook(ctx) or ""))
    return instructions


def _concatenated(hooks: list[Hook]) -> Hook:
    def concatenated(ctx: SessionContext) -> list[Any]:
        return [x for hook in hooks for x in (hook(ctx) or ())]
    return concatenated


def _first_answer(hooks: list[Hook]) -> Hook:
    def model_changed(ctx: SessionContext, change: ModelChange) -> str | None:
        answer = None
        for hook in hooks:  # every feature observes the change; the first message wins
            message = hook(ctx, change)
            answer = answer if answer is not None else message
        return answer
    return model_changed


async def call_hook(hooks: DurableHooks, name: str, *args: Any, errors: list[str] | None = None) -> Any:
    """Call hook ``name`` (awaiting it when async); a failure is logged (and noted) and gives None."""
    hook = getattr(hooks, name)
    if hook is None:
        return None
    try:
        value = hook(*args)
        if inspect.isawaitable(value):
            value = await value
        return value
    except Exception as exc:  # a hook never fails the run
        log.warning("durable hook %s failed: %s: %s", name, type(exc).__name__, exc, exc_info=exc)
        if errors is not None:
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
        return None

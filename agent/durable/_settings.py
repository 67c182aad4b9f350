"""Inference settings a queued message may carry, and how they stay in effect.

Each message may name a provider (registry id), a model, an effort and a service tier. They take
effect when the message is consumed and stay in effect for every later message that does not
override them; the effective settings are kept under the ``settings`` value, so they survive a
restart. A field never given anywhere falls back to the agent's constructor default.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from .errors import SettingsError

EFFORTS = ("minimal", "low", "medium", "high")
SERVICE_TIERS = ("auto", "default", "flex", "priority")


@dataclass(frozen=True)
class InferenceSettings:
    """Provider registry id, model, reasoning effort and service tier (None: not given)."""

    provider: str | None = None
    model: str | None = None
    effort: str | None = None
    service_tier: str | None = None

    def __post_init__(self) -> None:
        for name in ("provider", "model"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise SettingsError(f"the {name} setting must be a non-empty string, got {value!r}")
        if self.effort is not None and self.effort not in EFFORTS:
            raise SettingsError(f"effort must be one of {', '.join(EFFORTS)}, got {self.effort!r}")
        if self.service_tier is not None and self.service_tier not in SERVICE_TIERS:
            raise SettingsError(f"service_tier must be one of {', '.join(SERVICE_TIERS)}, got {self.service_tier!r}")

    def over(self, earlier: InferenceSettings) -> InferenceSettings:
        """These settings, with every field not given taken from ``earlier``."""
        given = {k: v for k, v in asdict(self).items() if v is not None}
        return replace(earlier, **given)

    @property
    def empty(self) -> bool:
        """True when no field is given."""
        return all(v is None for v in asdict(self).values())

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: only the fields given."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, data: Any) -> InferenceSettings:
        """From :meth:`to_dict`'s form; a :class:`SettingsError` names what is wrong."""
        if data is None:
            return cls()
        if not isinstance(data, dict):
            raise SettingsError(f"settings must be a JSON object, got {type(data).__name__}")
        unknown = set(data) - {"provider", "model", "effort", "service_tier"}
        if unknown:
            raise SettingsError(f"unknown settings field(s): {', '.join(sorted(unknown))}")
        return cls(**data)

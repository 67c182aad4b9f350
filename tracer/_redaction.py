"""Redaction at record time: secrets never reach the store or an exporter.

A policy masks the values of sensitive keys in JSON objects, text matching regular expressions,
and whatever a user hook changes. It is applied to every item, attribute, input and output before
they are written; the policy's description is stored with each run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

MASK = "[REDACTED]"

DEFAULT_KEYS = ("api_key", "apikey", "password", "secret", "authorization", "token", "access_token")
DEFAULT_PATTERNS = (
    r"sk-[A-Za-z0-9_\-]{16,}",  # OpenAI-style secret keys
    r"(?i)bearer\s+[A-Za-z0-9._\-]{16,}",  # bearer tokens
    r"AKIA[0-9A-Z]{16}",  # AWS access key ids
)


@dataclass(frozen=True)
class RedactionPolicy:
    """What to mask before anything is written.

    ``keys``: JSON object keys (case-insensitive) whose values are replaced by ``[REDACTED]``.
    ``patterns``: regular expressions whose matches in any string are replaced.
    ``hook``: a function applied to every string after the patterns.
    """

    keys: tuple[str, ...] = DEFAULT_KEYS
    patterns: tuple[str, ...] = DEFAULT_PATTERNS
    hook: Callable[[str], str] | None = None
    _compiled: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)
    _keyset: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        compiled = tuple(re.compile(p) for p in self.patterns)
        object.__setattr__(self, "_compiled", compiled)
        object.__setattr__(self, "_keyset", frozenset(k.lower() for k in self.keys))

    @classmethod
    def none(cls) -> RedactionPolicy:
        """A policy that masks nothing."""
        return cls(keys=(), patterns=())

    @classmethod
    def with_extra(
        cls, keys: Iterable[str] = (), patterns: Iterable[str] = (), hook: Callable[[str], str] | None = None
    ) -> RedactionPolicy:
        """The default policy plus more keys and patterns."""
        return cls(DEFAULT_KEYS + tuple(keys), DEFAULT_PATTERNS + tuple(patterns), hook)

    @property
    def is_noop(self) -> bool:
        """True when the policy can change nothing."""
        return not self._compiled and not self._keyset and self.hook is None

    def describe(self) -> dict[str, Any]:
        """The policy as stored with each run."""
        hook_name = getattr(self.hook, "__qualname__", repr(self.hook)) if self.hook else None
        return {"keys": list(self.keys), "patterns": list(self.patterns), "hook": hook_name}

    def text(self, value: str) -> str:
        """``value`` with every pattern match masked and the hook applied."""
        for pattern in self._compiled:
            value = pattern.sub(MASK, value)
        if self.hook is not None:
            value = self.hook(value)
        return value

    def value(self, value: Any) -> Any:
        """A JSON value with sensitive keys and matching strings masked (a new value; the input is kept)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {
                k: (MASK if isinstance(k, str) and k.lower() in self._keyset else self.value(v))
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value

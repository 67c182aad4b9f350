"""Errors raised by the evidence tools (replay, counterfactual, blame).

    FootprintError (tracer.errors)
    └── AgentError (agent.errors)
        ├── ReplayMismatchError          a replayed request differs from the recording (agent.errors)
        └── EvidenceError                a replay, counterfactual or blame cannot be done as asked
            ├── NotReplayableError       the recording lacks what rebuilding the run needs
            └── EditError                a counterfactual edit names no item, or one it cannot edit
"""

from __future__ import annotations

from ..errors import AgentError


class EvidenceError(AgentError):
    """A replay, counterfactual or blame cannot be done as asked; the message says why and what to do."""


class NotReplayableError(EvidenceError):
    """The recorded run cannot be rebuilt (it resumed after a pause, was cancelled, made no model call...)."""


class EditError(EvidenceError):
    """A counterfactual edit names no item of the stage's snapshot, or an item it cannot edit."""

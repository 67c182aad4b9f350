"""Evidence, not guesses: replay a recorded run, test an item with counterfactuals, find the culprit.

``replay`` runs a recorded run again through the real loop with the recorded model outputs and
tool results; ``counterfactual`` re-runs a run from one inference with a context item removed or
replaced, against a live provider, several times, and gives a verdict; ``blame`` tests the items
`why` names for an answer and ranks the ones whose removal flips it.

Each name is imported from its module when first used (tracer._lazy), so ``footprint blame --help``
(or ``replay``, ``counterfactual``, ``dropped``) loads neither the agent loop nor the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracer._lazy import lazy_exports

if TYPE_CHECKING:
    from ._blame import BlameReport, GroupTest, Skipped, Suspect, blame
    from ._control import Comparator, Control, Controls
    from ._counterfactual import CounterfactualResult, Outcome, counterfactual, exact, verdict_of
    from ._edits import Edit
    from ._rebuild import RecordedComposer, RecordedFacts
    from ._replay import RecordedModel, ReplayResult, replay
    from ._window import RecordedWindowMemory
    from .errors import EditError, EvidenceError, NotReplayableError

#: each public name and the module that defines it, imported when the name is first used
_EXPORTS: dict[str, str] = {
    "BlameReport": "._blame",
    "Comparator": "._control",
    "Control": "._control",
    "Controls": "._control",
    "CounterfactualResult": "._counterfactual",
    "Edit": "._edits",
    "EditError": ".errors",
    "EvidenceError": ".errors",
    "GroupTest": "._blame",
    "NotReplayableError": ".errors",
    "Outcome": "._counterfactual",
    "RecordedComposer": "._rebuild",
    "RecordedFacts": "._rebuild",
    "RecordedModel": "._replay",
    "RecordedWindowMemory": "._window",
    "ReplayResult": "._replay",
    "Skipped": "._blame",
    "Suspect": "._blame",
    "blame": "._blame",
    "counterfactual": "._counterfactual",
    "exact": "._counterfactual",
    "replay": "._replay",
    "verdict_of": "._counterfactual",
}

__all__ = [
    "BlameReport",
    "Comparator",
    "Control",
    "Controls",
    "CounterfactualResult",
    "Edit",
    "EditError",
    "EvidenceError",
    "GroupTest",
    "NotReplayableError",
    "Outcome",
    "RecordedComposer",
    "RecordedFacts",
    "RecordedModel",
    "RecordedWindowMemory",
    "ReplayResult",
    "Skipped",
    "Suspect",
    "blame",
    "counterfactual",
    "exact",
    "replay",
    "verdict_of",
]

if not TYPE_CHECKING:  # (mypy reads the imports above; a module __getattr__ would let any name through)
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

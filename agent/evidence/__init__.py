"""Evidence, not guesses: replay a recorded run, test an item with counterfactuals, find the culprit.

``replay`` runs a recorded run again through the real loop with the recorded model outputs and
tool results; ``counterfactual`` re-runs a run from one inference with a context item removed or
replaced, against a live provider, several times, and gives a verdict; ``blame`` tests the items
`why` names for an answer and ranks the ones whose removal flips it.
"""

from ._blame import BlameReport, GroupTest, Skipped, Suspect, blame
from ._control import Comparator, Control, Controls
from ._counterfactual import CounterfactualResult, Outcome, counterfactual, exact, verdict_of
from ._edits import Edit
from ._rebuild import RecordedComposer, RecordedFacts
from ._replay import RecordedModel, ReplayResult, replay
from ._window import RecordedWindowMemory
from .errors import EditError, EvidenceError, NotReplayableError

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

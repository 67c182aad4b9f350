"""Items that reached the answer through an earlier run, tested where they acted.

An item sent only to an earlier run's model (a fact since forgotten, a tool result of a run whose
messages are history now, what a sub-agent saw) acts on this answer through what that run wrote.
It is tested in two steps: a counterfactual of the run that last sent it, with the item edited; if
that run then wrote anything else, this run is re-run with that run's messages replaced by what its
re-run wrote. When the earlier run wrote the same without the item, the item holds here too: it
cannot act through a run it did not change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tracer import ContextItem, ItemKind, Origin, OriginKind, RunData, StageKind, Store

from ..providers import Provider
from ..tools import Tool, ToolRegistry
from ._control import Comparator, Controls
from ._counterfactual import CounterfactualResult, counterfactual, run_plan
from ._edits import Edit, plan
from ._rebuild import Once
from ._recording import RecordedRun, read_recording


@dataclass
class ThroughEarlier:
    """Both steps: the earlier run's counterfactual, and this run's with that run's messages swapped."""

    earlier: CounterfactualResult
    here: CounterfactualResult | None
    note: str = ""

    @property
    def verdict(self) -> str:
        """This run's verdict (``holds`` when the earlier run was not changed by the edit)."""
        if self.here is not None:
            return self.here.verdict
        return "holds" if self.earlier.verdict == "holds" else "inconclusive"


def contributions(data: RunData) -> list[ContextItem]:
    """The messages a run added to its conversation, in order: the user's, the model's, the tools'."""
    out: list[ContextItem] = []
    for stage in sorted(data.stages, key=lambda s: s.seq):
        outputs = [data.items[h] for h in data.outputs.get(stage.id, []) if h in data.items]
        if stage.kind == StageKind.INPUT:
            out += [ContextItem(i, Origin(OriginKind.USER, data.run.id, stage.id, "input")) for i in outputs
                    if i.kind == ItemKind.USER]
        elif stage.kind == StageKind.INFERENCE:
            out += [ContextItem(i, Origin(OriginKind.STAGE, data.run.id, stage.id)) for i in outputs]
        elif stage.kind == StageKind.TOOL and outputs:
            out.append(ContextItem(outputs[-1], Origin(OriginKind.STAGE, data.run.id, stage.id)))
    return out


async def through_earlier(
    store: Store, recording: RecordedRun, item_hash: str, earlier_run: str, *, provider: Provider,
    tools: Sequence[Tool] | ToolRegistry = (), repeats: int = 3, comparator: Comparator | None = None,
    new_calls: str = "durable", executions: Once | None = None, controls: Controls | None = None,
) -> ThroughEarlier:
    """Test ``item_hash``, sent only to run ``earlier_run``, where it acted (see the module docstring)."""
    earlier = read_recording(store.load_run(earlier_run))
    item = earlier.data.items[item_hash]
    edit = Edit.returned_nothing(item_hash) if item.kind == ItemKind.TOOL_RESULT else Edit.remove(item_hash)
    there = await counterfactual(store, earlier_run, edits=edit, provider=provider, tools=tools, repeats=1,
                                 comparator=comparator, new_calls=new_calls, executions=executions, controls=controls,
                                 recording=earlier)
    if there.verdict != "flips" or not there.outcomes:
        return ThroughEarlier(there, None, f"run {earlier_run} answered the same without it" if there.verdict ==
                              "holds" else there.reason or f"its test in run {earlier_run} was inconclusive")
    written = contributions(store.load_run(there.outcomes[0].run_id))
    planned = plan(recording, [], fork=0)
    history = planned.parts.history
    sent = {e.item_hash for e in recording.inferences[0].entries}
    carried = [i for i, ci in enumerate(history) if ci.origin.run_id == earlier_run and ci.item.hash in sent]
    if not carried:
        return ThroughEarlier(there, None, f"none of what run {earlier_run} wrote reached this run's model")
    dropped = set(carried)
    planned.parts.history = [*history[:carried[0]], *written,
                             *(ci for i, ci in enumerate(history[carried[0]:], carried[0]) if i not in dropped)]
    here = await run_plan(store, recording, planned, [], provider=provider, tools=tools, repeats=repeats,
                          comparator=comparator, new_calls=new_calls, executions=executions, controls=controls,
                          flush=False, described={"through_run": earlier_run, "item": item_hash,
                                                  "earlier_rerun": there.outcomes[0].run_id})
    return ThroughEarlier(there, here)

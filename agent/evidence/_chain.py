"""The chain behind a convicted item: where it came from, one link at a time.

For a tool result: the call that fetched it, the inference that made the call, and what that
inference saw that holds the call's arguments — so a wrong argument is one look away, and one
``counterfactual --replace`` away from proof. For a memory fact, a prompt section or an item of an
earlier run: the stage (and run) that brought it in.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from tracer import ItemKind, OriginKind

from ._recording import RecordedRun

_VALUE = re.compile(r"\d+(?:[.,:/-]\d+)*|[A-Za-z][A-Za-z'-]{2,}")


@dataclass
class Link:
    """One step back: what it is (``kind``), its stage or item, and a line a reader can follow."""

    kind: str  # call | inference | source | stage | run
    text: str
    stage_id: str | None = None
    item_hash: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return dict(self.__dict__)


@dataclass
class Chain:
    """The lineage of one item, and the command that would test its weakest link."""

    links: list[Link] = field(default_factory=list)
    try_next: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {"links": [link.to_dict() for link in self.links], "try_next": self.try_next}


def chain_of(recording: RecordedRun, item_hash: str) -> Chain:
    """The chain of ``item_hash`` in ``recording`` (empty links when it has no recorded lineage)."""
    data = recording.data
    item = data.items.get(item_hash)
    chain = Chain()
    if item is None:
        return chain
    origin = _origin(recording, item_hash)
    if item.kind == ItemKind.TOOL_RESULT:
        call = next((c for c in recording.calls if c.result_hash == item_hash), None)
        if call is not None:
            _call_links(recording, chain, call.call_hash, call.stage_id)
            return chain
    if item.kind == ItemKind.TOOL_CALL and any(c.call_hash == item_hash for c in recording.calls):
        _call_links(recording, chain, item_hash, None)
        return chain
    if origin is None:
        return chain
    if origin.kind == OriginKind.MEMORY:
        chain.links.append(Link("stage", f"loaded from memory (key {origin.source}) by the memory stage",
                                origin.stage_id))
        chain.try_next = "check or correct the memory fact; counterfactual --replace it to test a corrected text"
    elif origin.kind == OriginKind.PROMPT_SECTION:
        chain.links.append(Link("stage", f"composed into the prompt as section {origin.source}", origin.stage_id))
    elif origin.run_id and origin.run_id != recording.run_id:
        chain.links.append(Link("run", f"produced by run {origin.run_id} (stage {origin.stage_id}); it came in "
                                       f"with the conversation history", origin.stage_id))
        chain.try_next = f"footprint why {origin.run_id} shows how that run came to it"
    return chain


def _origin(recording: RecordedRun, item_hash: str) -> Any:
    for inference in recording.inferences:
        for entry in [*inference.entries, *inference.dropped]:
            if entry.item_hash == item_hash:
                return entry.origin
    return None


def _call_links(recording: RecordedRun, chain: Chain, call_hash: str, tool_stage: str | None) -> None:
    data = recording.data
    call = data.items.get(call_hash)
    if call is None:
        return
    name = recording.name(call_hash)
    chain.links.append(Link("call", f"fetched by {name}: {call.text}", tool_stage, call_hash))
    producer = next((i for i in recording.inferences if call_hash in data.outputs.get(i.stage.id, [])), None)
    if producer is None:
        return
    chain.links.append(Link("inference", f"which the model asked for at {producer.stage.name!r} "
                                         f"({producer.stage.id}), having seen {len(producer.entries)} items",
                            producer.stage.id))
    arguments = str(call.body.get("arguments", ""))
    wanted = {v.lower() for v in _VALUE.findall(_argument_values(arguments))}
    holders = []
    for entry in producer.entries:
        held = data.items.get(entry.item_hash)
        if held is None or held.kind in (ItemKind.TOOL_DEFINITION, ItemKind.SETTINGS) or entry.item_hash == call_hash:
            continue
        found = sorted(wanted & {v.lower() for v in _VALUE.findall(held.text)})
        if found:
            holders.append((len(found), entry.item_hash, found))
    for _, holder, found in sorted(holders, key=lambda h: -h[0])[:3]:
        chain.links.append(Link("source", f"the arguments' {', '.join(repr(f) for f in found[:3])} appear in "
                                          f"{recording.name(holder)}: {data.items[holder].text[:100]!r}",
                                producer.stage.id, holder))
    chain.try_next = (f"footprint counterfactual {recording.run_id} --replace {name} --with '<other arguments>' "
                      f"tests whether other arguments change the answer")


def _argument_values(arguments: str) -> str:
    """The values of a call's JSON arguments as text (the keys say nothing about where they came from)."""
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return arguments
    values: list[str] = []

    def collect(value: Any) -> None:
        if isinstance(value, dict):
            for v in value.values():
                collect(v)
        elif isinstance(value, list):
            for v in value:
                collect(v)
        else:
            values.append(str(value))

    collect(parsed)
    return " ".join(values)


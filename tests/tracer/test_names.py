"""Item names (tracer._names) on runs nobody hand-picked: unique in a run, stable, and accepted back."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracer import (
    Item,
    ItemKind,
    NotFoundError,
    Origin,
    OriginKind,
    Run,
    RunData,
    SnapshotEntry,
    Stage,
    content_hash,
    item_names,
    resolve_item,
)

KINDS = [ItemKind.USER, ItemKind.ASSISTANT, ItemKind.MEMORY, ItemKind.TOOL_RESULT, ItemKind.PROMPT_SECTION]
SOURCES = [None, "profile.city", "persona", "notes.md"]


@st.composite
def runs(draw: st.DrawFn) -> RunData:
    """A run of 1-6 inferences whose snapshots share items, with origins of every kind."""
    texts = draw(st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=25, unique=True))
    items = {}
    for text in texts:
        kind = draw(st.sampled_from(KINDS))
        item = Item(kind, {"text": text}, content_hash(kind, {"text": text}))
        items[item.hash] = item
    hashes = list(items)
    stages = [Stage(f"s-{i}", "r-1", i, "inference", f"turn {i}", "ok", float(i)) for i in range(draw(st.integers(1, 6)))]
    inputs = {}
    for stage in stages:
        chosen = draw(st.lists(st.sampled_from(hashes), min_size=1, max_size=10))
        entries = []
        for position, item_hash in enumerate(chosen):
            kind = draw(st.sampled_from(list(OriginKind)))
            source = draw(st.sampled_from(SOURCES)) if kind != OriginKind.STAGE else None
            from_stage = draw(st.sampled_from(stages)).id if kind == OriginKind.STAGE else None
            entries.append(SnapshotEntry(position, item_hash, Origin(kind, "r-1", from_stage, source),
                                         draw(st.booleans()), None))
        inputs[stage.id] = entries
    run = Run("r-1", "s", "agent", "answered", "hi", "ok", None, 0.0)
    return RunData(run=run, stages=stages, edges=[], inputs=inputs, items=items)


@settings(max_examples=200, deadline=None)
@given(runs())
def test_every_item_has_one_unique_name_that_resolves_back(data: RunData) -> None:
    names = item_names(data)
    shown = {e.item_hash for es in data.inputs.values() for e in es}
    assert set(names) == shown
    assert len(set(names.values())) == len(names)  # unique in the run
    assert item_names(data) == names  # the same recording, the same names
    for item_hash, name in names.items():
        assert resolve_item(data, name, names) == item_hash
        assert resolve_item(data, item_hash[:12], names) == item_hash


def test_an_unknown_name_is_refused_with_names_the_run_holds() -> None:
    fact = Item("memory", {"text": "Maya lives in Berlin."}, content_hash("memory", {"text": "Maya lives in Berlin."}))
    stages = [Stage("s-1", "r-1", 1, "inference", "turn 1", "ok", 1.0)]
    inputs = {"s-1": [SnapshotEntry(0, fact.hash, Origin(OriginKind.MEMORY, None, None, "profile.home_city"))]}
    data = RunData(Run("r-1", None, "a", "answered", "hi", "ok", None, 0.0), stages, [], inputs, items={fact.hash: fact})
    assert item_names(data) == {fact.hash: "memory:profile.home_city"}
    with pytest.raises(NotFoundError, match=r"memory:profile\.home_city"):
        resolve_item(data, "memory:nope")

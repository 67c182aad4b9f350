"""Human names for the items of a run: a stable label from the item's origin, beside its hash.

A hash says nothing to a reader; ``memory:profile.city`` or ``result:weather#2`` does. Names are
made from what the recording holds, the same way every time for the same run:

    memory:<key>            a memory fact                 section:<name>     a prompt section
    tool:<name>             a tool definition             settings           the model settings
    input                   the user's message            output:turn<n>     what the model wrote at turn n
    call:<tool>#<n>         the n-th call of that tool    result:<tool>#<n>  the result of that call
    history:<kind>#<n>      the n-th item of that kind the run got from earlier runs (oldest first)

Every command that takes an item hash (or a unique prefix) takes its name too: :func:`resolve_item`.
"""

from __future__ import annotations

from collections import Counter

from ._records import ItemKind, OriginKind, SnapshotEntry, StageKind
from ._rundata import RunData
from .errors import NotFoundError


def item_names(data: RunData) -> dict[str, str]:
    """Item hash -> its name in run ``data`` (every item the run's stages sent, left out or produced)."""
    run_id = data.run.id
    names: dict[str, str] = {}
    taken: Counter[str] = Counter()

    def name(item_hash: str, label: str) -> None:
        if item_hash in names:
            return
        taken[label] += 1
        names[item_hash] = label if taken[label] == 1 else f"{label}~{taken[label]}"

    calls: Counter[str] = Counter()
    results: Counter[str] = Counter()
    turn = 0
    for stage in data.stages:  # what this run produced, in the order it did
        outputs = data.outputs.get(stage.id, [])
        if stage.kind == StageKind.INFERENCE:
            turn += 1
            for item_hash in outputs:
                item = data.items.get(item_hash)
                if item is not None and item.kind == ItemKind.TOOL_CALL:
                    tool = str(item.body.get("name", "?"))
                    calls[tool] += 1
                    name(item_hash, f"call:{tool}#{calls[tool]}")
                else:
                    name(item_hash, f"output:turn{turn}")
        elif stage.kind == StageKind.TOOL:
            results[stage.name] += 1
            for item_hash in outputs:
                name(item_hash, f"result:{stage.name}#{results[stage.name]}")
        elif stage.kind == StageKind.INPUT:
            for item_hash in outputs:
                item = data.items.get(item_hash)
                name(item_hash, "input" if item is not None and item.kind == ItemKind.USER else "closing")
    history: Counter[str] = Counter()
    for entry in _sent_in_order(data):
        item = data.items.get(entry.item_hash)
        kind = item.kind if item is not None else "item"
        origin = entry.origin
        if origin.kind == OriginKind.MEMORY:
            name(entry.item_hash, f"memory:{origin.source or kind}")
        elif origin.kind == OriginKind.PROMPT_SECTION:
            name(entry.item_hash, f"section:{origin.source or kind}")
        elif origin.kind == OriginKind.CONFIG:
            source = origin.source or kind
            name(entry.item_hash, "settings" if kind == ItemKind.SETTINGS else source)
        elif origin.run_id is not None and origin.run_id != run_id:
            if entry.item_hash not in names:
                history[kind] += 1
                name(entry.item_hash, f"history:{kind}#{history[kind]}")
        else:
            name(entry.item_hash, f"{origin.kind}:{origin.source or kind}")
    return names


def _sent_in_order(data: RunData) -> list[SnapshotEntry]:
    """The entries of every stage's inputs; history in conversation order (the stages that made it)."""
    entries = [e for stage in data.stages for e in data.inputs.get(stage.id, [])]
    return sorted(entries, key=lambda e: (e.origin.run_id or "", e.origin.stage_id or "")
                  if e.origin.run_id not in (None, data.run.id) else ("", ""))


def resolve_item(data: RunData, ref: str, names: dict[str, str] | None = None) -> str:
    """The hash of the item ``ref`` names in run ``data``: its name, its hash or a unique prefix of it.

    Raises :class:`NotFoundError` naming the run and a few names it does hold.
    """
    names = item_names(data) if names is None else names
    by_name = {n: h for h, n in names.items()}
    if ref in by_name:
        return by_name[ref]
    if ref in data.items:
        return ref
    matches = {h for h in data.items if h.startswith(ref)} if ref else set()
    if len(matches) == 1:
        return matches.pop()
    if len(matches) > 1:
        raise NotFoundError(f"{ref!r} matches {len(matches)} items of run {data.run.id}; give more of the hash "
                            f"or the item's name")
    known = ", ".join(sorted(by_name)[:8])
    raise NotFoundError(f"run {data.run.id} holds no item named {ref!r} and none whose hash starts with it "
                        f"(names look like: {known}; footprint why {data.run.id} lists them)")

"""Snapshot tests of agent runs: a syrupy extension that renders runs as a stable text flowchart.

    def test_booking(footprint_snapshot, footprint_store):      # fixtures of footprint's pytest plugin
        ...run the agent...
        assert footprint_snapshot == footprint_store.load_run(result.run_id)

The rendering shows every stage in order with its incoming edges, its attributes, the context an
inference saw (each item with its origin, and what was left out), the outputs, and the run's answer.
Everything that changes from one test run to the next is normalized: runs are numbered ``R1, R2``
in order of appearance, stages by their sequence number (``S3``, or ``R1.S3`` in another run), items
``#1, #2`` by first appearance (printed in full once, then by number), and tool-call ids, sessions,
response ids and other ids get placeholders; times and durations are left out. A diff of the
snapshot file in review then shows what the agent did differently, and nothing else.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from ._records import Item, ItemKind, Origin, OriginKind, StageKind
from ._rundata import RunData
from ._store import Store

#: attributes whose values change between runs of the same behaviour (left out of the rendering)
VOLATILE_ATTRIBUTES = frozenset({"duration_ms", "started_at", "ended_at", "elapsed_ms"})

_GENERATED_ID = re.compile(r"\b[a-z]+-[0-9a-f]{12}-[0-9a-f]{10}\b")  # tracer._ids.new_id
_UUID_HEX = re.compile(r"\b[0-9a-f]{32}\b|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_PREVIEW = 72
_MIN_EMBEDDED = 8  # ids at least this long are replaced inside text too


class _Names:
    """Stable placeholders for everything that differs between two recordings of the same behaviour."""

    def __init__(self, runs: Sequence[RunData]) -> None:
        self.ids: dict[str, str] = {}
        self.items: dict[str, int] = {}
        self._printed: set[str] = set()
        self._hashes = {h for data in runs for h in data.items}
        self._counts: dict[str, int] = {}
        for number, data in enumerate(runs, 1):
            self.ids[data.run.id] = f"R{number}"
            for stage in data.stages:
                self.ids[stage.id] = f"R{number}.S{stage.seq}"
        for data in runs:
            if data.run.session_id:
                self._name(data.run.session_id, "session")
            for stage in data.stages:
                attrs = stage.attributes
                if attrs.get("call_id"):
                    self._name(str(attrs["call_id"]), "call")
                if attrs.get("response_id"):
                    self._name(str(attrs["response_id"]), "response")
            for item in data.items.values():
                if item.kind in (ItemKind.TOOL_CALL, ItemKind.TOOL_RESULT):
                    call_id = item.body.get("id") if item.kind == ItemKind.TOOL_CALL else item.body.get("call_id")
                    if call_id:
                        self._name(str(call_id), "call")
        # ids long enough not to be words are also replaced inside text, as whole tokens, longest first;
        # a short one (a session called "s") only where a value is exactly that id
        long_ids = sorted((i for i in self.ids if len(i) >= _MIN_EMBEDDED), key=len, reverse=True)
        self._embedded = (
            re.compile("|".join(rf"(?<![\w-]){re.escape(i)}(?![\w-])" for i in long_ids)) if long_ids else None
        )

    def other(self, value: str, kind: str) -> str:
        """The placeholder of an id outside the rendered runs (``run#1``, ``stage#2``)."""
        return self._name(value, kind)

    def _name(self, value: str, kind: str) -> str:
        if value not in self.ids:
            self._counts[kind] = self._counts.get(kind, 0) + 1
            self.ids[value] = f"{kind}#{self._counts[kind]}"
        return self.ids[value]

    def stage(self, stage_id: str | None, run: RunData) -> str:
        """A stage's label: ``S3`` in its own run, ``R1.S3`` in another, ``stage#n`` when not rendered."""
        if stage_id is None:
            return "?"
        if run.has_stage(stage_id):
            return f"S{run.stage(stage_id).seq}"
        return self.ids.get(stage_id) or self._name(stage_id, "stage")

    def item_label(self, item_hash: str) -> str:
        """The item's placeholder, ``#n`` by first mention."""
        if item_hash not in self.items:
            self.items[item_hash] = len(self.items) + 1
        return f"#{self.items[item_hash]}"

    def item(self, item_hash: str) -> tuple[str, bool]:
        """The item's placeholder and whether this is the first time it is listed (printed in full)."""
        first = item_hash not in self._printed
        self._printed.add(item_hash)
        return self.item_label(item_hash), first

    def text(self, value: str) -> str:
        """``value`` with every id it mentions replaced by its placeholder."""
        if value in self.ids:
            return self.ids[value]
        if self._embedded is not None:
            value = self._embedded.sub(lambda m: self.ids[m.group(0)], value)
        value = _GENERATED_ID.sub(lambda m: self._name(m.group(0), "id"), value)
        return _UUID_HEX.sub(self._hex, value)

    def _hex(self, match: re.Match[str]) -> str:
        # a content hash of a rendered item is named like the item; anything else is an opaque id
        text = match.group(0)
        return self.item_label(text) if text in self._hashes else self._name(text, "uuid")

    def value(self, value: Any) -> Any:
        """A JSON value with ids replaced in every string (keys and values)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value


def _compact(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line if line else prefix.rstrip() for line in text.splitlines() or [""])


class _Renderer:
    def __init__(self, runs: Sequence[RunData]) -> None:
        self.runs = runs
        self.names = _Names(runs)
        self.lines: list[str] = []

    def render(self) -> str:
        for data in self.runs:
            self._run(data)
        return "\n".join(self.lines).rstrip() + "\n"

    def _run(self, data: RunData) -> None:
        n, run = self.names, data.run
        head = [f"run {n.ids[run.id]}", f"agent {run.agent}", run.status]
        if run.session_id:
            head.insert(2, f"session {n.ids[run.session_id]}")
        self.lines.append("═" * 4 + " " + " · ".join(head) + " " + "═" * 4)
        self._field("input", run.input)
        if run.output is not None:
            self._field("output", run.output)
        if run.error:
            self._field("error", run.error)
        self.lines.append(f"  model {run.model or '-'} · tokens {run.tokens_in} in / {run.tokens_out} out · "
                          f"cost {run.cost:.6f}")
        if run.labels:
            self.lines.append(f"  labels: {', '.join(run.labels)}")
        if run.forked_from_run:
            fork = n.ids.get(run.forked_from_run) or n.other(run.forked_from_run, "run")
            at = n.ids.get(run.forked_from_stage or "") or n.other(run.forked_from_stage or "?", "stage")
            self.lines.append(f"  forked from {fork} at {at}: {_compact(n.value(run.fork_edit))}")
        if run.attributes:
            self.lines.append(f"  attributes: {_compact(n.value(run.attributes))}")
        self.lines.append("")
        for stage in sorted(data.stages, key=lambda s: s.seq):
            self._stage(data, stage.id)

    def _field(self, name: str, text: str) -> None:
        text = self.names.text(text)
        if "\n" in text:
            self.lines.append(f"  {name}:")
            self.lines.append(_indent(text, "    | "))
        else:
            self.lines.append(f"  {name}: {text}")

    def _stage(self, data: RunData, stage_id: str) -> None:
        n, stage = self.names, data.stage(stage_id)
        title = f"S{stage.seq} {stage.kind} {n.text(stage.name)!r} · {stage.status}"
        incoming: dict[str, list[str]] = {}
        for edge in data.edges:
            if edge.dst == stage.id:
                incoming.setdefault(edge.kind, []).append(n.stage(edge.src, data))
        arrows = [f"{', '.join(sorted(srcs))}" + ("" if kind == "next" else f" ({kind})")
                  for kind, srcs in sorted(incoming.items())]
        if arrows:
            title += "  <- " + "; ".join(arrows)
        if stage.parent_id:
            title += f"  in {n.stage(stage.parent_id, data)}"
        self.lines.append(title)
        attrs = {k: v for k, v in sorted(stage.attributes.items()) if k not in VOLATILE_ATTRIBUTES and v is not None}
        if attrs:
            self.lines.append("  " + " ".join(f"{k}={_compact(n.value(v))}" for k, v in attrs.items()))
        if stage.error:
            self.lines.append(f"  error: {n.text(stage.error)}")
        entries = data.inputs.get(stage.id, [])
        sent = [e for e in entries if e.included]
        dropped = [e for e in entries if not e.included]
        if sent:
            self.lines.append("  context:" if stage.kind == StageKind.INFERENCE else "  in:")
            for entry in sent:
                self._item(data, entry.item_hash, entry.origin, "    ")
        if dropped:
            self.lines.append("  not in context:")
            for entry in dropped:
                self._item(data, entry.item_hash, entry.origin, "    ", f"dropped by {entry.dropped_by}")
        outputs = data.outputs.get(stage.id, [])
        if outputs:
            self.lines.append("  out:")
            for item_hash in outputs:
                self._item(data, item_hash, None, "    ")
        self.lines.append("")

    def _origin(self, origin: Origin, data: RunData) -> str:
        parts = [origin.kind] if origin.kind != OriginKind.STAGE else []
        if origin.source:
            parts.append(self.names.text(origin.source))
        if origin.stage_id:
            where = self.names.stage(origin.stage_id, data)
            parts.append(f"@ {where}" if parts else where)
        return " ".join(parts)

    def _item(self, data: RunData, item_hash: str, origin: Origin | None, pad: str, note: str = "") -> None:
        item = data.items.get(item_hash)
        label, first = self.names.item(item_hash)
        kind = item.kind if item is not None else "missing"
        where = f"  <- {self._origin(origin, data)}" if origin is not None else ""
        tail = f"  ({note})" if note else ""
        text = self._item_text(item) if item is not None else "(the item is not in the store)"
        if first:
            if "\n" in text:
                self.lines.append(f"{pad}{label} {kind}{where}{tail}")
                self.lines.append(_indent(text, pad + "  | "))
            else:
                self.lines.append(f"{pad}{label} {kind}: {text}{where}{tail}")
        else:
            preview = text.splitlines()[0] if text else ""
            if len(preview) > _PREVIEW or "\n" in text:
                preview = preview[:_PREVIEW].rstrip() + "…"
            self.lines.append(f"{pad}{label} {kind} (again): {preview}{where}{tail}")

    def _item_text(self, item: Item) -> str:
        n, body = self.names, item.body
        if item.kind == ItemKind.TOOL_CALL:
            return f"{item.text}  [{n.text(str(body.get('id', '')))}]"
        if item.kind == ItemKind.TOOL_RESULT:
            flag = " error" if body.get("is_error") else ""
            return f"[{n.text(str(body.get('call_id', '')))}{flag}] {n.text(item.text)}"
        if item.kind in (ItemKind.TOOL_DEFINITION, ItemKind.SETTINGS):
            return _compact(n.value(body))
        extra = {k: v for k, v in body.items() if k != "text"}
        text = n.text(item.text)
        return f"{text}  {_compact(n.value(extra))}" if extra and "\n" not in text else text


def _runs_of(data: Any) -> list[RunData]:
    if isinstance(data, RunData):
        return [data]
    if isinstance(data, Store):
        ids = [r[0] for r in data.query("SELECT id FROM runs ORDER BY started_at, id")]
        return [data.load_run(run_id) for run_id in ids]
    if isinstance(data, Iterable) and not isinstance(data, str | bytes | dict):
        runs = list(data)
        if all(isinstance(r, RunData) for r in runs):
            return runs
    raise TypeError(
        f"footprint snapshots render recorded runs: pass a RunData (store.load_run(run_id)), a list of "
        f"them, or a Store (every run, oldest first); got {type(data).__name__}"
    )


def render_flowchart(runs: RunData | Iterable[RunData] | Store) -> str:
    """Runs as the stable, normalized text flowchart that :class:`FlowchartExtension` snapshots."""
    return _Renderer(_runs_of(runs)).render()


class FlowchartExtension(SingleFileSnapshotExtension):
    """A syrupy extension: one ``.flow.txt`` file per snapshot holding the rendered flowchart.

    Use it with ``snapshot.use_extension(FlowchartExtension)`` (the plugin's ``footprint_snapshot``
    fixture does) and compare it with a :class:`~tracer.RunData`, a list of them, or a Store.
    """

    # syrupy 4 reads the extension from `_file_extension`, 5 and later from `file_extension` (and
    # fall back to "raw" without it): both, so the files are named alike under every syrupy.
    _file_extension = "flow.txt"
    file_extension = "flow.txt"
    _write_mode = WriteMode.TEXT

    def serialize(self, data: Any, *, exclude: Any = None, include: Any = None, matcher: Any = None) -> str:
        """Render ``data`` (runs) as text; a string is taken as already rendered."""
        if isinstance(data, str):
            return data
        return render_flowchart(data)


"""The rows a recorder hands to the writer: items, and snapshots packed per stage."""

from __future__ import annotations

import operator
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._records import ContextItem, Edge, Item, LeftOut, Origin, Recorded, SnapshotEntry
from ._schema import ENTRY_SEP, FIELD_NULL, FIELD_SEP
from ._writer import Bundle, StageRows


def item_row(item: Item) -> tuple[Any, ...]:
    text = item.text
    body = None if item.body == {"text": text} else item.canonical_body
    return (item.hash, item.kind, text, body)


# A snapshot's entries around the conversation, which every call composes again: the system prompt's
# pieces before it, the tools offered and the settings after it (see SnapshotPacker)
_HEAD_ORIGINS = frozenset({"prompt_section", "memory"})
_TAIL_ORIGINS = frozenset({"config"})
_CHAINS_KEPT = 256  # conversations whose last snapshot a packer remembers (bounds its memory)
_PACKING = re.compile("[\x1a-\x1f]")  # the separators of a packed snapshot (tracer._schema)
_first, _second = operator.itemgetter(0), operator.itemgetter(1)


def _holds_separator(text: str) -> bool:
    """True when ``text`` holds one of the packed snapshot's separators (a printable text cannot)."""
    return not text.isprintable() and _PACKING.search(text) is not None


def pack_edges(edges: Sequence[tuple[str, str]]) -> str | None:
    """A stage's incoming edges (source, kind) packed for ``fp_stage.edges``; None when a value
    holds a separator (the edges then go to ``fp_edge`` row by row)."""
    if len(edges) == 1:  # most stages follow one other: no list to build
        src, kind = edges[0]
        text = src + kind
        return f"{src}{FIELD_SEP}{kind}" if text.isprintable() or not _holds_separator(text) else None
    if _holds_separator("".join([src + kind for src, kind in edges])):
        return None
    return ENTRY_SEP.join([f"{src}{FIELD_SEP}{kind}" for src, kind in edges])


def pack_hashes(hashes: Sequence[str]) -> str | None:
    """A stage's output hashes packed for ``fp_stage.outputs``; None when one holds a separator."""
    if len(hashes) == 1:
        only = hashes[0]
        return only if only and (only.isprintable() or not _holds_separator(only)) else None
    return None if "" in hashes or _holds_separator("".join(hashes)) else ENTRY_SEP.join(hashes)


def _pack_origin(origin: Origin) -> str:
    """The origin's fields joined by FIELD_SEP (NULL as FIELD_NULL); "" when a field holds a
    separator (its snapshot then goes row by row). Not kept on the origin: the entry kept on its
    context item holds it, and a conversation would hold it twice per message."""
    kind, run, stage, source = origin.kind, origin.run_id, origin.stage_id, origin.source
    text = f"{kind}{run or ''}{stage or ''}{source or ''}"
    if not text.isprintable() and _holds_separator(text):
        packed = ""
    else:
        packed = (f"{kind}{FIELD_SEP}{FIELD_NULL if run is None else run}{FIELD_SEP}"
                  f"{FIELD_NULL if stage is None else stage}{FIELD_SEP}{FIELD_NULL if source is None else source}")
    return packed


@dataclass(slots=True)
class _ChainEnd:
    """The last snapshot of a conversation's chain, as the packer wrote it."""

    chain: str  # the stage id of the chain's first snapshot
    link: int  # 0: the first snapshot itself
    stage_id: str
    log: list[str]  # the chain's log: every conversation entry its rows added, in order
    low: int  # the last snapshot's conversation is log[low:]
    # what the last snapshots left out, when it is log[left_at:left_at + left_count], each left out by
    # left_by (None: nothing known; a row that lists only what fell out since adds its list; one that
    # leaves nothing out keeps it): its items when they were handed over (not when a receipt named
    # them), and the receipt a later row may name it by
    left: list[ContextItem] | None = None
    left_count: int = 0
    left_at: int = 0
    left_by: str | None = None
    receipt: Recorded | None = None


# Where a snapshot's row stands in its chain (the columns ``tracer._schema`` describes), as
# (chain, link, log_start, low, drop_low, drop_high, drop_reason): ``chain`` and ``link`` name it,
# the entries it appends to the chain's log go at ``log_start``, the conversation it sent is
# log[low:] (up to the end of what it appended), and what it left out is log[drop_low:drop_high],
# each left out by ``drop_reason`` (0, 0, None: nothing left out is in the log). A plain tuple:
# a stage builds one, and a frozen dataclass cost a microsecond of that.
ChainRow = tuple[str, int, int, int, int, int, "str | None"]


def _continues(middle: list[str], log: list[str], low: int) -> int:
    """Where ``middle`` starts in ``log[low:]`` (the last snapshot's conversation) when it holds
    that from there on and then what was added (the window slid past the rest); -1 when not."""
    if not middle or low >= len(log):
        return -1
    first = middle[0]
    if log[low] == first:  # the usual case: the whole conversation again, and what was added
        i = low
    elif low == len(log) - 1:  # one entry, not this one's first (a tool's every call)
        return -1
    else:
        try:
            i = log.index(first, low + 1)
        except ValueError:
            return -1
    kept = len(log) - i
    return i - low if len(middle) >= kept and middle[:kept] == log[i:] else -1


def _extend(end: _ChainEnd, middle: list[str], i: int) -> tuple[int, int, list[str]]:
    """Append to the chain's log what ``middle`` adds, when it continues the last snapshot's
    conversation from ``i`` on (see :func:`_continues`): (where it was appended, where ``middle``
    starts in the log, the entries appended)."""
    log_start, low = len(end.log), end.low + i
    added = middle[log_start - low:]
    end.log.extend(added)
    return log_start, low, added


def _find(log: list[str], part: list[str]) -> int:
    """Where ``part`` lies in ``log`` (its first place); -1 when it does not."""
    if not part:
        return -1
    start = 0
    while True:
        try:
            i = log.index(part[0], start)
        except ValueError:
            return -1
        if log[i:i + len(part)] == part:
            return i
        start = i + 1


def _split(items: Sequence[ContextItem]) -> tuple[int, int]:
    """The conversation's part of a call's items, as (start, end): the system prompt's pieces are
    before it, the tools offered and the settings after it."""
    start, end = 0, len(items)
    while start < end and items[start].origin.kind in _HEAD_ORIGINS:
        start += 1
    while end > start and items[end - 1].origin.kind in _TAIL_ORIGINS:
        end -= 1
    return start, end


class SnapshotPacker:
    """Packs stages' snapshots into ``fp_snapshot`` rows for one recorder.

    An entry (an item's stored hash and its origin's fields) is packed once and kept on its
    :class:`ContextItem` with this packer's token: a conversation's items reappear in every later
    snapshot, so packing a snapshot is mostly one attribute read per entry and a join. A kept
    entry stands for "this recorder sent this item's row" (another recorder's token differs).

    Snapshots of one ``conversation`` (the recorder names it by session and stage kind) form a
    chain: each row appends to the chain's log only the conversation entries that are new, and
    names the part of the log it sent and the part its window left out (see ``tracer._schema``).
    ``chains=False`` stores every snapshot whole.
    """

    def __init__(
        self, sent: Mapping[str, str], stored_hash: Callable[[Item, Bundle | StageRows], str], *, chains: bool = True
    ) -> None:
        self._sent = sent  # item hash -> stored hash, for items already handed to the writer
        self._stored_hash = stored_hash  # adds a new item's row to a bundle; returns its stored hash
        self._token = object()
        self._chaining = chains
        self._chains: OrderedDict[str, _ChainEnd] = OrderedDict()  # conversation -> its chain's end
        self._lock = threading.Lock()

    def add(
        self,
        bundle: Bundle | StageRows,
        run_id: str,
        stage_id: str,
        items: Sequence[ContextItem],
        dropped: Sequence[tuple[ContextItem, str]],
        conversation: str | None = None,
    ) -> Recorded | None:
        """A stage's snapshot (``items`` sent, then ``dropped`` with why) into ``bundle``: one
        ``fp_snapshot`` row, or (a value holding a separator) ``fp_entry`` rows one by one.

        What the window left out grows with the conversation, and most of it is what the chain's
        last row left out: those entries are not packed again (see :meth:`_left_in_log`). A
        :class:`LeftOut` may name that part by the receipt this returned for an earlier row
        (:class:`Recorded`) instead of holding its items; the rows are the same. Returns the
        receipt of what this row left out, when it is a part of the chain's log for one reason.
        """
        packed = self._packed(items, bundle)
        if not dropped and self._chaining and "" not in packed:  # the usual case: nothing left out
            head, end = _split(items)
            with self._lock:
                row, added = self._place(conversation or run_id, stage_id, packed[head:end], [], [], None)
            self._add_row(bundle, run_id, stage_id, packed, row, added, head, end, [], [])
            return None
        recorded = dropped.recorded if isinstance(dropped, LeftOut) else None
        if recorded is not None and not self.issued(recorded):
            raise ValueError(f"stage {stage_id}: {recorded!r} was issued by another recorder")
        if isinstance(dropped, LeftOut):  # runs of items left out for one reason: no pair per item
            left_items, why = dropped.items(), dropped.reasons()
        else:
            left_items = list(map(_first, dropped)) if dropped else []
            why = list(dict.fromkeys(map(_second, dropped))) if dropped else []
        unpackable = any(r == "" or _holds_separator(r) for r in why)
        key = conversation or run_id
        one_reason = why[0] if len(why) == 1 else None
        if not unpackable and "" not in packed and self._chaining and one_reason is not None:
            with self._lock:
                placed = self._place_sliding(key, stage_id, items, packed, left_items, one_reason, bundle, recorded)
                receipt = self._issued(key, stage_id)
            if placed is not None:
                self._add_row(bundle, run_id, stage_id, packed, *placed, [], [])
                return receipt
        named = recorded.entries() if recorded is not None else []
        left = [*named, *self._packed(left_items, bundle)]
        reasons = [recorded.reason] * recorded.count if recorded is not None else []
        reasons += [reason for _, reason in dropped] if dropped else []
        if unpackable or "" in packed or "" in left:
            with self._lock:
                self._chains.pop(key, None)
            origins: dict[str, Origin] = {}
            entries = [(self._sent.get(ci.item.hash) or self._stored_hash(ci.item, bundle), ci.origin) for ci in items]
            entries += [unpack_entry(e, origins) for e in named]
            entries += [(self._sent.get(ci.item.hash) or self._stored_hash(ci.item, bundle), ci.origin)
                        for ci in left_items]
            for position, (item_hash, o) in enumerate(entries):  # a value holds a separator: rows one by one
                included = position < len(items)
                reason = None if included else reasons[position - len(items)]
                bundle.add("fp_entry", (run_id, stage_id, position, item_hash, o.kind, o.run_id, o.stage_id, o.source,
                                        included, reason))
            return None
        if not self._chaining:  # whole, as schema 2 stored every snapshot
            flags = "1" * len(items) + "0" * len(left)
            packed_dropped = ENTRY_SEP.join([FIELD_NULL] * len(items) + reasons) if left else ""
            bundle.add("fp_snapshot", (run_id, stage_id, ENTRY_SEP.join([*packed, *left]), flags, packed_dropped,
                                       stage_id, 0, 0, 0, len(packed) + len(left), 0, 0, 0, 0, None))
            return None
        head, end = _split(items)
        with self._lock:
            row, added = self._place(key, stage_id, packed[head:end], left, None if recorded else left_items,
                                     one_reason, recorded)
            receipt = self._issued(key, stage_id)
        self._add_row(bundle, run_id, stage_id, packed, row, added, head, end,
                      left if row[6] is None else [], reasons)
        return receipt

    def issued(self, receipt: Recorded) -> bool:
        """True when this packer issued ``receipt`` (only its own receipts name its rows' entries)."""
        return receipt._token is self._token

    def _issued(self, key: str, stage_id: str) -> Recorded | None:
        end = self._chains.get(key)
        receipt = end.receipt if end is not None else None
        return receipt if receipt is not None and receipt.stage_id == stage_id else None

    def _add_row(
        self, bundle: Bundle | StageRows, run_id: str, stage_id: str, packed: list[str], row: ChainRow,
        added: list[str], head: int, end: int, explicit: list[str], reasons: list[str],
    ) -> None:
        """The ``fp_snapshot`` row: the prompt, what it appends to the log, the tools and settings, and
        what it left out when that is not a part of the log (``explicit``, each left out by ``reasons``)."""
        chain, link, log_start, low, drop_low, drop_high, drop_reason = row
        rest = len(packed) - end
        if explicit:
            own = packed[:head] + added + packed[end:] + explicit
            sent = len(own) - len(explicit)
            flags = "1" * sent + "0" * len(explicit)
            packed_dropped = ENTRY_SEP.join([FIELD_NULL] * sent + reasons)
            rest += len(explicit)
        else:
            # a new chain appends its whole conversation: its own entries are all it sent
            own = packed if len(added) == end - head else packed[:head] + added + packed[end:]
            flags, packed_dropped = "1" * len(own), ""
        bundle.add("fp_snapshot", (run_id, stage_id, ENTRY_SEP.join(own), flags, packed_dropped, chain, link,
                                   head, len(added), rest, log_start, low, drop_low, drop_high, drop_reason))

    def _place_sliding(
        self, key: str, stage_id: str, items: Sequence[ContextItem], packed: list[str], left_items: list[ContextItem],
        reason: str, bundle: Bundle | StageRows, recorded: Recorded | None,
    ) -> tuple[ChainRow, list[str], int, int] | None:
        """The row of a snapshot that continues its conversation's chain and left out, for one
        reason, a part of the chain's log found without packing again what the last row left out
        (the usual case: the window slid forward); None when it is not that case (:meth:`_place`
        then does it the long way, to the same effect)."""
        end = self._chains.get(key)
        if end is None or stage_id <= end.stage_id or end.left_by is None or end.left_by != reason:
            return None
        head, stop = _split(items)
        middle = packed[head:stop]
        i = _continues(middle, end.log, end.low)
        if i < 0:
            return None
        log_start, low, added = _extend(end, middle, i)
        at, remembered_at, remembered, count, base = self._left_in_log(end, left_items, bundle, recorded)
        if at < 0:
            del end.log[log_start:]  # as it was: _place links the row
            return None
        self._link(key, end, stage_id, low)
        self._remember_left(end, remembered, count, remembered_at, reason, base, stage_id)
        length = len(left_items) + (recorded.count if recorded is not None else 0)
        return (end.chain, end.link, log_start, low, at, at + length, reason), added, head, stop

    def _left_in_log(
        self, end: _ChainEnd, left_items: list[ContextItem], bundle: Bundle | StageRows, recorded: Recorded | None,
    ) -> tuple[int, int, list[ContextItem] | None, int, Recorded | None]:
        """Where the left-out list (what ``recorded`` names, then ``left_items``) lies in the chain's
        log (-1 when not found cheaply), and the part of the log left out to remember for the next
        row: where it starts, its items (None: not all at hand), its length and the receipt it was
        checked to continue (see :class:`Recorded`).

        The last rows left out ``end.left_count`` entries from ``end.left_at`` on. When this one's
        list begins with them — named by their receipt, or the very items the last row was handed
        (the last one the same object: an edit, a rewind or a reload from a store makes new ones) —
        only the rest is packed and compared with the log after them. Else (the list is what fell
        out since the last one's, see ``dropped_since``) it is looked for right after the last
        one's, and what is remembered is both lists: the next run lists the whole of it again, and
        finds it so without packing it again.
        """
        previous, kept = end.left, end.left_count
        remembered: list[ContextItem] | None
        if recorded is not None:
            if recorded is not end.receipt:
                return -1, 0, None, 0, None
            at, rest = end.left_at, left_items
            remembered_at, remembered, base = at, None, recorded
        # (one comparison in C, of the same objects mostly; equal items pack to the same entries)
        elif previous is not None and len(left_items) >= kept and left_items[kept - 1] is previous[-1] \
                and left_items[:kept] == previous:
            at, rest = end.left_at, left_items[kept:]
            remembered_at, remembered, base = at, left_items, None
        else:
            at, rest = end.left_at + kept, left_items
            remembered_at, base = end.left_at, end.receipt
            remembered = None if previous is None else [*previous, *left_items]
            kept = 0
        new = self._packed(rest, bundle)
        if "" in new or end.log[at + kept:at + kept + len(new)] != new:
            return -1, 0, None, 0, None
        count = end.left_count + len(rest)
        return at, remembered_at, remembered, count, base

    def _remember_left(
        self, end: _ChainEnd, left_items: list[ContextItem] | None, count: int, at: int, reason: str | None,
        base: Recorded | None, stage_id: str,
    ) -> None:
        """Keep what a row left out (``count`` entries of the log from ``at``, for ``reason``; its items
        when at hand) for the next row, with a receipt naming it."""
        if reason is None or at < 0 or not count:
            end.left, end.left_count, end.left_at, end.left_by, end.receipt = None, 0, 0, None, None
        else:
            end.left, end.left_count, end.left_at, end.left_by = left_items, count, at, reason
            end.receipt = Recorded(count, reason, base, stage_id, self._token, end.log, at)

    def _place(
        self, key: str, stage_id: str, middle: list[str], left: list[str], left_items: list[ContextItem] | None,
        one_reason: str | None, recorded: Recorded | None = None,
    ) -> tuple[ChainRow, list[str]]:
        """The chain row of a snapshot whose conversation part is ``middle`` and which left ``left``
        out, and the entries it appends to the chain's log.

        It links to its conversation's chain when ``middle`` continues the last snapshot's (see
        :func:`_continues`) and it comes after it (stage ids sort by time, so a chain's rows lie
        between its first stage id and its last); else it starts a chain of its own. What it left
        out, when it all was left out for one reason and lies in the log (the window slid past it),
        is named as a part of the log; else it is stored in the row.
        """
        chains = self._chains
        end = chains.get(key)
        if end is not None and stage_id > end.stage_id:
            i = _continues(middle, end.log, end.low)
            if i >= 0:
                log_start, low, added = _extend(end, middle, i)
                self._link(key, end, stage_id, low)
                if one_reason is None:
                    if left:  # (several reasons: not a part of the log)
                        self._remember_left(end, None, 0, -1, None, None, stage_id)
                    # else it left nothing out (a call after a tool's that nothing more fell out of):
                    # what the rows before it left out still lies in the log (it only grows), and
                    # the next run's list begins with it
                    return (end.chain, end.link, log_start, low, 0, 0, None), added
                at = _find(end.log, left)
                self._remember_left(end, left_items, len(left), at, one_reason, recorded, stage_id)
                row = (end.chain, end.link, log_start, low, *((at, at + len(left), one_reason) if at >= 0 else (0, 0, None)))
                return row, added
        # a chain of its own: its log is what it left out (when for one reason), then its conversation
        in_log = left if one_reason is not None else []
        log = [*in_log, *middle]
        if end is None:
            end = chains[key] = _ChainEnd(stage_id, 0, stage_id, log, len(in_log))
            if len(chains) > _CHAINS_KEPT:
                chains.popitem(last=False)
        else:  # the conversation's last chain ends here: its end is this one's (a tool's every call)
            end.chain, end.link, end.stage_id, end.log, end.low = stage_id, 0, stage_id, log, len(in_log)
            chains.move_to_end(key)
        self._remember_left(end, left_items, len(left), 0 if in_log else -1, one_reason, recorded, stage_id)
        if not in_log:
            return (stage_id, 0, 0, 0, 0, 0, None), middle  # (not the log: it grows under the next call)
        return (stage_id, 0, 0, len(in_log), 0, len(in_log), one_reason), log[:]

    def _link(self, key: str, end: _ChainEnd, stage_id: str, low: int) -> None:
        """Make stage ``stage_id``'s row, whose conversation is ``end.log[low:]``, its chain's end."""
        end.link += 1
        end.stage_id = stage_id
        end.low = low
        self._chains.move_to_end(key)

    def _packed(self, items: Sequence[ContextItem], bundle: Bundle | StageRows) -> list[str]:
        """The packed entries of ``items``: each kept on its item once packed (see :meth:`_entry`)."""
        token = self._token
        return [ci._entry if ci._packer is token else self._entry(ci, bundle) for ci in items]

    def _entry(self, ci: ContextItem, bundle: Bundle | StageRows) -> str:
        """The packed entry of ``ci`` (its item's row joins ``bundle`` if not sent yet), kept on it;
        "" when a value holds a separator."""
        item_hash = self._sent.get(ci.item.hash) or self._stored_hash(ci.item, bundle)
        origin = ci.origin._packed or _pack_origin(ci.origin)
        if not origin or (not item_hash.isprintable() and _holds_separator(item_hash)):
            return ""
        entry = f"{item_hash}{FIELD_SEP}{origin}"
        object.__setattr__(ci, "_entry", entry)
        object.__setattr__(ci, "_packer", self._token)
        return entry


# ---------------------------------------------------------------------- reading packed rows back


def unpack_edges(run_id: str, dst: str, packed: str) -> list[Edge]:
    """The edges packed in stage ``dst``'s row (``fp_stage.edges``)."""
    if not packed:
        return []
    return [Edge(run_id, src, dst, kind) for src, _, kind in (e.partition(FIELD_SEP) for e in packed.split(ENTRY_SEP))]


def unpack_hashes(packed: str) -> list[str]:
    """The output hashes packed in a stage's row (``fp_stage.outputs``)."""
    return packed.split(ENTRY_SEP) if packed else []


def unpack_entry(entry: str, origins: dict[str, Origin]) -> tuple[str, Origin]:
    """One packed entry as (item hash, origin); ``origins`` interns the origins read so far (a
    conversation's items come from few places), and each keeps its packed form."""
    item_hash, _, packed = entry.partition(FIELD_SEP)
    origin = origins.get(packed)
    if origin is None:
        kind, run, stage, source = (None if v == FIELD_NULL else v for v in packed.split(FIELD_SEP))
        origin = origins[packed] = Origin(kind or "", run, stage, source)
        object.__setattr__(origin, "_packed", packed)
    return item_hash, origin


def unpack_snapshot(
    entries: str, flags: str, dropped: str, origins: dict[str, Origin], *, head: int = 0, added: int = 0,
    sent: Sequence[tuple[str, Origin]] = (), left: Sequence[tuple[str, Origin]] = (), left_by: str | None = None,
) -> list[SnapshotEntry]:
    """The entries of a packed ``fp_snapshot`` row: its first ``head`` entries, the conversation it
    sent (``sent``: its part of the chain's log, which holds the ``added`` entries after its head),
    its remaining entries, then what its window left out (``left``, each left out by ``left_by``)
    when that is a part of the log (see ``tracer._schema``)."""
    own = entries.split(ENTRY_SEP) if entries else []
    reasons = dropped.split(ENTRY_SEP) if dropped else None
    out: list[SnapshotEntry] = []
    for at in [*range(head), -1, *range(head + added, len(own))]:
        if at < 0:  # the conversation, from the chain's log
            base = len(out)
            out.extend([SnapshotEntry(base + n, h, o) for n, (h, o) in enumerate(sent)])
            continue
        item_hash, origin = unpack_entry(own[at], origins)
        reason = None if reasons is None or reasons[at] == FIELD_NULL else reasons[at]
        out.append(SnapshotEntry(len(out), item_hash, origin, flags[at] == "1", reason))
    base = len(out)
    out.extend([SnapshotEntry(base + n, h, o, False, left_by) for n, (h, o) in enumerate(left)])
    return out

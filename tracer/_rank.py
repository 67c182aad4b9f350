"""Ranking `why`'s suspects: which items does the answer rest on most?

The walk (:mod:`._why`) lists every item that reached the answer, in the order the context was
built. :func:`rank` orders them by signals the store holds, each one a reason a reader can check:

* **what the answer asserts**: the numbers, dates and names in the answer, and which items hold
  them; a value few items hold says more than one many hold;
* **text shared** with the answer (words weighted the same way: rare ones count more);
* **the chain**: a tool result the answer draws on lends weight to what its call's arguments
  asserted, so the item the model took a wrong argument from ranks too;
* **produced in this run** by a tool or by the model;
* **recency**: later in the context;
* **earlier verdicts**, when the caller has them (a counterfactual that flipped or held).

Scores are comparable within one ranking only.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._records import ItemKind, Origin
from ._why import Evidence, EvidenceNode

if TYPE_CHECKING:
    from ._store import Store

_NUMBER = re.compile(r"\d+(?:[.,:/-]\d+)*")
_NAME = re.compile(r"\b[A-Z][a-zA-Z]+(?:[-'][A-Za-z]+)*\b")
_WORD = re.compile(r"[a-z0-9]+(?:['-][a-z0-9]+)*")
_STOP = frozenset(
    "a an and are as at be been but by can could did do does for from had has have he her his how i if in into is "
    "it its just me my no not of on or our she so than that the their them then there these they this to too us "
    "was we were what when where which who will with would you your yes ok okay".split()
)
_NOT_RANKED = (ItemKind.SETTINGS,)


@dataclass
class RankedItem:
    """One suspect with its score, the reasons for it, and its place in the context order."""

    item_hash: str
    kind: str
    text: str
    origin: Origin
    run_id: str | None  # the run whose model was sent the item
    position: int  # 0-based, in `why`'s (context) order
    score: float = 0.0
    reasons: list[str] = field(default_factory=list)
    name: str = ""

    def to_dict(self, texts: dict[str, str] | None = None) -> dict[str, Any]:
        """A JSON-ready form. With ``texts``, the text goes there under the item's hash (once),
        not into the entry (see :meth:`tracer.Evidence.to_dict`)."""
        out: dict[str, Any] = {"item_hash": self.item_hash, "name": self.name, "kind": self.kind}
        if texts is None:
            out["text"] = self.text
        else:
            texts.setdefault(self.item_hash, self.text)
        out.update(run_id=self.run_id, position=self.position, score=round(self.score, 4), reasons=self.reasons,
                   origin={"kind": self.origin.kind, "run_id": self.origin.run_id, "stage_id": self.origin.stage_id,
                           "source": self.origin.source})
        return out


def _values(text: str) -> set[str]:
    """The numbers, dates and names a text asserts (lower-cased)."""
    found = {m.group(0).strip(".,:/-") for m in _NUMBER.finditer(text)}
    found |= {m.group(0).lower() for m in _NAME.finditer(text)} - _STOP
    return {v for v in found if v}


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in _STOP}


def _candidates(evidence: Evidence) -> list[tuple[EvidenceNode, str | None]]:
    """Each item node once (first mention), with the run whose inference sent it; the answer excluded.

    An item the answer's own run sent to its model (a tool definition, the settings, a message of the
    history) is this run's, wherever the walk first met it: it comes after the history in the context,
    and the walk reaches it first through an earlier run's inference."""
    root = evidence.root
    out: list[tuple[EvidenceNode, str | None]] = []
    seen = {root.item_hash}
    sent_here = {item.item_hash for _, stage in root.walk()
                 if stage.node == "stage" and stage.stage_kind == "inference" and stage.run_id == root.run_id
                 for item in stage.children if item.node == "item"}

    def walk(node: EvidenceNode, sent_in: str | None) -> None:
        for child in node.children:
            if child.node == "stage":
                walk(child, child.run_id if child.stage_kind == "inference" else sent_in)
            elif child.node == "item" and not child.seen:  # the same content from another origin: listed once
                if child.item_hash not in seen:
                    seen.add(child.item_hash)
                    out.append((child, root.run_id if child.item_hash in sent_here else sent_in))
                walk(child, sent_in)

    walk(root, root.run_id)
    return out


def rank(evidence: Evidence, *, verdicts: Mapping[str, str] | None = None,
         names: Mapping[str, str] | None = None) -> list[RankedItem]:
    """`why`'s items, most likely to carry the answer first (see the module docstring).

    ``verdicts`` (item hash -> flips / holds / inconclusive) are earlier counterfactual verdicts;
    ``names`` (item hash -> human name) label the items.
    """
    answer = evidence.root.text or ""
    run_id = evidence.root.run_id
    nodes = [(n, r) for n, r in _candidates(evidence) if n.item_kind not in _NOT_RANKED]
    texts = [n.text or "" for n, _ in nodes]
    values = [_values(t) for t in texts]
    words = [_words(t) for t in texts]
    asserted = _values(answer)
    said = _words(answer)
    value_df = Counter(v for vs in values for v in vs)
    word_df = Counter(w for ws in words for w in ws)
    total = max(1, len(nodes))

    def idf(df: int) -> float:
        return math.log(1 + total / max(1, df))

    ranked = []
    for position, ((node, sent_in), held, shared) in enumerate(zip(nodes, values, words, strict=True)):
        origin = node.origin or Origin("stage")
        item = RankedItem(node.item_hash or "", node.item_kind or "?", node.text or "", origin, sent_in, position,
                          name=(names or {}).get(node.item_hash or "", ""))
        hits = sorted(asserted & held)
        if hits:
            weight = sum(2.0 * idf(value_df[v]) for v in hits)
            item.score += weight
            shown = ", ".join(repr(v) for v in hits[:4])
            held_by = min(value_df[v] for v in hits)
            item.reasons.append(f"holds {shown}, which the answer asserts (held by {held_by} item"
                                f"{'s' if held_by != 1 else ''})")
        common = sorted((said & shared) - set(hits), key=lambda w: -idf(word_df[w]))
        if common:
            item.score += 0.5 * sum(idf(word_df[w]) for w in common) / math.sqrt(max(1, len(shared)) / 4 + 1)
            item.reasons.append(f"shares {', '.join(repr(w) for w in common[:4])} with the answer")
        produced = origin.kind == "stage" and origin.run_id == run_id
        if produced and item.kind == ItemKind.TOOL_RESULT:
            item.score += 0.6
            item.reasons.append("a tool result of this run")
        elif produced and item.kind in (ItemKind.ASSISTANT, ItemKind.TOOL_CALL):
            item.score += 0.3
            item.reasons.append("written by the model in this run")
        if sent_in is not None and sent_in != run_id:
            item.score *= 0.5
            item.reasons.append(f"sent only to an earlier run ({sent_in})")
        ranked.append(item)
    _chain(evidence, ranked, values, asserted, value_df, idf)
    if ranked:
        last = max(1, len(ranked) - 1)
        for item in ranked:
            bonus = 0.3 * item.position / last
            item.score += bonus
            if bonus >= 0.2:
                item.reasons.append("late in the context")
    for item in ranked:
        verdict = (verdicts or {}).get(item.item_hash)
        if verdict == "flips":
            item.score += 10.0
            item.reasons.append("an earlier counterfactual flipped the answer without it")
        elif verdict == "holds":
            item.score -= 5.0
            item.reasons.append("an earlier counterfactual held without it")
    return sorted(ranked, key=lambda i: (-i.score, i.position))


def _calls_of(evidence: Evidence) -> dict[str, str]:
    """Tool result hash -> the hash of the call that fetched it (the tool stage's input, in the walk)."""
    out: dict[str, str] = {}
    for _, node in evidence.root.walk():
        if node.node != "item" or node.item_kind != ItemKind.TOOL_RESULT or not node.item_hash:
            continue
        for stage in node.children:
            if stage.node == "stage" and stage.stage_kind == "tool":
                call = next((c.item_hash for c in stage.children if c.item_kind == ItemKind.TOOL_CALL), None)
                if call:
                    out.setdefault(node.item_hash, call)
    return out


def _chain(evidence: Evidence, ranked: list[RankedItem], values: list[set[str]], asserted: set[str],
           value_df: Counter[str], idf: Any) -> None:
    """Lend weight through tool calls. The arguments of a call whose result the answer draws on came
    from somewhere: an item that holds one of them explains the call, the more so when it also shares
    the question's words (the question is what the model was answering when it made the call)."""
    calls = _calls_of(evidence)
    index = {item.item_hash: idx for idx, item in enumerate(ranked)}
    lent: set[str] = set()
    for idx, item in enumerate(ranked):
        call = calls.get(item.item_hash)
        if call is None or not asserted & values[idx]:
            continue
        call_text = next((n.text for _, n in evidence.root.walk() if n.item_hash == call and n.text), "")
        lent |= _values(call_text.partition("(")[2])
        if call in index:
            ranked[index[call]].score += 1.0
            ranked[index[call]].reasons.append("the call that fetched a result the answer draws on")
    if not lent:
        return
    asking = next((i for i in ranked if i.kind == ItemKind.USER and i.origin.kind == "user"
                   and i.origin.run_id == evidence.root.run_id), None)
    asked = _bridge_words(asking.text) if asking is not None else set()
    bridge_df = Counter(w for item in ranked for w in _bridge_words(item.text))
    for idx, item in enumerate(ranked):
        if item is asking or item.kind == ItemKind.TOOL_CALL or item.item_hash in calls:
            continue
        hits = sorted(lent & values[idx])
        if not hits:
            continue
        shared = sorted(asked & _bridge_words(item.text), key=lambda w: -idf(bridge_df[w]))
        bridge = sum(idf(bridge_df[w]) for w in shared)
        item.score += sum(idf(value_df[v]) for v in hits) * (1 + bridge) / 2
        reason = f"holds {', '.join(repr(v) for v in hits[:3])}, an argument of a call whose result the answer draws on"
        if shared:
            reason += f", and shares {', '.join(repr(w) for w in shared[:3])} with the question"
        item.reasons.append(reason)


#: Words that say whose or where (my depot, our office, at home): they tie a question to what answers it.
_REFERRING = frozenset("my our your their his her its me us home here mine ours yours".split())


def _bridge_words(text: str) -> set[str]:
    return _words(text) | (set(_WORD.findall(text.lower())) & _REFERRING)


def earlier_verdicts(store: Store, run_id: str) -> dict[str, str]:
    """Item hash -> the verdict of the counterfactuals already recorded for ``run_id`` that edited that
    item alone: ``flips`` when two thirds of them answered differently, ``holds`` when none did."""
    original = store.query("SELECT output FROM fp_run WHERE id = ?", [run_id])
    if not original:
        return {}
    rows = store.query("SELECT fork_edit, output FROM fp_run WHERE forked_from_run = ? AND fork_edit IS NOT NULL",
                       [run_id])
    tally: dict[str, list[bool]] = {}
    for edit_json, output in rows:
        try:
            edits = json.loads(edit_json).get("edits") or []
        except (ValueError, AttributeError):
            continue
        if len(edits) == 1 and isinstance(edits[0], dict) and edits[0].get("item"):
            tally.setdefault(str(edits[0]["item"]), []).append(output != original[0][0])
    out = {}
    for item, changed in tally.items():
        if 3 * sum(changed) >= 2 * len(changed):
            out[item] = "flips"
        elif not any(changed):
            out[item] = "holds"
    return out


def ranked_names(items: Iterable[RankedItem]) -> list[str]:
    """The names (or short hashes) of ranked items, in order: for messages and tests."""
    return [i.name or i.item_hash[:12] for i in items]

"""Snapshot chains (tracer._rows, tracer._schema): a conversation's next snapshot stores only what it adds.

Every test records through the real recorder and reads back through both readers, the store's
(``load_run``) and the SQL view (``fp_entries``), against the snapshot the recorder was handed.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracer import ContextItem, Item, LeftOut, Origin, Recorded, Recorder, Store
from tracer._journal import decode_bundle, encode_bundle
from tracer._rows import SnapshotPacker
from tracer._schema import SCHEMA_VERSION
from tracer._writer import StageRows

Expected = list[tuple[str, str, str | None, str | None, str | None, bool, str | None]]


def _expected(items: list[ContextItem], dropped: list[tuple[ContextItem, str]]) -> Expected:
    return ([(ci.item.hash, ci.origin.kind, ci.origin.run_id, ci.origin.stage_id, ci.origin.source, True, None)
             for ci in items]
            + [(ci.item.hash, ci.origin.kind, ci.origin.run_id, ci.origin.stage_id, ci.origin.source, False, why)
               for ci, why in dropped])


def _assert_read_back(store: Store, sent: dict[str, tuple[str, Expected]]) -> None:
    """Both readers give every stage's snapshot as it was sent, numbered from 0."""
    by_run: dict[str, list[str]] = {}
    for stage_id, (run_id, _) in sent.items():
        by_run.setdefault(run_id, []).append(stage_id)
    read = {}
    for run_id, stage_ids in by_run.items():
        read.update(store.load_snapshots(run_id, stage_ids)[0])
    view: dict[str, list[tuple[object, ...]]] = {}
    for r in store.query(
        "SELECT stage_id, item_hash, origin_kind, origin_run, origin_stage, origin_source, included, dropped_by, "
        "position FROM fp_entries WHERE stage_id IN (SELECT unnest(?)) ORDER BY stage_id, position", [list(sent)],
    ):
        view.setdefault(r[0], []).append(tuple(r[1:]))
    for stage_id, (_, want) in sent.items():
        got = read.get(stage_id, [])
        assert [(e.item_hash, e.origin.kind, e.origin.run_id, e.origin.stage_id, e.origin.source, e.included,
                 e.dropped_by) for e in got] == want, stage_id
        assert [e.position for e in got] == list(range(len(want)))
        assert [r[:7] for r in view.get(stage_id, [])] == want, stage_id
        assert [r[7] for r in view.get(stage_id, [])] == list(range(len(want)))


def _stored_entries(store: Store) -> int:
    """Entries the snapshot rows hold (what recording them cost), not what they stand for."""
    return int(store.query(
        "SELECT coalesce(sum(CASE WHEN entries = '' THEN 0 ELSE len(string_split(entries, chr(31))) END), 0) "
        "FROM fp_snapshot")[0][0])


class _Session:
    """A session's turns as an agent sends them: the prompt composed again each run, a window over
    the conversation (what fell out before it left out by ``memory_window``), the tools offered after."""

    def __init__(self, recorder: Recorder, name: str) -> None:
        self.recorder, self.name = recorder, name
        self.messages: list[ContextItem] = []
        self.sent: dict[str, tuple[str, Expected]] = {}

    def turn(self, text: str, *, window: int | None, tool: bool = False, dropped_by: str = "memory_window",
             extra_dropped: list[tuple[ContextItem, str]] | None = None, left_from: int = 0,
             since: bool = False) -> None:
        """One run; ``since``: a tool turn's second call lists only what fell out since its first
        (as the agent's loop does, naming the first by ``dropped_since``)."""
        run = self.recorder.start_run(agent="a", input=text, session_id=self.name)
        with run.stage("prompt", "compose") as prompt:
            system = [prompt.output(Item.of_text("prompt_section", "be brief"), origin_kind="prompt_section",
                                    source="base")]
        with run.stage("input", "user") as given_input:
            self.messages.append(given_input.output(Item.of_text("user", text), origin_kind="user", source="input"))
        tail = [ContextItem(Item.of_text("tool_definition", "lookup"), Origin("config", source="tool:lookup"))]
        calls = 2 if tool else 1
        left_before = 0  # where the run's last call's window began
        for call in range(calls):
            start = 0 if window is None else max(0, len(self.messages) - window)
            items = [*system, *self.messages[start:], *tail]
            dropped = [(m, dropped_by) for m in self.messages[left_from:start]] + (extra_dropped or [])
            if since and call:
                dropped = [(m, dropped_by) for m in self.messages[left_before:start]]
            left_before = start
            with run.stage("inference", f"call {call}") as inference:
                inference.inputs(items, dropped=dropped)
                if tool and call == 0:
                    self.messages.append(inference.output(Item("tool_call", {"id": "c", "name": "lookup",
                                                                             "arguments": "{}"})))
                    self.messages.append(ContextItem(Item("tool_result", {"call_id": "c", "name": "lookup",
                                                                           "content": text, "is_error": False}),
                                                     Origin("stage", run.id, inference.id)))
                else:
                    self.messages.append(inference.output(Item.of_text("assistant", f"re: {text}")))
            self.sent[inference.id] = (run.id, _expected(items, dropped))
        run.end("answered", output=f"re: {text}")


def test_a_long_session_stores_what_each_turn_adds_and_reads_back_whole(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.duckdb")
    session = _Session(Recorder(store), "long")
    for turn in range(60):
        session.turn(f"turn {turn}", window=None, tool=turn % 3 == 2)
    store.flush()
    first = _stored_entries(store)
    for turn in range(60, 240):  # the window (40 messages) slides from here on
        session.turn(f"turn {turn}", window=40, tool=turn % 3 == 2)
    store.flush()
    stages = list(session.sent)
    _assert_read_back(store, {s: session.sent[s] for s in stages[::12] + stages[-4:]})  # (a whole read is slow)
    calls = len(session.sent)
    sent = sum(len(want) for _, want in session.sent.values())
    stored = _stored_entries(store)
    # every snapshot whole would be `sent` (over 20,000 entries; the left-out part grows with the
    # session); a chain stores the prompt, the new messages and the tools: a handful per call
    assert sent > 20_000
    assert stored - first <= 6 * (calls - 80), (stored, first, calls)
    store.close()


def test_a_snapshot_that_does_not_continue_the_last_starts_a_chain_and_reads_back(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.duckdb")
    recorder = Recorder(store)
    session = _Session(recorder, "s")
    for turn in range(12):
        session.turn(f"turn {turn}", window=6)
    del session.messages[3:]  # a rewind: the conversation is cut back
    session.turn("after the cut", window=6)
    session.turn("left out by a cap", window=3, dropped_by="prompt_cap")  # not what the chain's log holds
    odd = ContextItem(Item.of_text("user", "odd"), Origin("file", source="notes\x1fv2.txt"))  # stored row by row
    session.turn("with an odd one", window=4, extra_dropped=[(odd, "cap")])
    session.turn("back to normal", window=4)
    other = _Session(recorder, "other")  # interleaved with a second session
    for turn in range(5):
        other.turn(f"o{turn}", window=2)
        session.turn(f"s{turn}", window=5, tool=True)
    store.flush()
    _assert_read_back(store, {**session.sent, **other.sent})
    store.close()
    reopened = Store.open(tmp_path / "s.duckdb", read_only=True)  # what another process reads
    _assert_read_back(reopened, {**session.sent, **other.sent})
    reopened.close()


def test_a_window_sliding_on_is_told_from_an_edit_a_reload_and_a_list_of_what_fell_out_since(tmp_path: Path) -> None:
    """What the window left out is named as a part of the chain's log without packing the last row's
    list again when it begins with the very items the last row left out; an edit inside that list,
    the same messages loaded again (new objects), a list of only what fell out since the last call
    (``dropped_since``) and one that lets a message back in each read back as they were sent."""
    store = Store.open(tmp_path / "s.duckdb")
    session = _Session(Recorder(store), "s")
    for turn in range(30):
        session.turn(f"turn {turn}", window=8, tool=turn % 4 == 3)
    store.flush()
    stored = _stored_entries(store)
    for turn in range(30, 40):  # sliding on: what is left out costs no entries, only what is new does
        session.turn(f"turn {turn}", window=8)
    store.flush()
    assert _stored_entries(store) - stored <= 10 * 5
    # an edit in the middle of what was left out: the last item is the same object, the list is not
    session.messages[5] = ContextItem(Item.of_text("user", "edited"), session.messages[5].origin)
    session.turn("after an edit", window=8)
    session.turn("and on", window=8)
    # the same conversation loaded again (as from a session store): equal items, new objects
    session.messages = [ContextItem(m.item, m.origin) for m in session.messages]
    session.turn("after a reload", window=8)
    session.turn("and on again", window=8)
    # only what fell out since the last call is listed (the rest is named by dropped_since)
    start = len(session.messages) - 8
    session.turn("since", window=8, left_from=start)
    session.turn("since again", window=8, left_from=start + 1)
    session.turn("a message let back in", window=12)
    session.turn("whole again", window=8)
    store.flush()
    _assert_read_back(store, session.sent)
    store.close()


def test_a_run_after_a_tool_turn_packs_only_what_is_new_however_long_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A tool turn's second call lists only what fell out since its first, or nothing; the next run
    lists the whole of what the window left out again. It is found in the chain's log by identity,
    not packed again: the entries packed per turn do not grow with the session (they did: every run
    after a tool turn packed and searched the whole left-out history)."""
    packed: list[int] = []
    pack = SnapshotPacker._packed

    def counted(self: SnapshotPacker, items: Sequence[ContextItem], bundle: Any) -> list[str]:
        packed.append(len(items))
        return pack(self, items, bundle)

    monkeypatch.setattr(SnapshotPacker, "_packed", counted)
    store = Store.open(tmp_path / "s.duckdb")
    session = _Session(Recorder(store), "s")
    per_turn: list[int] = []
    for turn in range(240):
        before = sum(packed)
        # every third turn calls a tool; the window holds 10 messages, so a tool's call and result
        # push some out between a tool turn's two calls in some turns and none in others
        session.turn(f"turn {turn}", window=10 + turn % 2, tool=turn % 3 == 2, since=True)
        per_turn.append(sum(packed) - before)
    store.flush()
    early, late = per_turn[40:80], per_turn[200:240]
    # a turn packs its prompt, its window and its tools (~16 entries a call): not the ~700 messages left out
    assert max(late) <= max(early) + 4, (max(early), max(late))
    assert sum(late) <= sum(early) + 40, (sum(early), sum(late))
    stages = list(session.sent)
    _assert_read_back(store, {s: session.sent[s] for s in stages[::10] + stages[-6:]})
    store.close()


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.one_of(st.none(), st.integers(1, 8)), st.booleans(),
                          st.sampled_from(["", "", "rewind", "edit", "reload"])), min_size=1, max_size=16))
def test_generated_sessions_read_back_as_they_were_sent(tmp_path_factory: object, turns: list[tuple[int | None, bool, str]]) -> None:
    path = tmp_path_factory.mktemp("chains") / "s.duckdb"  # type: ignore[attr-defined]
    store = Store.open(path)
    session = _Session(Recorder(store), "g")
    for n, (window, tool, change) in enumerate(turns):
        if change == "rewind" and len(session.messages) > 2:
            del session.messages[len(session.messages) // 2:]
        elif change == "edit" and session.messages:  # (what the window left out, most likely)
            session.messages[0] = ContextItem(Item.of_text("user", f"edited {n}"), session.messages[0].origin)
        elif change == "reload":  # the same messages as new objects, as loaded from a store
            session.messages = [ContextItem(m.item, m.origin) for m in session.messages]
        session.turn(f"t{n}", window=window, tool=tool)
    store.flush()
    _assert_read_back(store, session.sent)
    store.close()


def test_a_schema_2_store_is_migrated_and_reads_the_same(tmp_path: Path) -> None:
    """Schema 2 stored every snapshot whole; opening it for writing makes each a chain of its own."""
    path = tmp_path / "s.duckdb"
    store = Store.open(path)
    recorder = Recorder(store)
    recorder._snapshots._chaining = False  # written as schema 2 wrote them: whole
    session = _Session(recorder, "old")
    for turn in range(8):
        session.turn(f"turn {turn}", window=4, tool=turn == 5)
    store.flush()
    store.close()
    con = duckdb.connect(str(path))  # turn the file back into schema 2
    con.execute("DROP VIEW context")
    con.execute("DROP VIEW fp_entries")
    for column in ("chain", "link", "head", "added", "rest", "log_start", "low", "drop_low", "drop_high",
                   "drop_reason"):
        con.execute(f"ALTER TABLE fp_snapshot DROP COLUMN {column}")
    con.execute("UPDATE fp_meta SET value = '2' WHERE key = 'schema_version'")
    con.close()
    store = Store.open(path)
    assert store.query("SELECT value FROM fp_meta WHERE key = 'schema_version'")[0][0] == str(SCHEMA_VERSION)
    _assert_read_back(store, session.sent)
    session.recorder = Recorder(store)  # the migrated store goes on with chains
    for turn in range(8, 20):
        session.turn(f"turn {turn}", window=4)
    store.flush()
    assert store.query("SELECT count(*) FROM fp_snapshot WHERE link > 0")[0][0] > 0
    _assert_read_back(store, session.sent)
    store.close()


def test_a_snapshot_journaled_by_schema_2_is_replayed_whole() -> None:
    rows = StageRows()
    rows.stage = ("s-1", "r-1", 0, "inference", "", "ok", 0.0, 1.0, None, None, None, "", "")
    rows.snapshot = ("r-1", "s-1", "h1\x1buser\x1b\x1a\x1b\x1a\x1b\x1a\x1fh2\x1buser\x1b\x1a\x1b\x1a\x1b\x1a", "11", "")
    again = decode_bundle(encode_bundle(rows))
    assert isinstance(again, StageRows)
    assert again.snapshot == (*rows.snapshot, "s-1", 0, 0, 0, 2, 0, 0, 0, 0, None)


def _held_bytes(objects: list[object]) -> int:
    """What ``objects`` hold, each object reached counted once (strings, dicts, tuples, slots)."""
    seen: set[int] = set()
    total, stack = 0, list(objects)
    while stack:
        o = stack.pop()
        if o is None or isinstance(o, int | float) or id(o) in seen:
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, list | tuple):
            stack.extend(o)
        elif hasattr(type(o), "__slots__") and not isinstance(o, str):
            stack.extend(getattr(o, s, None) for s in type(o).__slots__)
    return total


def test_a_recorded_conversation_holds_little_beyond_its_text(tmp_path: Path) -> None:
    # a standing host keeps each session's conversation; once recorded, a message held its packed
    # origin twice (on the origin, and inside the entry packed on the context item), a kind string
    # of its own and a tuple for the entry: here ~900 bytes beyond its text, now ~715
    store = Store.open(tmp_path / "s.duckdb")
    session = _Session(Recorder(store), "held")
    for turn in range(120):
        session.turn(f"turn {turn}: " + "x" * 1000, window=40, tool=turn % 3 == 2)
    store.flush()
    messages = session.messages
    assert all(m._entry for m in messages[:-2])  # every message sent was packed, and keeps its entry
    text = sum(sys.getsizeof(m.item.body.get("text", m.item.body.get("content", ""))) for m in messages)
    beyond = (_held_bytes(list(messages)) - text) / len(messages)
    assert beyond < 800, beyond
    store.close()


# ---------------------------------------------------------------------- a left-out list named by its receipt


class _Holder:
    """A conversation as a standing host holds it: once a recorded call's window left its first
    messages out and the recorder gave a receipt for them, only the messages after them are held
    (the others are None here: the store has them), and the next call names them by the receipt.

    ``receipts=False`` hands every call its whole list as items (the recorder's other path): both
    must write the same rows."""

    def __init__(self, recorder: Recorder, name: str, *, receipts: bool) -> None:
        self.recorder, self.name, self.receipts = recorder, name, receipts
        self.messages: list[ContextItem | None] = []  # None: not held (the receipt names it)
        self.receipt: Recorded | None = None  # names messages[:receipt.count]
        self.named = 0  # calls that named a receipt
        self.stored: list[ContextItem] = []  # the session store's copy

    def _load(self) -> None:
        """Read the whole conversation back, as new objects (what a host does when it must)."""
        self.messages = [ContextItem(m.item, m.origin) for m in self.stored]
        self.receipt = None

    def rewind(self, keep: int) -> None:
        del self.stored[keep:]
        if self.receipt is not None and keep < self.receipt.count:
            self._load()  # (what the receipt names changed)
        del self.messages[keep:]

    def edit(self, at: int, text: str) -> None:
        origin = self.stored[at].origin
        self.stored[at] = ContextItem(Item.of_text("user", text), origin)
        if self.messages[at] is None:
            self._load()
        self.messages[at] = self.stored[at]

    def reload(self) -> None:
        self._load()

    def _append(self, ci: ContextItem) -> None:
        self.messages.append(ci)
        self.stored.append(ci)

    def _left_out(self, stage: Any, start: int, left_from: int) -> tuple[LeftOut, Recorded | None]:
        receipt = self.receipt
        if left_from or receipt is None or receipt.count > start or not stage.can_name(receipt):
            assert all(m is not None for m in self.messages[left_from:start])
            return LeftOut((self.messages[left_from:start], "memory_window")), None  # type: ignore[arg-type]
        self.named += 1
        return LeftOut((self.messages[receipt.count:start], "memory_window"), recorded=receipt), receipt  # type: ignore[arg-type]

    def _took(self, stage: Any, start: int, given: Recorded | None, before: Recorded | None, since: bool) -> None:
        """Keep the receipt the call's stage got when it names what this holder left out."""
        got = stage.left_receipt
        if got is not None and got.count == start and got.base is (before if since else given):
            self.receipt = got
            if self.receipts:
                self.messages[:start] = [None] * start

    def turn(self, text: str, *, window: int | None, tool: bool, since: bool) -> None:
        run = self.recorder.start_run(agent="a", input=text, session_id=self.name)
        with run.stage("prompt", "compose") as prompt:
            system = [prompt.output(Item.of_text("prompt_section", "be brief"), origin_kind="prompt_section",
                                    source="base")]
        with run.stage("input", "user") as given_input:
            self._append(given_input.output(Item.of_text("user", text), origin_kind="user", source="input"))
        tail = [ContextItem(Item.of_text("tool_definition", "lookup"), Origin("config", source="tool:lookup"))]
        left_before, before = 0, None
        for call in range(2 if tool else 1):
            start = 0 if window is None else max(0, len(self.messages) - window)
            if start < (self.receipt.count if self.receipt is not None else 0):
                self._load()  # the window let back in what is not held
            items = [*system, *self.messages[start:], *tail]
            assert all(m is not None for m in items)
            with run.stage("inference", f"call {call}") as inference:
                fell = since and call and left_before <= start
                if start and self.receipts:
                    dropped, given = self._left_out(inference, start, left_before if fell else 0)
                elif start:
                    dropped = LeftOut((self.messages[left_before if fell else 0:start], "memory_window"))  # type: ignore[arg-type]
                    given = None
                else:
                    dropped, given = LeftOut(), None
                inference.inputs(items, dropped=dropped)  # type: ignore[arg-type]
                if tool and call == 0:
                    self._append(inference.output(Item("tool_call", {"id": "c", "name": "lookup", "arguments": "{}"})))
                    self._append(ContextItem(Item("tool_result", {"call_id": "c", "name": "lookup", "content": text,
                                                                 "is_error": False}), Origin("stage", run.id, inference.id)))
                else:
                    self._append(inference.output(Item.of_text("assistant", f"re: {text}")))
            if start:
                self._took(inference, start, given, before, bool(fell))
            left_before, before = start, self.receipt
        run.end("answered", output=f"re: {text}")


_SNAPSHOT_ROWS = ("SELECT * FROM fp_snapshot ORDER BY stage_id", "SELECT * FROM fp_entry ORDER BY stage_id, position")


def _rows_of(path: Path, turns: list[tuple[int | None, bool, str, bool]], *, receipts: bool,
             monkeypatch: pytest.MonkeyPatch) -> tuple[list[list[tuple[Any, ...]]], int]:
    counter = iter(range(1, 1_000_000))
    monkeypatch.setattr("tracer._recorder.new_id", lambda prefix: f"{prefix}-{next(counter):09d}")
    store = Store.open(path)
    holder = _Holder(Recorder(store), "h", receipts=receipts)
    for n, (window, tool, change, since) in enumerate(turns):
        if change == "rewind" and len(holder.stored) > 2:
            holder.rewind(len(holder.stored) // 2)
        elif change == "edit" and holder.stored:
            holder.edit(0, f"edited {n}")
        elif change == "reload":
            holder.reload()
        holder.turn(f"t{n}", window=window, tool=tool, since=since)
    store.flush()
    rows = [store.query(q) for q in _SNAPSHOT_ROWS]
    store.close()
    return rows, holder.named


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.one_of(st.none(), st.integers(1, 9)), st.booleans(),
                          st.sampled_from(["", "", "", "rewind", "edit", "reload"]), st.booleans()),
                min_size=1, max_size=24))
def test_a_list_named_by_its_receipt_writes_the_rows_its_items_do(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
    turns: list[tuple[int | None, bool, str, bool]],
) -> None:
    """Random conversations (windows, tool turns whose second call lists what fell out since,
    rewinds, edits, reloads): a holder that drops the messages a receipt names and hands the
    receipt instead writes exactly the rows of one that hands every item."""
    base = tmp_path_factory.mktemp("receipts")
    items_rows, _ = _rows_of(base / "items.duckdb", turns, receipts=False, monkeypatch=monkeypatch)
    named_rows, _ = _rows_of(base / "named.duckdb", turns, receipts=True, monkeypatch=monkeypatch)
    assert named_rows == items_rows


def test_a_long_conversation_named_by_receipts_holds_only_its_window_and_reads_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    turns = [(8, n % 3 == 2, "", n % 2 == 0) for n in range(200)]
    items_rows, _ = _rows_of(tmp_path / "items.duckdb", turns, receipts=False, monkeypatch=monkeypatch)
    named_rows, named = _rows_of(tmp_path / "named.duckdb", turns, receipts=True, monkeypatch=monkeypatch)
    assert named > 190  # every call after the first few named what the window left out by its receipt
    assert named_rows == items_rows


def test_a_receipt_is_named_only_to_its_recorder_and_a_listener_gets_what_it_names(tmp_path: Path) -> None:
    from tracer import RecordedStage, RecordingError, RecordingListener

    seen: list[RecordedStage] = []

    class Keep(RecordingListener):
        def stage_closed(self, recorded: RecordedStage) -> None:
            seen.append(recorded)

    store = Store.open(tmp_path / "s.duckdb")
    recorder, other = Recorder(store), Recorder(store)
    holder = _Holder(recorder, "r", receipts=True)
    for n in range(6):
        holder.turn(f"t{n}", window=2, tool=False, since=False)
    receipt = holder.receipt
    assert receipt is not None and receipt.count == len(holder.messages) - 3
    run = other.start_run(agent="a", input="x", session_id="r")
    stage = run.stage("inference", "call")
    assert not stage.can_name(receipt)  # another recorder's rows
    stage.inputs([], dropped=LeftOut(recorded=receipt))
    with pytest.raises(RecordingError, match="must be the first"):
        stage.inputs([], dropped=LeftOut(recorded=receipt))
    with pytest.raises(ValueError, match="another recorder"):
        stage.close()
    recorder.listeners.append(Keep())
    run = recorder.start_run(agent="a", input="x", session_id="r")
    with run.stage("inference", "call") as stage:
        assert not stage.can_name(receipt)  # a listener wants the items themselves
        kept = [m for m in holder.messages[receipt.count:] if m is not None]
        stage.inputs(kept[-1:], dropped=LeftOut(recorded=receipt))
    entries = seen[-1].inputs
    assert [e.included for e in entries] == [True] + [False] * receipt.count
    assert [e.item_hash for e in entries[1:]] == [m.item.hash for m in holder.stored[:receipt.count]]
    assert {e.dropped_by for e in entries[1:]} == {"memory_window"}
    store.close()

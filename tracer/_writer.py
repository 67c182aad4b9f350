"""The store's single writer thread.

The agent's path never executes SQL: the recorder hands small row bundles to a bounded queue and
goes on. One thread drains the queue, groups rows by table, and inserts each table's rows in one
statement per batch, all in one transaction.

Moving values from Python into DuckDB one by one costs about a microsecond each, which at 20
snapshot entries per inference would dominate the recording. So the writer sends each column as a
single string, the values joined by a record separator, and DuckDB splits it natively (with the
GIL released). A stage's snapshot arrives already packed as one ``fp_snapshot`` row (see
``tracer._schema``). A value containing a separator falls back to a plain list parameter for its
column, so nothing is ever mangled.

A full queue blocks the producer (backpressure), so memory stays flat however fast runs are
recorded. A flush request is answered once everything queued before it is committed.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import nullcontext, suppress
from typing import TYPE_CHECKING, Any

import duckdb

from ._json import utf8_value
from ._stored_items import StoredItems
from .errors import StoreError

if TYPE_CHECKING:
    from ._upkeep import Upkeep

# Separators of the packed encoding. Control characters that no id, hash or kind contains; any
# other value is checked before it is packed.
ROW_SEP = "\x1e"  # between the values of one column
UNIT_SEP = "\x1f"  # between the values of a list
NULL_MARK = "\x1d"  # a NULL value
CHUNK_SEP = "\x1c"  # between chunks of a column
CHUNK = 1024  # values per chunk
_SMALL = 200  # fewer rows than this go as plain list parameters
_LONG = 128  # a string column whose values are this long on average goes as a plain list
# While the writer writes a batch, a producer lets go of the GIL once every this many bundles. The
# writer needs the GIL back after each DuckDB statement, and a producer that never blocks keeps it
# for the interpreter's whole switch interval (5 ms) each time: recording ran ~10% slower.
_YIELD_EVERY = 64

# Columns of each table in insert order, with their SQL types (must match _schema.TABLES).
COLUMN_TYPES: dict[str, tuple[tuple[str, str], ...]] = {
    "fp_run": (
        ("id", "VARCHAR"), ("session_id", "VARCHAR"), ("agent", "VARCHAR"), ("status", "VARCHAR"),
        ("input", "VARCHAR"), ("output", "VARCHAR"), ("model", "VARCHAR"), ("started_at", "DOUBLE"),
        ("ended_at", "DOUBLE"), ("tokens_in", "BIGINT"), ("tokens_out", "BIGINT"), ("cost", "DOUBLE"),
        ("forked_from_run", "VARCHAR"), ("forked_from_stage", "VARCHAR"), ("fork_edit", "VARCHAR"),
        ("labels", "VARCHAR[]"), ("attributes", "VARCHAR"), ("redaction", "VARCHAR"), ("error", "VARCHAR"),
    ),
    "fp_stage": (
        ("id", "VARCHAR"), ("run_id", "VARCHAR"), ("seq", "INTEGER"), ("kind", "VARCHAR"), ("name", "VARCHAR"),
        ("status", "VARCHAR"), ("started_at", "DOUBLE"), ("ended_at", "DOUBLE"), ("parent_id", "VARCHAR"),
        ("attributes", "VARCHAR"), ("error", "VARCHAR"), ("edges", "VARCHAR"), ("outputs", "VARCHAR"),
    ),
    "fp_edge": (("run_id", "VARCHAR"), ("src", "VARCHAR"), ("dst", "VARCHAR"), ("kind", "VARCHAR")),
    "fp_item": (("hash", "VARCHAR"), ("kind", "VARCHAR"), ("text", "VARCHAR"), ("body", "VARCHAR")),
    "fp_entry": (
        ("run_id", "VARCHAR"), ("stage_id", "VARCHAR"), ("position", "INTEGER"), ("item_hash", "VARCHAR"),
        ("origin_kind", "VARCHAR"), ("origin_run", "VARCHAR"), ("origin_stage", "VARCHAR"),
        ("origin_source", "VARCHAR"), ("included", "BOOLEAN"), ("dropped_by", "VARCHAR"),
    ),
    "fp_snapshot": (
        ("run_id", "VARCHAR"), ("stage_id", "VARCHAR"), ("entries", "VARCHAR"), ("flags", "VARCHAR"),
        ("dropped", "VARCHAR"), ("chain", "VARCHAR"), ("link", "INTEGER"), ("head", "INTEGER"),
        ("added", "INTEGER"), ("rest", "INTEGER"), ("log_start", "INTEGER"), ("low", "INTEGER"), ("drop_low", "INTEGER"),
        ("drop_high", "INTEGER"), ("drop_reason", "VARCHAR"),
    ),
    "fp_output": (("run_id", "VARCHAR"), ("stage_id", "VARCHAR"), ("position", "INTEGER"), ("item_hash", "VARCHAR")),
}
COLUMNS: dict[str, tuple[str, ...]] = {t: tuple(c for c, _ in cols) for t, cols in COLUMN_TYPES.items()}
RUN_END_COLUMNS = (
    "id", "status", "output", "model", "ended_at", "tokens_in", "tokens_out", "cost", "error", "attributes",
)
_INSERT_ORDER = ("fp_run", "fp_item", "fp_stage", "fp_edge", "fp_snapshot", "fp_entry", "fp_output")

# where each value of a run's end goes in its fp_run row (an end and its run's start in one batch
# are written as one finished row: no UPDATE, and no update for DuckDB's checkpoint to fold in)
_END_AT = tuple(COLUMNS["fp_run"].index(name) for name in RUN_END_COLUMNS)
_ATTRIBUTES_AT = COLUMNS["fp_run"].index("attributes")
_END_OWN = range(1, len(RUN_END_COLUMNS))  # an end's own values, to fold a later end into an earlier one
JOURNAL_KEY = "journal_applied"  # fp_meta: the last sync-journal record the tables hold (tracer._journal)


class Bundle:
    """Rows to write together: one stage's worth, or a run's start or end.

    ``seq`` is the bundle's record number in the store's sync journal (0: not journaled).
    """

    __slots__ = ("rows", "run_ends", "seq")

    def __init__(self, rows: dict[str, list[tuple[Any, ...]]] | None = None) -> None:
        self.rows: dict[str, list[tuple[Any, ...]]] = {} if rows is None else rows
        self.run_ends: list[tuple[Any, ...]] = []
        self.seq = 0

    def add(self, table: str, row: tuple[Any, ...]) -> None:
        """Queue one row of ``table``."""
        self.rows.setdefault(table, []).append(row)


class StageRows:
    """The rows one closed stage adds: its ``fp_stage`` row, its packed ``fp_snapshot`` row, the
    rows of items it sent first, and (rarely) rows of other tables.

    A bundle with a fixed shape: the writer gathers a batch's stage rows with one list
    comprehension per table instead of merging a dictionary per stage, work that held the GIL
    for ~10 µs an inference.
    """

    __slots__ = ("items", "other", "seq", "snapshot", "stage")

    def __init__(self) -> None:
        self.stage: tuple[Any, ...] = ()
        self.snapshot: tuple[Any, ...] | None = None
        self.items: list[tuple[Any, ...]] | None = None
        self.other: dict[str, list[tuple[Any, ...]]] | None = None
        self.seq = 0  # the record number in the store's sync journal (0: not journaled)

    def add(self, table: str, row: tuple[Any, ...]) -> None:
        """Queue one row of ``table``."""
        if table == "fp_item":
            if self.items is None:
                self.items = [row]
            else:
                self.items.append(row)
        elif table == "fp_snapshot" and self.snapshot is None:
            self.snapshot = row
        elif table == "fp_stage" and not self.stage:
            self.stage = row
        else:
            if self.other is None:
                self.other = {}
            self.other.setdefault(table, []).append(row)


class _Flush:
    __slots__ = ("done", "error", "then")

    def __init__(self, then: Callable[[BaseException | None], None] | None = None) -> None:
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.then = then  # called on the writer's thread once committed, with the error or None


_STOP = object()


def _encode(value: Any) -> str:
    if value is None:
        return NULL_MARK
    if type(value) is bool:
        return "true" if value else "false"
    return repr(value) if type(value) is float else str(value)


def _encode_list(value: Any) -> str | None:
    if value is None or len(value) == 0:
        return NULL_MARK
    if not all(type(v) is str and v and UNIT_SEP not in v for v in value):
        return None
    return UNIT_SEP.join(value)


def _chunks(values: Sequence[Any]) -> list[Sequence[Any]]:
    return [values[i:i + CHUNK] for i in range(0, len(values), CHUNK)]


def _packed_column(values: Sequence[Any], sql_type: str) -> str | None:
    """The column as chunks of values joined by separators, or None when it goes better (long
    strings, numbers) or only (a value holds a separator) as a plain list.

    A column of numbers only goes as a list: DuckDB converts Python ints and floats faster than
    Python writes their text and DuckDB parses it (a float's ``repr`` alone cost half the packing
    of a batch's stage rows).
    """
    nulls = 0
    encoded: Sequence[str | None]
    types = set(map(type, values))
    if sql_type.endswith("[]"):
        encoded = [_encode_list(v) for v in values]
        if None in encoded:
            return None
        nulls = encoded.count(NULL_MARK)
    elif types == {str}:
        if sum(map(len, values)) > _LONG * len(values):
            return None  # DuckDB takes long strings faster as a list than split out of one string
        encoded = values
    elif types == {float} or types == {int}:
        return None
    elif types <= {str, type(None)}:
        nulls = values.count(None)
        encoded = [NULL_MARK if v is None else v for v in values]
    elif sql_type != "VARCHAR":
        nulls = values.count(None)
        encoded = [_encode(v) for v in values]
    else:
        return None
    chunks = _chunks(encoded)
    joined = CHUNK_SEP.join([ROW_SEP.join(chunk) for chunk in chunks])
    if (
        joined.count(ROW_SEP) != len(values) - len(chunks)
        or joined.count(CHUNK_SEP) != len(chunks) - 1
        or joined.count(NULL_MARK) != nulls
    ):
        return None
    return joined


def select_rows(columns: Sequence[tuple[str, str]], rows: Sequence[tuple[Any, ...]]) -> tuple[str, list[Any]]:
    """A SELECT that yields ``rows`` (named as ``columns``), and its parameters.

    Each column travels as one string (see the module docstring), split natively in chunks of
    ``CHUNK`` values (DuckDB unnests short lists far faster than one long one).
    """
    if len(rows) < _SMALL:  # planning the split costs a few ms: few rows go as plain lists
        selects = ", ".join(f"unnest(?) AS {name}" for name, _ in columns)
        return f"SELECT {selects}", [list(c) for c in zip(*rows, strict=True)]
    params: list[Any] = []
    inner: list[str] = []
    outer: list[str] = []
    for i, (values, (name, sql_type)) in enumerate(zip(zip(*rows, strict=True), columns, strict=True)):
        packed = _packed_column(values, sql_type)
        if packed is None:  # a value holds a separator: this column goes as plain lists
            params.append([list(chunk) for chunk in _chunks(values)])
            inner.append(f"unnest(?) AS c{i}")
            outer.append(f"unnest(c{i}) AS {name}")
            continue
        params.append(packed)
        inner.append(f"string_split(unnest(string_split(?, chr(28))), chr(30)) AS c{i}")
        value = f"nullif(unnest(c{i}), chr(29))"
        if sql_type.endswith("[]"):
            value = f"coalesce(string_split({value}, chr(31)), []::VARCHAR[])"
        elif sql_type != "VARCHAR":
            value = f"{value}::{sql_type}"
        outer.append(f"{value} AS {name}")
    return f"SELECT {', '.join(outer)} FROM (SELECT {', '.join(inner)})", params


def _end_started_runs(runs: list[tuple[Any, ...]], run_ends: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Apply, in order, each end (or continuation) of a run whose ``fp_run`` row is in ``runs`` to
    that row, as the UPDATE would; the other ends are returned folded into one per run."""
    where = {row[0]: i for i, row in enumerate(runs)}
    folded: dict[str, list[Any]] = {}
    for end in run_ends:
        i = where.get(end[0])
        if i is None:
            held = folded.get(end[0])
            if held is None:
                folded[end[0]] = list(end)
            else:
                _apply_end(held, end, _END_OWN, len(RUN_END_COLUMNS) - 1)
            continue
        row = list(runs[i])
        _apply_end(row, end, _END_AT[1:], _ATTRIBUTES_AT)
        runs[i] = tuple(row)
    return [tuple(end) for end in folded.values()]


def _apply_end(row: list[Any], end: tuple[Any, ...], positions: Sequence[int], attributes_at: int) -> None:
    """Set ``row``'s values at ``positions`` from a run end: each one, but attributes only when the end has some."""
    for position, value in zip(positions, end[1:], strict=True):
        if value is not None or position != attributes_at:
            row[position] = value


class Writer:
    """Owns the write connection; everything written to the store goes through here.

    The hand-off is a deque the producer appends to without taking a lock or waking anyone: the
    thread sleeps ``linger`` seconds between batches and takes whatever arrived meanwhile. Waking
    it for every stage would cost a GIL hand-over each time, more than recording the stage itself.
    It is woken only when the queue turns from empty to non-empty, when ``batch`` bundles wait, for
    a flush, to stop, and when the queue is full (the producer then waits for room: backpressure).

    Every statement costs DuckDB a few milliseconds whatever its size, so fewer, bigger batches
    cost far less in all (a tenth of the CPU at 4,000 bundles a batch than at 50): a batch goes
    when ``batch`` bundles are queued or ``linger`` after its first one, whichever comes first.
    """

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        path: str,
        *,
        max_queue: int = 4000,
        max_batch: int = 4000,
        batch: int = 2048,
        linger: float = 0.5,
        on_error: Callable[[BaseException], None] | None = None,
        upkeep: Upkeep | None = None,
    ) -> None:
        self._con = con
        self._upkeep = upkeep  # its lock around each transaction; its checkpoint and trim after
        self._path = path
        self._pending: deque[Any] = deque()
        self._wake = threading.Event()  # set: something is queued, or a flush or the stop waits
        self._urgent = False  # a flush or the stop is queued: write without lingering
        self._room = threading.Condition()  # notified when a batch leaves the queue, for a producer waiting for room
        self._closing = False  # close() was called: nothing more is accepted
        self._writing = False  # the thread is writing a batch
        self._since_yield = 0  # bundles submitted since the producer last let go of the GIL
        self._max_queue = max_queue
        self._max_batch = max_batch
        self._batch = batch
        self._linger = linger
        self._failure: BaseException | None = None
        self._on_error = on_error
        self._stats: dict[str, int] = {"batches": 0, "bundles": 0}
        self._items = StoredItems(con)  # which items the file holds: each is written once
        # told the last journal record number a committed batch held (see tracer._journal)
        self.on_applied: Callable[[int], None] | None = None
        self._thread = threading.Thread(target=self._loop, name=f"footprint-writer:{path}", daemon=True)
        self._thread.start()

    @property
    def failure(self) -> BaseException | None:
        """The error that stopped a batch from being written, if any."""
        return self._failure

    @property
    def stats(self) -> dict[str, int]:
        """Counters: ``batches`` (transactions), ``bundles``, and rows written per table."""
        return dict(self._stats)

    def submit(self, bundle: Bundle | StageRows) -> None:
        """Queue a bundle; blocks while the queue is full."""
        if self._failure is not None:
            raise StoreError(f"writing to {self._path} failed earlier: {self._failure}") from self._failure
        if self._closing:
            raise StoreError(f"{self._path} is closed; nothing more can be recorded into it")
        pending = self._pending
        if len(pending) >= self._max_queue:
            self._wait_for_room()
        elif not pending:
            pending.append(bundle)
            self._wake.set()
            return
        pending.append(bundle)
        if len(pending) == self._batch:
            self._wake.set()  # a batch's worth: no need to linger for more
        if self._writing:
            self._since_yield += 1
            if self._since_yield >= _YIELD_EVERY:
                self._since_yield = 0
                time.sleep(0)  # releases the GIL: the writer, back from a statement, takes it now

    def _wait_for_room(self) -> None:
        with self._room:
            while len(self._pending) >= self._max_queue:
                if not self._thread.is_alive():
                    raise StoreError(f"{self._path} is closed; nothing more can be recorded into it")
                self._urgent = True
                self._wake.set()
                self._room.wait(0.1)

    def flush(self, timeout: float | None = None) -> None:
        """Wait until everything queued so far is committed."""
        if not self._thread.is_alive():
            if self._failure is not None:
                raise StoreError(f"writing to {self._path} failed: {self._failure}") from self._failure
            return
        marker = _Flush()
        self._pending.append(marker)
        self._urgent = True
        self._wake.set()
        if not marker.done.wait(timeout):
            raise StoreError(f"timed out flushing {self._path}")
        if marker.error is not None:
            raise StoreError(f"writing to {self._path} failed: {marker.error}") from marker.error

    def when_committed(self, then: Callable[[BaseException | None], None]) -> None:
        """Call ``then(error)`` once everything queued so far is committed (``error`` None), or could
        not be: on the writer's thread, so it must only hand over (``loop.call_soon_threadsafe``).
        Markers queued while a batch is written are answered by the next batch, all at once."""
        if not self._thread.is_alive() or self._closing:
            then(self._failure)  # closed: what it held is committed (or failed with this)
            return
        self._pending.append(_Flush(then))
        self._urgent = True
        self._wake.set()

    def close(self) -> None:
        """Flush and stop the thread."""
        self._closing = True
        if self._thread.is_alive():
            self._pending.append(_STOP)
            self._urgent = True
            self._wake.set()
            self._thread.join()

    def _loop(self) -> None:
        pending, wake = self._pending, self._wake
        while True:
            if not pending:
                wake.wait()
            if self._linger and not self._urgent:
                # Each statement costs a few ms of planning, so while rows keep coming a batch
                # waits briefly for more; a flush (or the stop, or a full queue) cuts it short.
                wake.clear()
                if not self._urgent:
                    wake.wait(self._linger)
            wake.clear()
            self._urgent = False
            take = pending.popleft
            batch: list[Any] = [take() for _ in range(min(len(pending), self._max_batch))]
            with self._room:  # the batch left the queue: a producer waiting for room can go on
                self._room.notify_all()
            if pending:
                wake.set()  # more than one batch's worth waits: go round again at once
                self._urgent = True
            bundles = [b for b in batch if type(b) is StageRows or type(b) is Bundle]
            error: BaseException | None = None
            if bundles:
                try:
                    self._writing = True
                    self._write(bundles)
                except BaseException as exc:  # kept and reported on the next submit or flush
                    error = exc
                    self._failure = exc
                    if self._on_error is not None:
                        self._on_error(exc)
                finally:
                    self._writing = False
            markers = [m for m in batch if type(m) is _Flush or m is _STOP]
            del batch, bundles  # a flush returns with nothing of what it waited for held here
            stop = False
            for marker in markers:
                if isinstance(marker, _Flush):
                    marker.error = error or self._failure
                    marker.done.set()
                    if marker.then is not None:
                        with suppress(Exception):  # a closed event loop: nobody waits
                            marker.then(marker.error)
                elif marker is _STOP:
                    stop = True
            if stop:
                return

    def _write(self, bundles: list[Bundle | StageRows]) -> None:
        tables: dict[str, list[tuple[Any, ...]]] = {}
        run_ends: list[tuple[Any, ...]] = []
        stages = [b for b in bundles if type(b) is StageRows]
        if stages:
            tables["fp_stage"] = [s.stage for s in stages if s.stage]
            tables["fp_snapshot"] = [s.snapshot for s in stages if s.snapshot is not None]
            tables["fp_item"] = [row for s in stages if s.items is not None for row in s.items]
            for s in stages:
                if s.other is not None:
                    for table, rows in s.other.items():
                        tables.setdefault(table, []).extend(rows)
        for bundle in bundles:
            if type(bundle) is Bundle:
                for table, rows in bundle.rows.items():
                    tables.setdefault(table, []).extend(rows)
                run_ends.extend(bundle.run_ends)
        if run_ends:
            run_ends = _end_started_runs(tables.get("fp_run", []), run_ends)
        journaled = 0  # bundles are queued in journal order: the last numbered one is the highest
        for bundle in reversed(bundles):
            if bundle.seq:
                journaled = bundle.seq
                break
        self._transaction(tables, run_ends, journaled)
        if tables.get("fp_item"):
            self._items.written(row[0] for row in tables["fp_item"])
        if journaled and self.on_applied is not None:
            self.on_applied(journaled)
        if self._upkeep is not None:
            self._upkeep.after_commit()
        stats = self._stats
        stats["batches"] += 1
        stats["bundles"] += len(bundles)
        for table, rows in tables.items():
            if rows:
                stats[table] = stats.get(table, 0) + len(rows)

    def _transaction(
        self,
        tables: dict[str, list[tuple[Any, ...]]],
        run_ends: list[tuple[Any, ...]],
        journaled: int,
    ) -> None:
        con = self._con
        with self._upkeep.lock.shared() if self._upkeep is not None else nullcontext():
            self._transaction_rows(con, tables, run_ends, journaled)

    def _transaction_rows(
        self,
        con: duckdb.DuckDBPyConnection,
        tables: dict[str, list[tuple[Any, ...]]],
        run_ends: list[tuple[Any, ...]],
        journaled: int,
    ) -> None:
        con.execute("BEGIN TRANSACTION")
        try:
            if tables.get("fp_item"):
                # the same item is often queued by several stages (and batches), and may be in the
                # file already: each new one goes in once (the table has no key to refuse a copy)
                tables["fp_item"] = self._items.new(tables["fp_item"])
            for table in _INSERT_ORDER:
                table_rows = tables.get(table)
                if table_rows:
                    self._insert_columns(table, table_rows)
            if run_ends:
                self._update_run_ends(run_ends)  # one per run (see _end_started_runs)
            if journaled:  # with the rows, atomically: a replay after a crash skips what is here
                con.execute("INSERT OR REPLACE INTO fp_meta VALUES (?, ?)", [JOURNAL_KEY, str(journaled)])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    def _insert_columns(self, table: str, rows: list[tuple[Any, ...]]) -> None:
        select, params = select_rows(COLUMN_TYPES[table], rows)
        self._execute(f"INSERT INTO {table} {select}", params)

    def _execute(self, sql: str, params: list[Any]) -> None:
        try:
            self._con.execute(sql, params)
        except duckdb.InvalidInputException:
            # DuckDB refuses a str it cannot write as UTF-8 (a lone surrogate in a run's input, a
            # name, an attribute) before it runs anything: the batch goes with each as its escape
            storable = utf8_value(params)
            if storable is params:
                raise
            self._con.execute(sql, storable)

    def _update_run_ends(self, rows: list[tuple[Any, ...]]) -> None:
        types = dict(COLUMN_TYPES["fp_run"])
        select, params = select_rows([(name, types[name]) for name in RUN_END_COLUMNS], rows)
        sets = ", ".join(
            f"{name} = coalesce(u.{name}, fp_run.{name})" if name == "attributes" else f"{name} = u.{name}"
            for name in RUN_END_COLUMNS[1:]
        )
        self._execute(f"UPDATE fp_run SET {sets} FROM ({select}) u WHERE fp_run.id = u.id", params)

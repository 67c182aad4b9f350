"""The store's single writer thread.

The agent's path never executes SQL: the recorder hands small row bundles to a bounded queue and
goes on. One thread drains the queue, groups rows by table, and inserts each table's rows as
columns (``INSERT ... SELECT * FROM unnest(?, ?, ...)``) in one transaction per batch, which is
roughly a hundred times faster than ``executemany``. A full queue blocks the producer
(backpressure), so memory stays flat however fast runs are recorded. A flush request is answered
once everything queued before it is committed.
"""

from __future__ import annotations

import queue
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import duckdb

from .errors import StoreError

# Columns of each table in insert order (must match _schema.TABLES).
COLUMNS: dict[str, tuple[str, ...]] = {
    "fp_run": (
        "id", "session_id", "agent", "status", "input", "output", "model", "started_at", "ended_at",
        "tokens_in", "tokens_out", "cost", "forked_from_run", "forked_from_stage", "fork_edit",
        "labels", "attributes", "redaction", "error",
    ),
    "fp_stage": (
        "id", "run_id", "seq", "kind", "name", "status", "started_at", "ended_at", "parent_id",
        "attributes", "error",
    ),
    "fp_edge": ("run_id", "src", "dst", "kind"),
    "fp_item": ("hash", "kind", "text", "body"),
    "fp_entry": (
        "run_id", "stage_id", "position", "item_hash", "origin_kind", "origin_run", "origin_stage",
        "origin_source", "included", "dropped_by",
    ),
    "fp_output": ("run_id", "stage_id", "position", "item_hash"),
}
RUN_END_COLUMNS = (
    "id", "status", "output", "model", "ended_at", "tokens_in", "tokens_out", "cost", "error", "attributes",
)
_INSERT_ORDER = ("fp_run", "fp_item", "fp_stage", "fp_edge", "fp_entry", "fp_output")


@dataclass
class Bundle:
    """Rows to write together: one stage's worth, or a run's start or end."""

    rows: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)
    run_ends: list[tuple[Any, ...]] = field(default_factory=list)

    def add(self, table: str, row: tuple[Any, ...]) -> None:
        """Queue one row of ``table``."""
        self.rows.setdefault(table, []).append(row)


class _Flush:
    __slots__ = ("done", "error")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.error: BaseException | None = None


_STOP = object()


class Writer:
    """Owns the write connection; everything written to the store goes through here."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        path: str,
        *,
        max_queue: int = 2000,
        max_batch: int = 2000,
        known_items: int = 200_000,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self._con = con
        self._path = path
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max_queue)
        self._max_batch = max_batch
        self._known: OrderedDict[str, None] = OrderedDict()
        self._known_cap = known_items
        self._failure: BaseException | None = None
        self._on_error = on_error
        self._thread = threading.Thread(target=self._loop, name=f"footprint-writer:{path}", daemon=True)
        self._thread.start()

    @property
    def failure(self) -> BaseException | None:
        """The error that stopped a batch from being written, if any."""
        return self._failure

    def submit(self, bundle: Bundle) -> None:
        """Queue a bundle; blocks while the queue is full."""
        if self._failure is not None:
            raise StoreError(f"writing to {self._path} failed earlier: {self._failure}") from self._failure
        self._queue.put(bundle)

    def flush(self, timeout: float | None = None) -> None:
        """Wait until everything queued so far is committed."""
        if not self._thread.is_alive():
            if self._failure is not None:
                raise StoreError(f"writing to {self._path} failed: {self._failure}") from self._failure
            return
        marker = _Flush()
        self._queue.put(marker)
        if not marker.done.wait(timeout):
            raise StoreError(f"timed out flushing {self._path}")
        if marker.error is not None:
            raise StoreError(f"writing to {self._path} failed: {marker.error}") from marker.error

    def close(self) -> None:
        """Flush and stop the thread."""
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join()

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            batch: list[Any] = [first]
            while len(batch) < self._max_batch:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            bundles = [b for b in batch if isinstance(b, Bundle)]
            error: BaseException | None = None
            if bundles:
                try:
                    self._write(bundles)
                except BaseException as exc:  # kept and reported on the next submit or flush
                    error = exc
                    self._failure = exc
                    if self._on_error is not None:
                        self._on_error(exc)
            for marker in batch:
                if isinstance(marker, _Flush):
                    marker.error = error or self._failure
                    marker.done.set()
            if any(b is _STOP for b in batch):
                return

    def _write(self, bundles: list[Bundle]) -> None:
        tables: dict[str, list[tuple[Any, ...]]] = {}
        run_ends: list[tuple[Any, ...]] = []
        for bundle in bundles:
            for table, rows in bundle.rows.items():
                tables.setdefault(table, []).extend(rows)
            run_ends.extend(bundle.run_ends)
        if "fp_item" in tables:
            tables["fp_item"] = self._new_items(tables["fp_item"])
        con = self._con
        con.execute("BEGIN TRANSACTION")
        try:
            for table in _INSERT_ORDER:
                rows = tables.get(table)
                if rows:
                    self._insert_columns(table, rows)
            if run_ends:
                # a run may be ended, continued and ended again within one batch: the last word wins
                self._update_run_ends(list({row[0]: row for row in run_ends}.values()))
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        for row in tables.get("fp_item", ()):
            self._remember(row[0])

    def _new_items(self, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        seen: dict[str, tuple[Any, ...]] = {}
        for row in rows:
            if row[0] not in self._known and row[0] not in seen:
                seen[row[0]] = row
        return list(seen.values())

    def _remember(self, item_hash: str) -> None:
        self._known[item_hash] = None
        if len(self._known) > self._known_cap:
            self._known.popitem(last=False)

    def _insert_columns(self, table: str, rows: list[tuple[Any, ...]]) -> None:
        columns = list(zip(*rows, strict=True))
        params = ", ".join(f"unnest(${i + 1})" for i in range(len(columns)))
        verb = "INSERT OR IGNORE INTO" if table in ("fp_item", "fp_run") else "INSERT INTO"
        self._con.execute(f"{verb} {table} SELECT {params}", [list(c) for c in columns])

    def _update_run_ends(self, rows: list[tuple[Any, ...]]) -> None:
        columns = list(zip(*rows, strict=True))
        params = ", ".join(f"unnest(${i + 1}) AS {name}" for i, name in enumerate(RUN_END_COLUMNS))
        sets = ", ".join(
            f"{name} = coalesce(u.{name}, fp_run.{name})" if name == "attributes" else f"{name} = u.{name}"
            for name in RUN_END_COLUMNS[1:]
        )
        self._con.execute(
            f"UPDATE fp_run SET {sets} FROM (SELECT {params}) u WHERE fp_run.id = u.id",
            [list(c) for c in columns],
        )

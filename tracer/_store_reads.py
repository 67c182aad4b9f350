"""Reading whole runs back from the store: their stages, edges and outputs, the snapshots (snapshot
chains resolved), and the items they name.

:class:`RunReads` is mixed into :class:`tracer.Store`, which supplies the connection (``cursor``,
``query``), ``get_run`` and whether any row is stored plainly (``_has_plain_rows``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import duckdb

from ._records import Edge, Item, Origin, Run, SnapshotEntry, Stage
from ._rows import unpack_edges, unpack_entry, unpack_hashes, unpack_snapshot
from ._rundata import RunData
from ._schema import ENTRY_SEP
from .errors import NotFoundError, StoreError


def placeholders(values: Sequence[Any]) -> str:
    return ", ".join("?" * len(values))


def loads(value: str | None) -> Any:
    return json.loads(value) if value else None


def run_from_row(row: Sequence[Any]) -> Run:
    return Run(
        id=row[0], session_id=row[1], agent=row[2], status=row[3], input=row[4] or "", output=row[5],
        model=row[6], started_at=row[7], ended_at=row[8], tokens_in=row[9] or 0, tokens_out=row[10] or 0,
        cost=row[11] or 0.0, forked_from_run=row[12], forked_from_stage=row[13], fork_edit=loads(row[14]),
        labels=tuple(row[15] or ()), attributes=loads(row[16]) or {}, redaction=loads(row[17]) or {},
        error=row[18],
    )


RUN_COLUMNS = (
    "id, session_id, agent, status, input, output, model, started_at, ended_at, tokens_in, tokens_out, "
    "cost, forked_from_run, forked_from_stage, fork_edit, labels, attributes, redaction, error"
)

# One run's rows, found by a range on run_id: DuckDB prunes row groups with it (ids sort by time)
# and filters inside the one or two left. An equality is answered from the run_id index instead,
# which fetches row by row: ~30 ms for the 600 edges of a long run, against ~2.
ONE_RUN = "run_id >= ? AND run_id < ? || chr(0)"
STAGE_COLUMNS = (
    "id, run_id, seq, kind, name, status, started_at, ended_at, parent_id, attributes, error, edges, outputs, rowid"
)


class RunReads:
    """The reads of whole runs, for :class:`tracer.Store`."""

    path: str

    if TYPE_CHECKING:
        def cursor(self) -> duckdb.DuckDBPyConnection: ...
        def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...
        def get_run(self, run_id: str) -> Run: ...
        def _has_plain_rows(self) -> bool: ...
        def reading(self) -> AbstractContextManager[None]: ...

    def load_run(self, run_id: str, *, snapshots: Iterable[str] | None = None) -> RunData:
        """Everything recorded about one run.

        ``snapshots`` names the stages to read whole, when not every stage: the run comes with all
        its stages, edges and outputs, but with the snapshots (``inputs``) of those stages only,
        and ``items`` holds the items those stages saw and output; a stage id the run does not
        have raises :class:`NotFoundError` naming it. :meth:`load_snapshots` reads
        other stages later. A long run's snapshots are most of what it holds (each inference saw
        the conversation so far), so a screen that shows one stage at a time reads that one.
        """
        if snapshots is None:
            return self.load_runs([run_id])[run_id]
        wanted = list(dict.fromkeys(snapshots))
        data = RunData(run=self.get_run(run_id), stages=[], edges=[])
        loaded = {run_id: data}
        cur = self.cursor()
        try:
            with self.reading():
                self._read_outline(cur, loaded, ONE_RUN, [run_id, run_id])
                _refuse_unknown_stages(run_id, wanted, {s.id for s in data.stages})
                if wanted:
                    data.inputs = self._read_snapshots(
                        cur, f"{ONE_RUN} AND stage_id IN (SELECT unnest(?))", [run_id, run_id, wanted]
                    ).get(run_id, {})
        finally:
            cur.close()
        hashes = {e.item_hash for es in data.inputs.values() for e in es}
        hashes.update(h for stage_id in wanted for h in data.outputs.get(stage_id, ()))
        data.items = self.items(hashes)
        return data

    def load_snapshots(
        self, run_id: str, stage_ids: Iterable[str]
    ) -> tuple[dict[str, list[SnapshotEntry]], dict[str, Item]]:
        """The snapshots of some stages of a run, and the items those stages saw and output.

        The first part maps each stage to its entries in order, those left out of the context
        included, as :attr:`RunData.inputs` does (a stage without inputs is absent); the second
        maps item hashes to items. Merged into a ``load_run(run_id, snapshots=...)`` read, they
        make these stages as whole as a full read would. A stage id the run does not have raises
        :class:`NotFoundError` naming it (a typo is not read as a stage without a snapshot).
        """
        wanted = list(dict.fromkeys(stage_ids))
        if not wanted:
            return {}, {}
        cur = self.cursor()
        try:
            with self.reading():
                params = [run_id, run_id, wanted]
                outputs = cur.execute(
                    f"SELECT id, outputs FROM fp_stage WHERE {ONE_RUN} AND id IN (SELECT unnest(?))", params
                ).fetchall()
                _refuse_unknown_stages(run_id, wanted, {stage_id for stage_id, _ in outputs})
                inputs = self._read_snapshots(cur, f"{ONE_RUN} AND stage_id IN (SELECT unnest(?))", params).get(run_id, {})
                hashes = {h for (_, packed) in outputs for h in unpack_hashes(packed or "")}
                if self._has_plain_rows():
                    hashes.update(r[0] for r in cur.execute(
                        f"SELECT item_hash FROM fp_output WHERE {ONE_RUN} AND stage_id IN (SELECT unnest(?))", params
                    ).fetchall())
        finally:
            cur.close()
        hashes.update(e.item_hash for es in inputs.values() for e in es)
        return inputs, self.items(hashes)

    def _read_outline(self, cur: duckdb.DuckDBPyConnection, loaded: dict[str, RunData], where: str,
                      params: list[Any]) -> None:
        """The stages, edges and outputs of the runs in ``loaded`` (their rows matched by ``where``)."""
        rows = cur.execute(f"SELECT {STAGE_COLUMNS} FROM fp_stage WHERE {where} ORDER BY run_id, seq", params).fetchall()
        for r in rows:
            loaded[r[1]].stages.append(Stage(
                id=r[0], run_id=r[1], seq=r[2], kind=r[3], name=r[4], status=r[5], started_at=r[6],
                ended_at=r[7], parent_id=r[8], attributes=loads(r[9]) or {}, error=r[10],
            ))
        for r in sorted(rows, key=lambda r: r[13]):  # edges in the order their stages were recorded
            if r[11]:
                loaded[r[1]].edges.extend(unpack_edges(r[1], r[0], r[11]))
        for r in sorted(rows, key=lambda r: r[0]):
            if r[12]:
                loaded[r[1]].outputs[r[0]] = unpack_hashes(r[12])
        if self._has_plain_rows():
            for r in cur.execute(f"SELECT run_id, src, dst, kind FROM fp_edge WHERE {where}", params).fetchall():
                loaded[r[0]].edges.append(Edge(*r))
            output_rows = cur.execute(
                f"SELECT run_id, stage_id, item_hash FROM fp_output WHERE {where} ORDER BY stage_id, position", params
            ).fetchall()
            for r in output_rows:
                loaded[r[0]].outputs.setdefault(r[1], []).append(r[2])

    def _read_snapshots(
        self, cur: duckdb.DuckDBPyConnection, where: str, params: list[Any]
    ) -> dict[str, dict[str, list[SnapshotEntry]]]:
        """The snapshots of the stages matched by ``where``: run id -> stage id -> entries."""
        found: dict[str, dict[str, list[SnapshotEntry]]] = {}
        origins: dict[str, Origin] = {}
        rows = cur.execute(
            "SELECT run_id, stage_id, entries, flags, dropped, chain, head, added, log_start, low, drop_low, drop_high, "
            f"drop_reason FROM fp_snapshot WHERE {where} ORDER BY stage_id",
            params,
        ).fetchall()
        wanted = []  # the parts of chains' logs the rows name: (chain, from, to, stage id)
        for r in rows:
            lo, hi = (r[9], r[8] + r[7]) if r[8] + r[7] > r[9] else (None, None)
            if r[11] > r[10]:
                lo, hi = min(r[10], lo if lo is not None else r[10]), max(r[11], hi or 0)
            if lo is not None and hi is not None:
                wanted.append((r[5], lo, hi, r[1]))
        logs = self._chain_logs(cur, wanted, origins)
        for run_id, stage_id, entries, flags, dropped, chain, head, added, log_start, low, d_low, d_high, d_by in rows:
            log, base = logs.get(chain, ([], 0))
            found.setdefault(run_id, {})[stage_id] = unpack_snapshot(
                entries, flags, dropped, origins, head=head, added=added,
                sent=log[low - base:log_start + added - base] if log_start + added > low else (),
                left=log[d_low - base:d_high - base] if d_high > d_low else (), left_by=d_by,
            )
        if self._has_plain_rows():
            plain = cur.execute(
                "SELECT run_id, stage_id, position, item_hash, origin_kind, origin_run, origin_stage, origin_source, "
                f"included, dropped_by FROM fp_entry WHERE {where} ORDER BY stage_id, position",
                params,
            ).fetchall()
            for r in plain:
                found.setdefault(r[0], {}).setdefault(r[1], []).append(
                    SnapshotEntry(r[2], r[3], Origin(r[4], r[5], r[6], r[7]), bool(r[8]), r[9]))
        return found

    def _chain_logs(
        self, cur: duckdb.DuckDBPyConnection, wanted: list[tuple[str, int, int, str]], origins: dict[str, Origin]
    ) -> dict[str, tuple[list[tuple[str, Origin]], int]]:
        """The parts of chains' logs that ``wanted`` (chain, from, to, stage id) names: chain -> (its
        log entries (item hash, origin) from ``base`` on, base). A chain's rows lie between its
        first stage id and its last."""
        if not wanted:
            return {}
        chains = sorted({w[0] for w in wanted})
        rows = cur.execute(
            "SELECT chain, log_start, entries, head, added FROM fp_snapshot "
            "WHERE stage_id BETWEEN ? AND ? AND chain IN (SELECT unnest(?)) AND added > 0 "
            "AND log_start + added > ? AND log_start < ? ORDER BY chain, log_start",
            [chains[0], max(w[3] for w in wanted), chains, min(w[1] for w in wanted), max(w[2] for w in wanted)],
        ).fetchall()
        out: dict[str, tuple[list[tuple[str, Origin]], int]] = {}
        for chain, log_start, entries, head, added in rows:
            log, base = out.setdefault(chain, ([], log_start))
            if base + len(log) != log_start:
                raise StoreError(f"the snapshot chain {chain} in {self.path} misses rows: the store is damaged")
            log.extend(unpack_entry(e, origins) for e in entries.split(ENTRY_SEP)[head:head + added])
        for chain, low, high, stage_id in wanted:
            log, base = out.get(chain, ([], 0))
            if base > low or base + len(log) < high:
                raise StoreError(f"the snapshot of stage {stage_id} in {self.path} names entries of chain {chain} "
                                 f"that are not stored: the store is damaged")
        return out

    def load_runs(self, run_ids: Iterable[str]) -> dict[str, RunData]:
        """Everything recorded about several runs, in one query per table (a NotFoundError names a missing run).

        `why` loads the runs a walk is about to reach together: the lookups are the cost at a million
        stages, not the rows. Rows are found through the ids' zone maps (ids sort by time, so each
        run sits in one or two row groups) and items through the primary-key index.
        """
        ids = list(dict.fromkeys(run_ids))
        if not ids:
            return {}
        marks = placeholders(ids)
        runs = {r[0]: run_from_row(r) for r in self.query(f"SELECT {RUN_COLUMNS} FROM fp_run WHERE id IN ({marks})", ids)}
        missing = [i for i in ids if i not in runs]
        if missing:
            raise NotFoundError(f"no run {missing[0]} in {self.path}")
        # The range is what DuckDB prunes row groups with (ids sort by time) and filters cheaply
        # inside them; the IN list alone is evaluated as a join, three times slower at 1M stages.
        where = f"run_id BETWEEN ? AND ? AND run_id IN ({marks})"
        params = [min(ids), max(ids), *ids]
        loaded = {i: RunData(run=runs[i], stages=[], edges=[]) for i in ids}
        cur = self.cursor()
        try:
            with self.reading():
                self._read_outline(cur, loaded, where, params)
                for run_id, inputs in self._read_snapshots(cur, where, params).items():
                    loaded[run_id].inputs = inputs
        finally:
            cur.close()
        wanted = {e.item_hash for d in loaded.values() for es in d.inputs.values() for e in es}
        wanted.update(h for d in loaded.values() for hs in d.outputs.values() for h in hs)
        items = self.items(wanted)
        for data in loaded.values():
            hashes = {e.item_hash for es in data.inputs.values() for e in es}
            hashes.update(h for hs in data.outputs.values() for h in hs)
            data.items = {h: items[h] for h in hashes if h in items}
        return loaded

    def items(self, hashes: Iterable[str]) -> dict[str, Item]:
        """The stored items with these hashes."""
        wanted = list(set(hashes))
        if not wanted:
            return {}
        rows: list[tuple[Any, ...]] = []
        for start in range(0, len(wanted), 1000):  # an IN list of parameters is an index lookup
            chunk = wanted[start:start + 1000]
            rows += self.query(f"SELECT hash, kind, text, body FROM fp_item WHERE hash IN ({placeholders(chunk)})", chunk)
        return {r[0]: Item(r[1], json.loads(r[3]) if r[3] else {"text": r[2]}, r[0]) for r in rows}


def _refuse_unknown_stages(run_id: str, wanted: Iterable[str], stages: set[str]) -> None:
    """Raise NotFoundError naming the ids among ``wanted`` the run has no stage for (a typo or
    another run's stage is not read as a stage without a snapshot)."""
    unknown = set(wanted) - stages
    if unknown:
        raise NotFoundError(f"run {run_id!r} has no stage {', '.join(sorted(unknown))} "
                            f"(its stages are listed by a read of the run)")

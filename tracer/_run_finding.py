"""Finding runs and stages in the store: by id, unique id prefix or ``last``, and by filter.

:class:`RunFinding` is mixed into :class:`tracer.Store`, which supplies ``query`` and ``path``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._records import PARENT_RUN, Run
from ._store_reads import RUN_COLUMNS, run_from_row
from .errors import AmbiguousIdError, NotFoundError, quoted


@dataclass(frozen=True)
class RunFilter:
    """Which runs to list: every field narrows the list when set."""

    session_id: str | None = None
    agent: str | None = None
    status: str | None = None
    search: str | None = None
    label: str | None = None
    forks: bool = True  # False: leave out runs forked from another (replays, counterfactual re-runs)
    children: bool = True  # False: leave out the runs sub-agents made for another run (reached through it)


#: A run a sub-agent made for another run (its ``parent_run`` attribute names that run).
_IS_CHILD = f"coalesce(json_extract_string(attributes, '$.{PARENT_RUN}') IS NOT NULL, false)"


class RunFinding:
    """The store's lookups of runs and stages (see the module's docstring)."""

    if TYPE_CHECKING:
        path: str

        def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

    def resolve_stage(self, ref: str) -> tuple[str, str]:
        """The full id and the run of the stage ``ref`` names (an id or a unique id prefix)."""
        return self._stage_runs([ref])[ref]

    def _stage_runs(self, stage_ids: Iterable[str]) -> dict[str, tuple[str, str]]:
        found: dict[str, tuple[str, str]] = {}
        for ref in stage_ids:
            rows = self.query("SELECT id, run_id FROM fp_stage WHERE starts_with(id, ?) LIMIT 2", [ref])
            if not rows:
                raise NotFoundError(f"no stage matches {quoted(ref)} in {self.path}")
            exact = [r for r in rows if r[0] == ref]
            if len(rows) > 1 and not exact:
                raise self._ambiguous(ref, "fp_stage", "stages")
            stage_id, run_id = (exact or rows)[0]
            found[ref] = (str(stage_id), str(run_id))
        return found

    def stage_counts(self, run_ids: Iterable[str]) -> dict[str, int]:
        """How many stages each run has."""
        wanted = list(run_ids)
        if not wanted:
            return {}
        rows = self.query(
            "SELECT run_id, count(*) FROM fp_stage WHERE run_id IN (SELECT unnest(?)) GROUP BY run_id", [wanted]
        )
        return {str(r[0]): int(r[1]) for r in rows}

    def resolve_run_id(self, ref: str) -> str:
        """The full id of the run ``ref`` names: an id, a unique id prefix, or ``last``.

        ``last`` is the last top-level run a person made: re-runs (replays, counterfactual and blame
        runs, all forked from a recorded run) and runs a sub-agent made for another run (reached
        through that run: a child starts after its parent) are passed over unless nothing else was
        recorded. Every command and screen that takes ``last`` resolves it here.
        """
        if ref in ("last", "latest"):
            rows = self.query(
                f"SELECT id FROM fp_run ORDER BY forked_from_run IS NOT NULL, {_IS_CHILD}, started_at DESC, id DESC "
                "LIMIT 1")
            if not rows:
                raise NotFoundError(f"{self.path} has no runs yet")
            return str(rows[0][0])
        rows = self.query("SELECT id FROM fp_run WHERE id = ? OR starts_with(id, ?) LIMIT 3", [ref, ref])
        exact = [r[0] for r in rows if r[0] == ref]
        if exact:
            return str(exact[0])
        if not rows:
            raise NotFoundError(f"no run matches {quoted(ref)} in {self.path} (footprint runs lists them)")
        if len(rows) > 1:
            raise self._ambiguous(ref, "fp_run", "runs")
        return str(rows[0][0])

    def _ambiguous(self, ref: str, table: str, what: str) -> AmbiguousIdError:
        """The error for a prefix several ids start with, saying how many (counted only then)."""
        matches = int(self.query(f"SELECT count(*) FROM {table} WHERE starts_with(id, ?)", [ref])[0][0])
        return AmbiguousIdError(f"the id prefix {quoted(ref)} is ambiguous: {matches} {what} in {self.path} start with "
                                "it; give more of the id", ref=ref, matches=matches)

    def list_runs(self, where: RunFilter = RunFilter(), *, limit: int = 50, offset: int = 0) -> list[Run]:
        """Runs, newest first."""
        sql, params = self._run_where(where)
        rows = self.query(
            f"SELECT {RUN_COLUMNS} FROM fp_run {sql} ORDER BY started_at DESC, id DESC LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        return [run_from_row(r) for r in rows]

    def count_runs(self, where: RunFilter = RunFilter()) -> int:
        """How many runs match."""
        sql, params = self._run_where(where)
        return int(self.query(f"SELECT count(*) FROM fp_run {sql}", params)[0][0])

    @staticmethod
    def _run_where(where: RunFilter) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        for column, value in (("session_id", where.session_id), ("agent", where.agent), ("status", where.status)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        if not where.forks:
            clauses.append("forked_from_run IS NULL")
        if not where.children:
            clauses.append(f"NOT {_IS_CHILD}")
        if where.label is not None:
            clauses.append("list_contains(labels, ?)")
            params.append(where.label)
        if where.search:  # the text itself, any case: a % or _ in it is a character, not a LIKE wildcard
            clauses.append("(contains(lower(input), ?) OR contains(lower(output), ?) OR contains(lower(id), ?))")
            needle = where.search.lower()
            params += [needle, needle, needle]
        return (("WHERE " + " AND ".join(clauses)) if clauses else ""), params

    def get_run(self, run_id: str) -> Run:
        """One run by exact id."""
        rows = self.query(f"SELECT {RUN_COLUMNS} FROM fp_run WHERE id = ?", [run_id])
        if not rows:
            raise NotFoundError(f"no run {run_id} in {self.path}")
        return run_from_row(rows[0])

    def session_runs(self, session_id: str) -> list[Run]:
        """The runs of a session, oldest first."""
        rows = self.query(
            f"SELECT {RUN_COLUMNS} FROM fp_run WHERE session_id = ? ORDER BY started_at, id", [session_id]
        )
        return [run_from_row(r) for r in rows]

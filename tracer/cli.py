"""The recording commands of the `footprint` CLI: runs, show, why, diff, sql.

    footprint runs --session maya-1 --limit 10
    footprint show last
    footprint why last --depth 4          (ranked; --order context for the walk)
    footprint why last --item memory:profile.home_city
    footprint diff r-0193a1 r-0193b7      (or: footprint compare)
    footprint diff --stages s-0193a1b2 s-0193a1c4
    footprint sql "SELECT kind, count(*) FROM stages GROUP BY kind"

Every command reads the store read-only (``--db``, default ``footprint.duckdb``), so it works next
to a process recording into another file, and fails with a clear message, never a traceback, on a
missing file, a file that is not a store, or an unknown run. Each package contributes its commands
through a ``register(group)`` function; the console script (:mod:`explorer.cli`) assembles them.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from ._store import Store

F = TypeVar("F", bound=Callable[..., Any])

#: The store a command reads when not told (``tracer.DEFAULT_PATH``, which is defined with the store, and
#: importing the store imports DuckDB: each command imports what it uses when it runs, so that its
#: ``--help`` or a usage error is answered at once; tests/test_package_fronts.py checks they agree).
DEFAULT_PATH = "footprint.duckdb"

db_option = click.option(
    "--db", "db", default=DEFAULT_PATH, envvar="FOOTPRINT_DB", show_default=True,
    help="The footprint store (a DuckDB file).",
)
#: The most runs one listing prints (a bigger --limit is refused, not cut: DuckDB's LIMIT is 64-bit).
MAX_LIST = 1_000_000_000
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")


@contextmanager
def reading(db: str) -> Iterator[Store]:
    """The store at ``db`` opened read-only, closed afterwards (a damaged block a read reaches is
    refused by the store itself, :meth:`Store.reading`)."""
    from ._store import Store

    store = Store.open(db, read_only=True)
    try:
        yield store
    finally:
        store.close()


def _echo_lines(lines: list[str]) -> None:
    from ._render import for_terminal

    click.echo(for_terminal("\n".join(lines)))


def _echo_json(value: Any) -> None:
    from ._json import finite

    try:
        text = json.dumps(value, indent=2, ensure_ascii=False, default=_json_default, allow_nan=False)
    except ValueError:  # a NaN or an infinity (a query's, a tool's): null, as JSON has no such number
        text = json.dumps(finite(value), indent=2, ensure_ascii=False, default=_json_default, allow_nan=False)
    click.echo(text)


def _json_default(value: Any) -> Any:
    """A value JSON has no type for: a time is Unix seconds, as in every other JSON footprint prints
    (runs --json, show --json, the HTTP API); anything else its text."""
    if isinstance(value, datetime):
        return (value if value.tzinfo is not None else value.replace(tzinfo=UTC)).timestamp()
    return str(value)


@click.command("runs")
@db_option
@click.option("--session", help="Only runs of this session.")
@click.option("--agent", help="Only runs of this agent.")
@click.option("--status", type=click.Choice(["running", "answered", "awaiting", "failed", "cancelled"]),
              help="Only runs that ended so.")
@click.option("--forks/--no-forks", default=False, show_default=True,
              help="Include the re-runs forked from a recorded run (replays, counterfactual and blame runs).")
@click.option("--limit", type=click.IntRange(1, MAX_LIST), default=20, show_default=True, help="At most this many runs.")
@json_option
def runs_command(
    db: str, session: str | None, agent: str | None, status: str | None, forks: bool, limit: int, as_json: bool
) -> None:
    """List recorded runs, newest first (re-runs forked from a recorded run only with --forks)."""
    from ._render import runs_table
    from ._run_finding import RunFilter
    from ._serialize import run_to_dict

    where = RunFilter(session_id=session, agent=agent, status=status, forks=forks)
    with reading(db) as store:
        runs = store.list_runs(where, limit=limit)
        total = store.count_runs(where)
        hidden = 0 if forks else store.count_runs(replace(where, forks=True)) - total
        counts = store.stage_counts(r.id for r in runs)
    if as_json:
        _echo_json([{**run_to_dict(r), "stages": counts.get(r.id, 0)} for r in runs])
        return
    hidden_note = f"{hidden} re-run(s) of replay, counterfactual and blame hidden: --forks shows them"
    if not runs:
        narrowed = replace(where, forks=False) != RunFilter(forks=False)
        click.echo(f"no runs in {db}" + (" match" if narrowed else "") + (f" ({hidden_note})" if hidden else ""))
        return
    _echo_lines(runs_table(runs, counts, width=_width()))
    if total > len(runs):
        click.echo(f"({len(runs)} of {total} runs; --limit shows more)")
    if hidden:
        click.echo(f"({hidden_note})")


def _width() -> int:
    """The terminal's width (100 when output goes to a pipe or a file)."""
    return max(60, shutil.get_terminal_size((100, 24)).columns)


@click.command("show")
@click.argument("run")
@click.option("--team/--no-team", default=True, show_default=True,
              help="Draw the runs the run's sub-agents made inside it, as one flowchart.")
@click.option("--context", "with_context", is_flag=True,
              help="Also list each inference's context: every item with its name and hash.")
@db_option
@json_option
def show_command(run: str, team: bool, with_context: bool, db: str, as_json: bool) -> None:
    """Show a run's flowchart: its stages in order, parallel tool calls as a fork/join block.

    RUN is a run id, a unique prefix of one, or `last` (the last run a person made, not a re-run).
    A run whose agents handed work to other agents is drawn with their runs inside, each framed by
    its agent's boundary. The input and answer are shown whole. With --context, the items each
    inference saw follow, each with the name and hash that `why --item` and `counterfactual
    --remove` take.
    """
    from ._lineage import child_runs
    from ._render import show_run
    from ._serialize import rundata_to_dict

    with reading(db) as store:
        data = store.load_run(store.resolve_run_id(run))
        children = child_runs(store, data) if team else {}
    if as_json:
        _echo_json({**rundata_to_dict(data), "children": [rundata_to_dict(c) for c in children.values()]}
                   if children else rundata_to_dict(data))
        return
    _echo_lines(show_run(data, children, width=_width(), context=with_context))


@click.command("why")
@click.argument("run")
@click.option("--item", "item", metavar="ITEM", help="Explain this item (its name or a hash prefix) instead of the answer: the walk back "
                   "through its origins (an item's chain is a walk, not a ranking).")
@click.option("--depth", type=click.IntRange(min=1), default=32, show_default=True,
              help="How many origins deep to walk (item -> the stage that produced it -> its inputs is one).")
@click.option("--order", type=click.Choice(["rank", "context"]), default="rank", show_default=True,
              help="rank: the items the answer rests on most first, with the reasons; context: the walk, in the "
                   "order the context was built.")
@click.option("--all", "show_all", is_flag=True, help="List every ranked item (default: the first 15).")
@db_option
@json_option
def why_command(run: str, item: str | None, depth: int, order: str, show_all: bool, db: str, as_json: bool) -> None:
    """Explain an answer: the context it came from, each item with its origin, walked back across the session.

    RUN is a run id, a unique prefix of one, or `last`. By default the items are ranked by how much
    the answer rests on them (the names, numbers and dates it asserts and which items hold them,
    shared text, what a tool or the model produced in the run, recency, the verdicts of counterfactuals
    already made of the run), each with its reasons;
    --order context shows the walk itself: stages already shown are not repeated, and the list at
    the end is what was available but left out of context, and what left it out.
    """
    from ._names import item_names, resolve_item
    from ._rank import earlier_verdicts, rank
    from ._render import ranked_lines, why_tree
    from ._why import why as why_walk

    with reading(db) as store:
        run_id = store.resolve_run_id(run)
        data = store.load_run(run_id)
        names = item_names(data)
        target = None if item is None else resolve_item(data, item, names)
        evidence = why_walk(store, run_id, target, depth=depth)
        verdicts = earlier_verdicts(store, run_id) if target is None else {}
    ranked = rank(evidence, names=names, verdicts=verdicts)
    if as_json:
        out = evidence.to_dict()
        out["ranked"] = [r.to_dict(out["texts"]) for r in ranked]
        _echo_json(out)
        return
    if order == "context" or target is not None:
        _echo_lines(why_tree(evidence, run_id, width=_width(), names=names))
        return
    _echo_lines(ranked_lines(ranked, run_id, limit=None if show_all else 15))


@click.command("diff")
@click.argument("refs", nargs=-1, metavar="A B")
@click.option("--stages", is_flag=True, help="A and B are stage ids: diff those two snapshots.")
@db_option
@json_option
def diff_command(refs: tuple[str, ...], stages: bool, db: str, as_json: bool) -> None:
    """Compare two runs, or with --stages two snapshots (`compare` is another name for it).

    For runs: both answers whole, the first stage where they diverge with the context diff there
    (each item added, dropped or changed, and the tokens per origin kind), the stages side by
    side, the tool calls that differ, tokens and cost. Runs are named by id, unique prefix or
    `last`; stages by id or unique prefix.
    """
    if len(refs) != 2:
        what = "stages (ids or unique prefixes)" if stages else "runs (ids, unique prefixes or `last`)"
        given = f"got {len(refs)}" + (f": {' '.join(refs)}" if refs else "")
        raise click.UsageError(f"give the two {what} to compare, A and B; {given}"
                               + ("" if stages else " (footprint runs lists the runs)"))
    a_ref, b_ref = refs
    from ._compare import compare_run_data
    from ._diff import diff_snapshots
    from ._render import comparison_lines, snapshot_diff_lines
    from .errors import NotFoundError

    with reading(db) as store:
        if stages:
            stage_a, run_a = store.resolve_stage(a_ref)
            stage_b, run_b = store.resolve_stage(b_ref)
            data_a = store.load_run(run_a)
            data_b = data_a if run_b == run_a else store.load_run(run_b)
            for stage_id, data in ((stage_a, data_a), (stage_b, data_b)):
                if not data.inputs.get(stage_id):
                    stage = data.stage(stage_id)
                    raise NotFoundError(f"stage {stage_id} ({stage.kind} {stage.name!r}) recorded no snapshot to diff")
            diff = diff_snapshots(data_a.snapshot(stage_a), data_b.snapshot(stage_b), {**data_a.items, **data_b.items})
            if as_json:
                _echo_json({"stage_a": stage_a, "stage_b": stage_b, **diff.to_dict()})
                return
            sa, sb = data_a.stage(stage_a), data_b.stage(stage_b)
            _echo_lines([f"A  {sa.kind} {sa.name!r}  {stage_a}  (run {run_a})",
                         f"B  {sb.kind} {sb.name!r}  {stage_b}  (run {run_b})", "",
                         *snapshot_diff_lines(diff, width=max(40, _width() - 50))])
            return
        data_a = store.load_run(store.resolve_run_id(a_ref))
        data_b = store.load_run(store.resolve_run_id(b_ref))
    comparison = compare_run_data(data_a, data_b)
    if as_json:
        _echo_json(comparison.to_dict())
        return
    _echo_lines(comparison_lines(comparison, (data_a, data_b), width=_width()))


@click.command("sql")
@click.argument("query")
@db_option
@json_option
@click.option("--width", type=click.IntRange(min=8), default=60, show_default=True, help="Cut cells to this width.")
def sql_command(query: str, db: str, as_json: bool, width: int) -> None:
    """Run a read-only SQL query against the store's views and print the rows as a table.

    The views: runs, stages, edges, context, outputs, items (docs/store.md describes them).
    """
    import duckdb

    from ._render import one_line, table
    from .errors import StoreError

    with reading(db) as store:
        # a query reads the store's tables, not the files and URLs of this machine (read_csv,
        # read_text, glob, an https:// parquet): DuckDB refuses them for the rest of the process
        store.query("SET enable_external_access = false")
        try:
            columns, rows = store.read_query(query)
        except StoreError as exc:
            if isinstance(exc.__cause__, duckdb.PermissionException):
                refused = str(exc.__cause__).splitlines()[0].removeprefix("Permission Error: ")
                raise StoreError(f"footprint sql reads only the store ({db}), not other files or URLs: "
                                 f"{refused.split(' - ')[0]}") from exc
            raise
    if as_json:
        _echo_json([dict(zip(columns, row, strict=True)) for row in rows])
        return
    _echo_lines(table(columns, ([one_line(str(v), width) if v is not None else "NULL" for v in row] for row in rows)))
    click.echo(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")


def register(group: click.Group) -> None:
    """Add the recording commands to ``group``."""
    for command in (runs_command, show_command, why_command, diff_command, sql_command):
        group.add_command(command)
    group.add_command(diff_command, name="compare")  # one command, two names: people look for either
    from ._export_cli import export  # footprint export otlp|parquet (imports this module's db_option)

    group.add_command(export)

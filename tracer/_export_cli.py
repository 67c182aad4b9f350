"""`footprint export`: recorded runs to an OpenTelemetry collector (OTLP) or to Parquet files.

    footprint export otlp last --endpoint http://localhost:6006          # Phoenix
    footprint export otlp --session maya-1 --protocol grpc --endpoint http://localhost:4317
    footprint export parquet exports/
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .cli import db_option
from .errors import ExportError

if TYPE_CHECKING:  # imported when a command runs (importing the store imports DuckDB): --help is answered at once
    from ._rundata import RunData
    from ._store import Store


@click.group("export")
def export() -> None:
    """Export recorded runs: OpenTelemetry spans over OTLP, or the store's views as Parquet files."""


def _default_endpoint(protocol: str) -> str:
    for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        if os.environ.get(name):
            return f"{os.environ[name]} (from {name})"
    return "http://localhost:4318/v1/traces" if protocol == "http" else "localhost:4317"


def _run_ids(store: Store, refs: tuple[str, ...], session: str | None, all_runs: bool) -> list[str]:
    if sum((bool(refs), session is not None, all_runs)) > 1:
        raise click.UsageError("name the runs to export, or pass --session ID, or --all: one of them")
    if refs:
        return list(dict.fromkeys(store.resolve_run_id(ref) for ref in refs))
    if session is not None:
        ids = [r.id for r in store.session_runs(session)]
        if not ids:
            raise ExportError(f"session {session!r} has no runs in {store.path}")
        return ids
    if all_runs:
        from ._run_finding import RunFilter

        every = RunFilter(forks=True)  # re-runs too: they are recorded runs like the others
        total = store.count_runs(every)
        ids = [r.id for offset in range(0, total, 500) for r in store.list_runs(every, limit=500, offset=offset)]
        return list(reversed(ids))  # oldest first
    raise click.UsageError("name the runs to export (ids, id prefixes or `last`), or pass --session ID or --all")


@export.command("otlp")
@click.argument("runs", nargs=-1, metavar="[RUN]...")
@db_option
@click.option("--endpoint", help="The collector: http://HOST:4318 for HTTP (the /v1/traces path is added "
              "to a bare URL), http://HOST:4317 for gRPC. Default: the OTEL_EXPORTER_OTLP_* variables.")
@click.option("--protocol", type=click.Choice(["http", "grpc"]), default=None,
              help="OTLP transport. Default: OTEL_EXPORTER_OTLP_PROTOCOL, else http (protobuf).")
@click.option("--content/--no-content", default=None,
              help="Include message content (prompts, messages, tool arguments and results). Off unless "
              "given or OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true.")
@click.option("--session", help="Export every run of this session.")
@click.option("--all", "all_runs", is_flag=True, help="Export every run in the store.")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=10.0, show_default=True,
              help="Seconds to wait for the collector per batch.")
def otlp(
    runs: tuple[str, ...], db: str, endpoint: str | None, protocol: str | None, content: bool | None,
    session: str | None, all_runs: bool, timeout: float,
) -> None:
    """Send recorded runs to an OpenTelemetry collector as GenAI spans, with their recorded times.

    Each run becomes an `invoke_agent` span with `chat` and `execute_tool` children; every span
    carries footprint.run.id and footprint.stage.id. Ids are derived from the recorded ids, so
    sending a run twice sends the same spans. Standard OTEL_* variables (endpoint, headers,
    certificates, service name) apply.
    """
    from ._store import Store
    from .otel._exporter import (
        check_collector_reachable,
        content_from_env,
        export_runs,
        otlp_span_exporter,
        quiet_exporter_logs,
        resolve_protocol,
    )

    kind = resolve_protocol(protocol)
    with_content = content_from_env() if content is None else content
    with Store.open(db, read_only=True) as store:
        ids = _run_ids(store, runs, session, all_runs)
        if not ids:  # only --all of an empty store: nothing to send, so no collector is needed
            click.echo(f"no runs to export in {db}")  # as `footprint runs` says it (exit 0)
            return
        check_collector_reachable(endpoint, kind, timeout=min(1.0, timeout))
        exporter = otlp_span_exporter(endpoint, kind, timeout=timeout)
        target = endpoint or _default_endpoint(kind)
        click.echo(f"Sending {len(ids)} run(s) from {db} to {target} over OTLP/{kind}"
                   f"{' with message content' if with_content else ''}...", err=True)

        def loaded() -> Iterator[RunData]:
            with click.progressbar(ids, label="runs", file=sys.stderr, show_pos=True) as bar:
                for run_id in bar:
                    yield store.load_run(run_id)

        try:
            with quiet_exporter_logs() as said:
                try:
                    sent = export_runs(loaded() if len(ids) > 1 else iter([store.load_run(ids[0])]), exporter,
                                       content=with_content)
                except ExportError as exc:
                    if not said:
                        raise
                    raise ExportError(f"{exc} The exporter said: {said[-1]}") from exc
        finally:
            exporter.shutdown()
    click.echo(f"exported {sent} span(s) from {len(ids)} run(s) to {target}")


@export.command("parquet")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@db_option
@click.option("--view", "views", multiple=True,
              type=click.Choice(["runs", "stages", "edges", "context", "outputs", "items"]),
              help="Export only this view (repeatable). Default: every view.")
@click.option("--compression", type=click.Choice(["zstd", "snappy", "gzip", "uncompressed"]), default="zstd",
              show_default=True)
def parquet(directory: Path, db: str, views: tuple[str, ...], compression: str) -> None:
    """Write the store's views (runs, stages, edges, context, outputs, items) as DIRECTORY/<view>.parquet."""
    from ._parquet import PARQUET_VIEWS, export_parquet
    from ._store import Store

    with Store.open(db, read_only=True) as store:
        files = export_parquet(store, directory, views=views or PARQUET_VIEWS, compression=compression)
    for f in files:
        click.echo(f"{f.path}  {f.rows} row(s)")

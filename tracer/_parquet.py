"""Parquet export of the store's public views, for users who outgrow one DuckDB file.

Each view (``runs``, ``stages``, ``edges``, ``context``, ``outputs``, ``items``; see ``_schema``)
becomes ``DIR/<view>.parquet`` through DuckDB's ``COPY ... TO (FORMAT parquet)``, so the files keep
the views' column names and types and can be read by any engine (DuckDB, Polars, Spark, BigQuery).
Each file is written beside its final name and renamed into place, so a reader never sees half a file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import duckdb

from ._store import Store
from .errors import ExportError

PARQUET_VIEWS = ("runs", "stages", "edges", "context", "outputs", "items")
COMPRESSIONS = ("zstd", "snappy", "gzip", "uncompressed")


@dataclass(frozen=True)
class ParquetFile:
    """One exported view: its name, the file written and how many rows it holds."""

    view: str
    path: Path
    rows: int


def _quote(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def export_parquet(
    store: Store,
    directory: str | os.PathLike[str],
    *,
    views: tuple[str, ...] | list[str] = PARQUET_VIEWS,
    compression: str = "zstd",
) -> list[ParquetFile]:
    """Write each view of ``store`` to ``directory/<view>.parquet`` (created if needed; files replaced),
    each once however often it is named.

    Raises :class:`~tracer.ExportError` naming an unknown view or compression, or a directory that
    cannot be written.
    """
    views = list(dict.fromkeys(views))
    unknown = [v for v in views if v not in PARQUET_VIEWS]
    if unknown:
        raise ExportError(f"no view named {', '.join(unknown)}; the views are {', '.join(PARQUET_VIEWS)}")
    if compression not in COMPRESSIONS:
        raise ExportError(f"unknown Parquet compression {compression!r}; use one of {', '.join(COMPRESSIONS)}")
    target = Path(directory)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(f"cannot create the export directory {target}: {exc.strerror or exc}") from exc
    written: list[ParquetFile] = []
    cursor = store.cursor()
    try:
        for view in views:
            final = target / f"{view}.parquet"
            partial = target / f".{view}.parquet.partial"
            try:
                # the view name comes from PARQUET_VIEWS, never from the user, so it is safe to format in
                row = cursor.execute(
                    f"COPY (SELECT * FROM {view}) TO {_quote(partial)} (FORMAT parquet, COMPRESSION {compression})"
                ).fetchone()
                os.replace(partial, final)
            except (duckdb.Error, OSError) as exc:
                partial.unlink(missing_ok=True)
                raise ExportError(f"could not write {final} from the {view} view of {store.path}: {exc}") from exc
            written.append(ParquetFile(view, final, int(row[0]) if row else 0))
    finally:
        cursor.close()
    return written

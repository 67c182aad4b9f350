"""Errors raised by the recording core.

    FootprintError                 root of every footprint error (all packages)
    └── TracerError
        ├── StoreError             a store file cannot be opened, read or written
        │   ├── NotAStoreError     the file is not a footprint store (or not DuckDB at all)
        │   ├── NewerSchemaError   the store was written by a newer footprint
        │   └── StoreLockedError   another process holds the store for writing
        ├── NotFoundError          a run, stage or item id matches nothing (or more than one)
        │   └── AmbiguousIdError   an id prefix matches more than one run or stage
        ├── RecordingError         the recorder was misused (closed stage, ended run, ...)
        └── ExportError            an export (OTLP, Parquet) could not be configured or delivered
"""

from __future__ import annotations


class FootprintError(Exception):
    """Root of every error footprint raises on purpose."""


class TracerError(FootprintError):
    """An error of the recording core."""


class StoreError(TracerError):
    """A store file cannot be opened, read or written."""


class NotAStoreError(StoreError):
    """The file exists but is not a footprint store."""


class NewerSchemaError(StoreError):
    """The store's schema is newer than this footprint understands."""


class StoreLockedError(StoreError):
    """Another process holds the store open for writing."""


class NotFoundError(TracerError):
    """An id matched no record, or a prefix matched more than one."""


class AmbiguousIdError(NotFoundError):
    """An id prefix matches more than one run or stage: ``ref`` the prefix, ``matches`` how many."""

    def __init__(self, message: str, *, ref: str, matches: int) -> None:
        super().__init__(message)
        self.ref = ref
        self.matches = matches


class RecordingError(TracerError):
    """The recorder API was used out of order."""


class ExportError(TracerError):
    """An export (OpenTelemetry, Parquet) could not be configured or delivered."""


def quoted(value: object, limit: int = 80) -> str:
    """``value`` quoted for an error message: whole up to ``limit`` characters, else its start and an
    ellipsis (an id of 5,000 characters is not echoed whole, nor cut without saying so)."""
    text = str(value)
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def json_kind(value: object) -> str:
    """What ``value`` (parsed JSON) is, in JSON's words, for an error a client or a model reads:
    ``an array``, ``null``, ``a string`` (not Python's ``list``, ``NoneType``, ``str``)."""
    kinds = {list: "an array", dict: "an object", str: "a string", bool: "true or false", int: "a number",
             float: "a number", type(None): "null"}
    return kinds.get(type(value), "not JSON")

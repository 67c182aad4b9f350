"""The sync journal: a ``sync`` stage made durable by one small write and one fdatasync.

Committing a stage's rows to DuckDB takes a transaction of several statements, about a millisecond
each on a small machine, while an fdatasync of a few hundred bytes takes ~130 µs. So under ``sync``
durability each bundle of rows is appended to a journal beside the store file (``<store>.journal``)
and the journal is synced before the stage's close returns. The writer thread inserts the same
bundles into DuckDB in its usual batches and, in the same transaction, records in ``fp_meta``
the last journal number it applied. A store opened for writing after a crash first applies the
records past that number (:func:`pending`); a clean close applies everything and removes the file.

A record is a header (payload length u32, crc32 u32, number u64, little-endian) and the bundle as
msgpack. The journal is two segment files, ``<store>.journal`` and ``<store>.journal.1``, written in
turn: once the one being written is :data:`REUSE_AFTER` bytes in, the next sync writes the other
one from its start, as soon as the tables hold every record in it. The writer thread lags the syncs
by a batch or so, never a whole segment, so under a steady load neither file grows past about
:data:`REUSE_AFTER` (one file reused only when the writer had caught up at the moment of a sync
grew to 99 MB in the soak). Each file is allocated ahead and written over, so a sync overwrites
allocated blocks and changes no file size (the fdatasync then has no metadata to journal). Reading
a segment stops at the first record whose checksum fails or whose number is not the next one: a
torn tail (a write no caller was told had finished) or an earlier pass, all of whose records the
tables hold. A segment is written only after the other one is synced, so the records the tables
lack are the numbers after theirs, read from the two segments in order up to the first gap.

Group commit: a sync writes everything appended so far, so bundles appended by other threads (or
other runs) meanwhile share one fdatasync, and a caller whose bundle another sync already covered
returns at once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import threading
import zlib
from typing import Any

import msgspec

from ._json import utf8_value
from ._writer import JOURNAL_KEY, Bundle, StageRows
from .errors import StoreError

_HEADER = struct.Struct("<IIQ")  # payload length, crc32 of number + payload, record number
_NUMBER = struct.Struct("<Q")
_GROW = 1 << 20  # the file is allocated ahead in steps of this many bytes
REUSE_AFTER = 4 << 20  # once this far in with everything applied, the next sync starts at offset 0
_encoder = msgspec.msgpack.Encoder()
log = logging.getLogger("footprint.tracer")


def journal_path(store_path: str) -> str:
    """Where the journal of the store at ``store_path`` lives (its first segment)."""
    return store_path + ".journal"


def segment_paths(journal: str) -> tuple[str, str]:
    """The two segment files of the journal at ``journal`` (see the module's docstring)."""
    return journal, journal + ".1"


def journal_files(store_path: str) -> list[str]:
    """The journal segments beside the store at ``store_path`` that exist."""
    return [p for p in segment_paths(journal_path(store_path)) if os.path.exists(p)]


def encode_bundle(bundle: Bundle | StageRows) -> bytes:
    """The bundle as one journal payload."""
    if type(bundle) is StageRows:
        value: tuple[Any, ...] = ("s", bundle.stage, bundle.snapshot, bundle.items, bundle.other)
    else:
        assert isinstance(bundle, Bundle)
        value = ("b", bundle.rows, bundle.run_ends)
    try:
        return _encoder.encode(value)
    except UnicodeEncodeError:  # a lone surrogate: journaled as its escape, as the writer stores it
        return _encoder.encode(utf8_value(value))


def decode_bundle(payload: bytes) -> Bundle | StageRows:
    """The bundle a payload of :func:`encode_bundle` holds."""
    value = msgspec.msgpack.decode(payload)
    if value[0] == "s":
        rows = StageRows()
        rows.stage = tuple(value[1])
        rows.snapshot = None if value[2] is None else _snapshot_row(value[2])
        rows.items = None if value[3] is None else [tuple(r) for r in value[3]]
        rows.other = None if value[4] is None else {t: [tuple(r) for r in rs] for t, rs in value[4].items()}
        return rows
    bundle = Bundle({t: [_snapshot_row(r) if t == "fp_snapshot" else tuple(r) for r in rs]
                     for t, rs in value[1].items()})
    bundle.run_ends = [tuple(r) for r in value[2]]
    return bundle


def _snapshot_row(row: list[Any]) -> tuple[Any, ...]:
    """A journaled ``fp_snapshot`` row; one journaled before snapshots were chained (schema 2) is a
    whole snapshot, a chain of its own."""
    if len(row) == 5:
        return (*row, row[1], 0, 0, 0, len(row[2].split("\x1f")) if row[2] else 0, 0, 0, 0, 0, None)
    return tuple(row)


def _record(number: int, payload: bytes) -> bytes:
    crc = zlib.crc32(payload, zlib.crc32(_NUMBER.pack(number)))
    return _HEADER.pack(len(payload), crc, number) + payload


def read_records(path: str) -> list[tuple[int, bytes]]:
    """The journal's valid records from its start, in order: (number, payload)."""
    try:
        with open(path, "rb") as file:
            data = file.read()
    except FileNotFoundError:
        return []
    records: list[tuple[int, bytes]] = []
    offset = 0
    while offset + _HEADER.size <= len(data):
        length, crc, number = _HEADER.unpack_from(data, offset)
        end = offset + _HEADER.size + length
        if length == 0 or end > len(data) or (records and number != records[-1][0] + 1):
            break
        payload = data[offset + _HEADER.size:end]
        if zlib.crc32(payload, zlib.crc32(_NUMBER.pack(number))) != crc:
            break
        records.append((number, payload))
        offset = end
    return records


def read_journal(path: str, applied: int = 0) -> list[tuple[int, bytes]]:
    """The records past ``applied`` in the journal at ``path`` (both segments), in order, up to the
    first number missing."""
    found = {n: payload for segment in segment_paths(path) for n, payload in read_records(segment) if n > applied}
    records = []
    while applied + 1 in found:
        applied += 1
        records.append((applied, found[applied]))
    return records


def applied_number(meta: dict[str, str]) -> int:
    """The last journal record the store holds, from its ``fp_meta`` rows."""
    try:
        return int(meta.get(JOURNAL_KEY, "0"))
    except ValueError:
        return 0


def pending(path: str, applied: int) -> list[Bundle | StageRows]:
    """The journaled bundles of the store at ``path`` that its tables do not hold yet, numbered."""
    bundles = []
    for number, payload in read_journal(journal_path(path), applied):
        try:
            bundle = decode_bundle(payload)
        except (msgspec.DecodeError, IndexError, TypeError, AttributeError, ValueError) as exc:
            raise StoreError(
                f"{journal_path(path)}: record {number} passed its checksum but cannot be read ({exc}); "
                f"move {' and '.join(journal_files(path))} aside to open the store without its last "
                f"sync-recorded stages"
            ) from exc
        bundle.seq = number
        bundles.append(bundle)
    return bundles


def remove_journal(store_path: str) -> None:
    """Delete the journal beside the store at ``store_path`` (its tables hold all of it)."""
    for segment in segment_paths(journal_path(store_path)):
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(segment)
        except OSError as exc:
            raise StoreError(f"cannot remove the applied sync journal {segment}: {exc.strerror}") from exc


class Journal:
    """The journal files of one writable store; numbers continue after ``last`` (already applied)."""

    def __init__(self, path: str, last: int) -> None:
        self.path = path
        self._fds: list[int | None] = [self._create(segment_paths(path)[0]), None]  # the second on first use
        with contextlib.suppress(OSError):
            os.unlink(segment_paths(path)[1])  # an earlier store's, all of it applied before this open
        self.lock = threading.Lock()  # held while a bundle is numbered and queued: numbers follow queue order
        self._sync_lock = threading.Lock()  # one sync writes the files at a time
        self._buffer: list[bytes] = []  # records appended and not yet written
        self._appended = last  # the number of the last record appended
        self._synced = last  # ... written and synced
        self.applied = last  # ... in the store's tables (set by the writer thread)
        self._segment = 0  # the segment being written
        self._synced_offset = 0  # where in it the next write goes
        self._allocated = [0, 0]
        self._last_in = [last, last]  # the last record number written to each segment
        self._closed = False

    @staticmethod
    def _create(segment: str) -> int:
        try:
            return os.open(segment, os.O_RDWR | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o600)  # conversations: the owner only
        except OSError as exc:
            raise StoreError(f"cannot create the sync journal {segment}: {exc.strerror}") from exc

    def append(self, payload: bytes) -> int:
        """Number a payload and buffer its record; call with :attr:`lock` held. Returns the number."""
        self._appended += 1
        self._buffer.append(_record(self._appended, payload))
        return self._appended

    def sync(self, number: int) -> None:
        """Return once record ``number`` (and every one before it) is on disk."""
        if self._synced >= number:
            return
        with self._sync_lock:
            if self._synced >= number:  # another caller's sync covered it meanwhile
                return
            if self._closed:
                raise StoreError(f"the sync journal {self.path} is closed")
            with self.lock:
                records, self._buffer = self._buffer, []
                last = self._appended
            data = b"".join(records)
            segment, offset = self._next_write()
            try:
                fd = self._fds[segment]
                if fd is None:
                    fd = self._fds[segment] = self._create(segment_paths(self.path)[segment])
                if offset + len(data) > self._allocated[segment]:
                    self._allocate(segment, offset + len(data))
                os.pwrite(fd, data, offset)
                os.fdatasync(fd)
            except (OSError, StoreError) as exc:
                with self.lock:  # kept for a later try: nothing was acknowledged
                    self._buffer[:0] = records
                if isinstance(exc, StoreError):
                    raise
                raise StoreError(f"writing the sync journal {self.path} failed: {exc.strerror}") from exc
            self._segment, self._synced_offset = segment, offset + len(data)
            self._last_in[segment] = self._synced = last

    def _next_write(self) -> tuple[int, int]:
        """The segment and offset the next sync writes at."""
        segment, offset = self._segment, self._synced_offset
        if offset >= REUSE_AFTER:
            if self.applied >= self._synced:
                offset = 0  # everything written so far is in the store: write over it from the start
            elif self.applied >= self._last_in[1 - segment]:
                segment, offset = 1 - segment, 0  # the other segment is all in the store: write over it
        return segment, offset

    def mark_applied(self, number: int) -> None:
        """The store's tables hold every record up to ``number`` (called by the writer thread)."""
        self.applied = max(self.applied, number)

    @property
    def complete(self) -> bool:
        """True when the tables hold every record appended."""
        return self.applied >= self._appended

    def _allocate(self, segment: int, size: int) -> None:
        size = max(size, self._allocated[segment]) + _GROW
        try:
            os.posix_fallocate(self._fds[segment], 0, size)  # type: ignore[arg-type]
        except (OSError, AttributeError):  # a file system without it: writes extend the file instead
            self._allocated[segment] = 1 << 62
            return
        self._allocated[segment] = size

    def close(self, *, remove: bool) -> None:
        """Close the files; ``remove``: delete them as well (when everything in them is applied)."""
        with self._sync_lock:
            if self._closed:
                return
            self._closed = True
            for fd in self._fds:
                if fd is not None:
                    os.close(fd)
        if remove:
            for segment in segment_paths(self.path):
                try:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(segment)
                except OSError as exc:
                    log.warning("could not remove the sync journal %s: %s", segment, exc)

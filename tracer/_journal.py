"""The sync journal: a ``sync`` stage made durable by one small write and one fdatasync.

Committing a stage's rows to DuckDB takes a transaction of several statements, about a millisecond
each on a small machine, while an fdatasync of a few hundred bytes takes ~130 µs. So under ``sync``
durability each bundle of rows is appended to a journal beside the store file (``<store>.journal``)
and the journal is synced before the stage's close returns. The writer thread inserts the same
bundles into DuckDB in its usual batches and, in the same transaction, records in ``fp_meta``
the last journal number it applied. A store opened for writing after a crash first applies the
records past that number (:func:`pending`); a clean close applies everything and removes the file.

A record is a header (payload length u32, crc32 u32, number u64, little-endian) and the bundle as
msgpack. The file is allocated ahead and written from its start again once everything in it is
applied, so a sync overwrites allocated blocks and changes no file size (the fdatasync then has
no metadata to journal). Reading stops at the first record whose checksum fails or whose number
is not the next one: a torn tail (a write no caller was told had finished) or an earlier pass.

Group commit: a sync writes everything appended so far, so bundles appended by other threads (or
other runs) meanwhile share one fdatasync, and a caller whose bundle another sync already covered
returns at once.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import zlib
from typing import Any

import msgspec

from ._writer import JOURNAL_KEY, Bundle, StageRows
from .errors import StoreError

_HEADER = struct.Struct("<IIQ")  # payload length, crc32 of number + payload, record number
_NUMBER = struct.Struct("<Q")
_GROW = 1 << 20  # the file is allocated ahead in steps of this many bytes
REUSE_AFTER = 4 << 20  # once this far in with everything applied, the next sync starts at offset 0
_encoder = msgspec.msgpack.Encoder()
log = logging.getLogger("footprint.tracer")


def journal_path(store_path: str) -> str:
    """Where the journal of the store at ``store_path`` lives."""
    return store_path + ".journal"


def encode_bundle(bundle: Bundle | StageRows) -> bytes:
    """The bundle as one journal payload."""
    if type(bundle) is StageRows:
        return _encoder.encode(("s", bundle.stage, bundle.snapshot, bundle.items, bundle.other))
    assert isinstance(bundle, Bundle)
    return _encoder.encode(("b", bundle.rows, bundle.run_ends))


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


def applied_number(meta: dict[str, str]) -> int:
    """The last journal record the store holds, from its ``fp_meta`` rows."""
    try:
        return int(meta.get(JOURNAL_KEY, "0"))
    except ValueError:
        return 0


def pending(path: str, applied: int) -> list[Bundle | StageRows]:
    """The journaled bundles of the store at ``path`` that its tables do not hold yet, numbered."""
    bundles = []
    for number, payload in read_records(journal_path(path)):
        if number > applied:
            try:
                bundle = decode_bundle(payload)
            except (msgspec.DecodeError, IndexError, TypeError, AttributeError, ValueError) as exc:
                raise StoreError(
                    f"{journal_path(path)}: record {number} passed its checksum but cannot be read ({exc}); "
                    f"move the file aside to open the store without its last sync-recorded stages"
                ) from exc
            bundle.seq = number
            bundles.append(bundle)
    return bundles


class Journal:
    """The journal file of one writable store; numbers continue after ``last`` (already applied)."""

    def __init__(self, path: str, last: int) -> None:
        self.path = path
        try:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o600)  # conversations: the owner only
        except OSError as exc:
            raise StoreError(f"cannot create the sync journal {path}: {exc.strerror}") from exc
        self.lock = threading.Lock()  # held while a bundle is numbered and queued: numbers follow queue order
        self._sync_lock = threading.Lock()  # one sync writes the file at a time
        self._buffer: list[bytes] = []  # records appended and not yet written
        self._appended = last  # the number of the last record appended
        self._synced = last  # ... written and synced
        self.applied = last  # ... in the store's tables (set by the writer thread)
        self._synced_offset = 0  # where the next write goes
        self._allocated = 0
        self._closed = False

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
            offset = self._synced_offset
            if offset >= REUSE_AFTER and self.applied >= self._synced:
                offset = 0  # everything written so far is in the store: write over it from the start
            try:
                if offset + len(data) > self._allocated:
                    self._allocate(offset + len(data))
                os.pwrite(self._fd, data, offset)
                os.fdatasync(self._fd)
            except OSError as exc:
                with self.lock:  # kept for a later try: nothing was acknowledged
                    self._buffer[:0] = records
                raise StoreError(f"writing the sync journal {self.path} failed: {exc.strerror}") from exc
            self._synced_offset = offset + len(data)
            self._synced = last

    def mark_applied(self, number: int) -> None:
        """The store's tables hold every record up to ``number`` (called by the writer thread)."""
        self.applied = max(self.applied, number)

    @property
    def complete(self) -> bool:
        """True when the tables hold every record appended."""
        return self.applied >= self._appended

    def _allocate(self, size: int) -> None:
        size = max(size, self._allocated) + _GROW
        try:
            os.posix_fallocate(self._fd, 0, size)
        except (OSError, AttributeError):  # a file system without it: writes extend the file instead
            self._allocated = 1 << 62
            return
        self._allocated = size

    def close(self, *, remove: bool) -> None:
        """Close the file; ``remove``: delete it as well (when everything in it is applied)."""
        with self._sync_lock:
            if self._closed:
                return
            self._closed = True
            os.close(self._fd)
        if remove:
            try:
                os.unlink(self.path)
            except OSError as exc:
                log.warning("could not remove the sync journal %s: %s", self.path, exc)

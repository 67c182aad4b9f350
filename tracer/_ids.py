"""Identifiers that sort by creation time.

Run and stage ids begin with the creation time in milliseconds, so rows written in order are also
sorted by id; DuckDB's per-block min/max statistics then prune scans of `WHERE run_id = ?` to a
few blocks even in a store of millions of stages.
"""

from __future__ import annotations

import os
import threading
import time

_lock = threading.Lock()
_last_ms = 0
_counter = 0
# Randomness drawn once per process (and again in a forked child): ids made in the same
# millisecond by two processes still differ, without a system call per id.
_process_tag = os.urandom(3).hex()


def _new_process_tag() -> None:
    global _process_tag
    _process_tag = os.urandom(3).hex()


os.register_at_fork(after_in_child=_new_process_tag)


def new_id(prefix: str) -> str:
    """A new id like ``r-0193a1b2c3d4-00f1a2b3c4``: prefix, time in ms (hex), sequence, process tag."""
    global _last_ms, _counter
    ms = time.time_ns() // 1_000_000
    with _lock:
        if ms <= _last_ms:
            ms = _last_ms
            _counter += 1
        else:
            _last_ms = ms
            _counter = 0
        seq = _counter
    return f"{prefix}-{ms:012x}-{seq:04x}{_process_tag}"

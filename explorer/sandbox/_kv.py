"""A tiny key-value API over one table of the store: JSON records by (namespace, key).

The sandbox keeps its personas and conversations here, in the same DuckDB file as the runs it
records, through the store's own cursors (the explorer never imports duckdb).
"""

from __future__ import annotations

import json
import time
from typing import Any

from tracer import Store

from ..errors import SandboxError

TABLE = "explorer_kv"


class KeyValue:
    """JSON values by (namespace, key) in the ``explorer_kv`` table of ``store``."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._ready = False

    def _table_exists(self) -> bool:
        rows = self.store.query(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [TABLE]
        )
        return bool(rows[0][0])

    def _ensure(self) -> None:
        if self._ready:
            return
        if self.store.read_only:
            raise SandboxError(
                f"{self.store.path} is open read-only, so the sandbox cannot save; open it without --read-only"
            )
        cur = self.store.cursor()
        try:
            with self.store.committing():  # must not overlap a cache trim (tracer._upkeep)
                cur.execute(
                    f"CREATE TABLE IF NOT EXISTS {TABLE} (namespace VARCHAR, key VARCHAR, value VARCHAR, "
                    f"updated_at DOUBLE, PRIMARY KEY (namespace, key))"
                )
        finally:
            cur.close()
        self._ready = True

    def get(self, namespace: str, key: str) -> Any | None:
        """The value stored under ``key``, or None."""
        if not self._ready and not self._table_exists():
            return None
        rows = self.store.query(f"SELECT value FROM {TABLE} WHERE namespace = ? AND key = ?", [namespace, key])
        return json.loads(rows[0][0]) if rows else None

    def items(self, namespace: str) -> list[tuple[str, Any]]:
        """Every (key, value) of a namespace, by key."""
        if not self._ready and not self._table_exists():
            return []
        rows = self.store.query(f"SELECT key, value FROM {TABLE} WHERE namespace = ? ORDER BY key", [namespace])
        return [(str(k), json.loads(v)) for k, v in rows]

    def put(self, namespace: str, key: str, value: Any) -> None:
        """Store ``value`` (JSON-serialisable) under ``key``, replacing what was there."""
        self._ensure()
        cur = self.store.cursor()
        try:
            with self.store.committing():  # must not overlap a cache trim (tracer._upkeep)
                cur.execute(
                    f"INSERT OR REPLACE INTO {TABLE} VALUES (?, ?, ?, ?)",
                    [namespace, key, json.dumps(value, ensure_ascii=False), time.time()],
                )
        finally:
            cur.close()

    def delete(self, namespace: str, key: str) -> bool:
        """Remove ``key``; True when it was there."""
        if self.get(namespace, key) is None:
            return False
        self._ensure()
        cur = self.store.cursor()
        try:
            with self.store.committing():  # must not overlap a cache trim (tracer._upkeep)
                cur.execute(f"DELETE FROM {TABLE} WHERE namespace = ? AND key = ?", [namespace, key])
        finally:
            cur.close()
        return True

"""What the DuckDB session store runs per batch: the statements a save costs, counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hosting import DuckDBPersistence
from hosting.sessions._stored import HeadUpdate, WriteSet


class _Counting:
    """A cursor that remembers the statements run on it."""

    def __init__(self, con: Any) -> None:
        self.con = con
        self.statements: list[str] = []

    def execute(self, sql: str, *args: Any) -> _Counting:
        self.statements.append(sql)
        self.con.execute(sql, *args)
        return self

    def __getattr__(self, name: str) -> Any:
        return getattr(self.con, name)


def _save(sid: str, version: int, text: str) -> WriteSet:
    ws = WriteSet(sid, appends=[("user", f'{{"text": "{text}"}}')], values={"host.session": '{"v": 1}'})
    ws.head = HeadUpdate(version, version + 1, 1.0, 2.0, "idle")
    return ws


async def test_a_batch_updates_the_heads_it_read_and_inserts_only_new_ones(tmp_path: Path) -> None:
    """A save of a stored session updates its head row (no ON CONFLICT upsert, which DuckDB plans
    as a MERGE: about twice an UPDATE's CPU, every batch); a new session's head is inserted; a
    session dropped and written again in one batch is inserted again."""
    store = DuckDBPersistence(path=str(tmp_path / "s.duckdb"))
    try:
        counting = store._con = _Counting(store._con)  # type: ignore[assignment]
        await store.commit(_save("a", 0, "first"))
        counting.statements.clear()
        await store._write([_save("a", 1, "second"), _save("b", 0, "new")])
        heads = [s for s in counting.statements if "fp_session_head" in s and not s.startswith("SELECT")]
        assert [s.split()[0] for s in heads] == ["UPDATE", "INSERT"], heads
        assert not any("ON CONFLICT" in s for s in heads), heads
        await store._write([WriteSet("a", drop=True), _save("a", 0, "again")])
        a = await store.read("a")
        b = await store.read("b")
        assert a.head is not None and a.head.version == 1 and [r[2] for r in a.records] == ['{"text": "again"}']
        assert b.head is not None and b.head.version == 1 and b.head.next_seq == 2
        await store._write([_save("a", 1, "more")])
        a = await store.read("a")
        assert a.head is not None and (a.head.version, a.head.next_seq) == (2, 3)
        assert [r[2] for r in a.records] == ['{"text": "again"}', '{"text": "more"}']
    finally:
        await store.close()

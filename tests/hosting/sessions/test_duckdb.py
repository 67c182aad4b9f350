"""The DuckDB session store's own machinery: batched reads, the index of stored ids, lingering batches.

The conformance suite checks what every store does; these check that the DuckDB store's shortcuts
(answering from memory, batching) give the same answers as reading DuckDB each time would.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import duckdb
import pytest

from agent import Conversation
from hosting import DuckDBSessions, Envelope, SessionStoreError, VersionConflictError
from tracer import ContextItem, Item, ItemKind, Origin, OriginKind


def _envelope(session_id: str, *texts: str, version: int = 0) -> Envelope:
    conversation = Conversation(session_id, "You are terse.")
    for text in texts:
        conversation.messages.append(ContextItem(Item.of_text(ItemKind.USER, text), Origin(OriginKind.USER)))
    return Envelope(session_id, conversation.to_dict(), version=version, messages=tuple(conversation.messages))


def _count_reads(store: DuckDBSessions, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    reads: list[list[str]] = []
    fetch = store._fetch

    def counting(session_ids: list[str]) -> Any:
        reads.append(list(session_ids))
        return fetch(session_ids)

    monkeypatch.setattr(store, "_fetch", counting)
    return reads


async def _stored(path: Path, n: int) -> None:
    store = DuckDBSessions(path=str(path))
    for i in range(n):
        await store.save(_envelope(f"s{i}", f"hello {i}"))
    await store.close()


@pytest.mark.parametrize("index_limit", [100_000, 0])
async def test_concurrent_loads_after_a_restart_are_read_together_and_answered_right(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, index_limit: int
) -> None:
    await _stored(tmp_path / "s.duckdb", 30)
    store = DuckDBSessions(path=str(tmp_path / "s.duckdb"), index_limit=index_limit)  # nothing cached
    reads = _count_reads(store, monkeypatch)
    wanted = [f"s{i}" for i in range(30)] + [f"new{i}" for i in range(10)]
    loaded = await asyncio.gather(*(store.load(sid) for sid in wanted))
    for sid, envelope in zip(wanted, loaded, strict=True):
        if sid.startswith("new"):
            assert envelope is None
        else:
            assert envelope is not None and envelope.version == 1
            assert [m.item.text for m in envelope.conversation_obj().messages] == [f"hello {sid[1:]}"]
    read_ids = [sid for batch in reads for sid in batch]
    assert len(reads) <= 3  # one statement for all the loads that waited together, not forty
    if index_limit:  # never-stored sessions are known absent without asking DuckDB
        assert sorted(read_ids) == sorted(wanted[:30])
    else:
        assert sorted(read_ids) == sorted(wanted)
    await store.close()


async def test_the_index_of_stored_ids_follows_saves_and_deletes_and_gives_way_past_its_limit(tmp_path: Path) -> None:
    await _stored(tmp_path / "s.duckdb", 3)
    store = DuckDBSessions(path=str(tmp_path / "s.duckdb"), index_limit=4)
    assert await store.load("s1") is not None and await store.load("x") is None
    await store.save(_envelope("x", "one"), durable=False)  # queued: a load sees it at once
    loaded = await store.load("x")
    assert loaded is not None and loaded.version == 1
    assert await store.delete("s0") is True and await store.load("s0") is None
    for sid in ("y", "z", "w"):  # past the limit: from here on DuckDB is asked
        await store.save(_envelope(sid, "hi"))
    for sid in ("s1", "s2", "x", "y", "z", "w"):
        got = await store.load(sid)
        assert got is not None and got.session_id == sid
    assert await store.load("s0") is None and await store.load("never") is None
    with pytest.raises(VersionConflictError):
        await store.save(_envelope("w", "created twice"))
    await store.close()


async def test_a_new_session_whose_batch_failed_is_still_new(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = DuckDBSessions(path=str(tmp_path / "s.duckdb"))
    write = store._write

    def failing(batch: Any) -> Any:
        monkeypatch.setattr(store, "_write", write)  # once
        raise duckdb.IOException("disk full")

    monkeypatch.setattr(store, "_write", failing)
    with pytest.raises(SessionStoreError):
        await store.save(_envelope("fresh", "hello"))
    assert await store.load("fresh") is None
    assert (await store.save(_envelope("fresh", "hello"))).version == 1  # not a version conflict
    await store.close()


async def test_queued_saves_linger_but_every_read_of_this_process_sees_them(tmp_path: Path) -> None:
    store = DuckDBSessions(path=str(tmp_path / "s.duckdb"), linger=30.0)  # a batch would wait 30 s
    first = await store.save(_envelope("a", "one"))  # durable: written at once, linger or not
    second = await store.save(_envelope("a", "one", "two", version=first.version), durable=False)
    loaded = await store.load("a")
    assert loaded is not None and loaded.version == second.version == 2
    listed = await asyncio.wait_for(store.list(), 5)  # a list commits what is queued first
    assert [(s.session_id, s.version) for s in listed] == [("a", 2)]
    await store.save(_envelope("b", "new"), durable=False)
    await asyncio.wait_for(store.close(), 5)  # close cuts the linger short and commits
    reopened = DuckDBSessions(path=str(tmp_path / "s.duckdb"))
    assert [s.session_id for s in await reopened.list()] == ["b", "a"]
    await reopened.close()


async def test_a_flush_returns_under_a_steady_stream_of_saves(tmp_path: Path) -> None:
    """flush (and what waits on it: list, delete, a load of a save still queued) waits for the saves
    made so far, not for a moment when nothing is queued, which a busy host may never have."""
    store = DuckDBSessions(path=str(tmp_path / "s.duckdb"), linger=0.02)
    first = await store.save(_envelope("busy", "0"))
    stop = asyncio.Event()

    async def chatter() -> None:
        version = first.version
        while not stop.is_set():
            version = (await store.save(_envelope("busy", "x", version=version), durable=False)).version
            await asyncio.sleep(0)  # a save in every turn of the event loop

    task = asyncio.ensure_future(chatter())
    try:
        await asyncio.sleep(0.05)
        for _ in range(3):
            await asyncio.wait_for(store.flush(), 5)
            listed = await asyncio.wait_for(store.list(), 5)
            assert [s.session_id for s in listed] == ["busy"] and listed[0].version > 1
    finally:
        stop.set()
        await task
    await store.close()


async def test_successive_saves_of_a_session_in_one_batch_are_one_row_with_the_same_outcomes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = DuckDBSessions(path=str(tmp_path / "s.duckdb"), linger=30.0)
    base = await store.save(_envelope("a", "0"))
    written: list[int] = []
    write = store._write

    def counting(rows: Any) -> Any:
        written.append(len(rows))
        return write(rows)

    monkeypatch.setattr(store, "_write", counting)
    version = base.version
    for i in range(1, 4):  # queued: they wait for the batch together
        texts = [str(k) for k in range(i + 1)]
        version = (await store.save(_envelope("a", *texts, version=version), durable=False)).version
    assert await store.load("b") is None  # (known absent: its first save can be queued too)
    await store.save(_envelope("b", "new"), durable=False)
    with pytest.raises(VersionConflictError) as caught:  # a stale writer in the same batch (durable: sent now)
        await store.save(_envelope("a", "stale", version=base.version))
    assert (caught.value.expected, caught.value.found) == (1, 4)
    assert written == [3]  # a's chain of three saves, b, and the stale save: three rows
    await store.close()
    reopened = DuckDBSessions(path=str(tmp_path / "s.duckdb"))
    loaded = await reopened.load("a")
    assert loaded is not None and loaded.version == 4
    assert [m.item.text for m in loaded.conversation_obj().messages] == ["0", "1", "2", "3"]
    await reopened.close()

"""The DuckDB store: opening and checking the file, the writer, and finding and listing runs (whole
runs are read back by :mod:`tracer._store_reads`).

One process writes a store file: the process that opens it for writing owns it until it closes.
Other processes open it read-only when no writer holds it, or read through the host's read API.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import re
import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

import duckdb

from ._files import refuse_truncated, restrict_to_owner, truncated_message, truncation
from ._journal import (
    Journal,
    applied_number,
    encode_bundle,
    journal_files,
    journal_path,
    pending,
    remove_journal,
)
from ._lock import DEFAULT_WAIT, connect
from ._run_finding import RunFinding
from ._schema import APPLICATION, DROP_RUN_INDEXES, MIGRATIONS, SCHEMA_VERSION, TABLES, VIEWS
from ._store_reads import RunReads
from ._upkeep import NEVER, Upkeep
from ._writer import JOURNAL_KEY, Bundle, StageRows, Writer
from .errors import NewerSchemaError, NotAStoreError, StoreError, StoreLockedError

DEFAULT_PATH = "footprint.duckdb"
# DuckDB's memory limit is hard: a checkpoint that must pin more than it fails FATALLY and
# invalidates the database. At 48 MB a host's embedded store (recordings + sessions) died that way
# at ~2,600 turns of 8 sessions (bench/soak.py --turns 1000), and at 64 MB too (in process, turn ~800
# of 8 sessions: 'failed to allocate data of size 10.3 MiB (53.2 MiB/61.0 MiB used)'); 512 MB bounds
# the cache and leaves checkpoints room (DuckDB evicts unpinned blocks long before the limit).
DEFAULT_MEMORY_LIMIT = "512MB"
_SIZE = re.compile(r"^\s*\d+(\.\d+)?\s*(B|KB|KiB|MB|MiB|GB|GiB|TB|TiB)\s*$", re.IGNORECASE)


def _size(value: str) -> str:
    if not _SIZE.match(value):
        raise StoreError(f"memory_limit {value!r} is not a size like '64MB' or '1GB'")
    return value.strip()

_open_stores: weakref.WeakSet[Store] = weakref.WeakSet()


def _refuse_a_second_open(path: str, read_only: bool) -> None:
    """Refuse to open a file again that a store of this process holds for writing (or, to write it,
    holds at all). DuckDB would either refuse with "a different configuration than existing
    connections" or hand both stores one database, each with a writer thread of its own."""
    here = os.path.realpath(path)
    for other in list(_open_stores):
        if other._closed or other.path == ":memory:" or os.path.realpath(other.path) != here:
            continue
        if not other.read_only:
            raise StoreError(f"{path} is already open for writing in this process: use that Store (its reads see "
                             "what it wrote) instead of opening the file again, or close it first")
        if not read_only:
            raise StoreError(f"{path} is open read-only in this process, so it cannot be opened for writing too: "
                             "close that Store first (one Store that reads can write in `with store.writing():`)")


class _OlderSchema(StoreError):
    """A store opened read-only is of an older schema: it is migrated through a writable open first."""


@atexit.register
def _flush_open_stores() -> None:
    for store in list(_open_stores):
        try:
            store.close()
        except Exception:  # at exit there is nobody left to tell but stderr
            import sys

            print(f"footprint: could not flush {store.path} at exit", file=sys.stderr)


class Store(RunFinding, RunReads):
    """A footprint store in a DuckDB file (or in memory with ``path=":memory:"``).

    Open with :meth:`open`. A writable store owns one writer thread; reads use their own cursors
    and may run from any thread.
    """

    def __init__(
        self, con: duckdb.DuckDBPyConnection, path: str, read_only: bool, *, journaled: int = 0,
        replay: Sequence[Bundle | StageRows] = (), memory_limit: str | None = DEFAULT_MEMORY_LIMIT,
    ) -> None:
        self._con = con
        self.path = path
        self.read_only = read_only
        self._memory_limit = memory_limit
        self._closed = False
        self._lock = threading.Lock()
        # checkpoints and cache trims (a writable file; an in-memory store has neither log nor cap)
        self._upkeep = None if read_only or path == ":memory:" else Upkeep(con, path, memory_limit)
        self._writer: Writer | None = None if read_only else Writer(con, path, upkeep=self._upkeep)
        self._plain_rows: bool | None = None  # see _has_plain_rows
        self._journal: Journal | None = None  # made on the first sync-durable bundle
        self._journaled = journaled  # the last journal record the tables hold
        if replay and self._writer is not None:
            self._apply_journal(replay)
        _open_stores.add(self)

    # ----------------------------------------------------------------- opening

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str] = DEFAULT_PATH,
        *,
        read_only: bool = False,
        memory_limit: str | None = DEFAULT_MEMORY_LIMIT,
        wait: float = DEFAULT_WAIT,
        create: bool = True,
    ) -> Store:
        """Open (or, when writable, absent and ``create`` is true, create) the store at ``path``.

        A new file is written in a storage version older DuckDB clients read (``STORAGE_VERSION``).
        While another process holds the file (a writer, or readers when this one wants to write)
        it retries for ``wait`` seconds, then fails with a :class:`StoreLockedError` naming that
        process and what to do. Fails with a :class:`StoreError` naming the file when it is not a footprint store, is
        corrupt, was written by a newer footprint, or is held by another process. It never
        overwrites or recreates an existing file. A store of an older schema is migrated, opened
        read-only too (through a writable open first, as when a sync journal is left over); with ``create=False`` (a command that re-runs what is
        recorded) an absent file fails as it does for a reader, and none is made. ``memory_limit`` (e.g. ``"512MB"``, the default; None for
        DuckDB's default of most of the RAM) bounds DuckDB's cache in a writable store file, so a
        process that records for days keeps a flat footprint (an in-memory store is not capped).
        """
        spath = str(path)
        in_memory = spath == ":memory:"
        if not in_memory:
            file = Path(spath)
            if (read_only or not create) and not file.exists():
                raise StoreError(f"no footprint store at {spath}: record a run first (footprint demo)")
            if file.exists() and file.is_dir():
                raise NotAStoreError(f"{spath} is a directory, not a footprint store")
        if not in_memory:
            _refuse_a_second_open(spath, read_only)
        existed = not in_memory and Path(spath).exists()
        if existed and not read_only:
            refuse_truncated(spath)  # before a writer could touch it
        con = connect(spath, read_only=read_only, wait=wait)
        if existed and read_only:
            try:
                reason = truncation(con, spath)
            except duckdb.Error:
                reason = None
            if reason is not None:
                con.close()
                raise NotAStoreError(truncated_message(spath, reason))
        try:
            if not read_only and not in_memory:  # the store checkpoints itself (see tracer._upkeep)
                con.execute(f"SET checkpoint_threshold = '{NEVER}'")
            created = cls._prepare(con, spath, read_only)  # before the cache is capped: a migration may need more
            journaled, replay = 0, list[Bundle | StageRows]()
            if not in_memory:
                journaled, replay = cls._journal_state(con, spath, read_only, created)
            if not read_only and not in_memory and memory_limit is not None:
                # DuckDB keeps the blocks it wrote cached up to its memory limit (80% of RAM by
                # default), so a recording process would grow with the store. A small cache keeps
                # it flat; big reads still work, spilling to disk when they must.
                con.execute(f"SET memory_limit = '{_size(memory_limit)}'")
        except duckdb.Error as exc:
            con.close()
            raise NotAStoreError(
                f"{spath} is not a readable footprint store (corrupt or truncated?): {exc}"
            ) from exc
        except _OlderSchema as exc:
            # written by an earlier footprint: migrated (as a writer would on opening it), then read
            con.close()
            return cls._read_after_a_writer(spath, memory_limit, wait, older=exc)
        except BaseException:
            con.close()
            raise
        if read_only and replay:
            # a process recording under sync ended without closing the store: its last rows are in
            # the journal. Nobody holds the file (this open would have failed), so they go in first.
            con.close()
            return cls._read_after_a_writer(spath, memory_limit, wait, older=None)
        if not in_memory and not read_only:
            restrict_to_owner(spath)  # conversations live here: readable by the owner only
        try:
            return cls(con, spath, read_only, journaled=journaled, replay=replay, memory_limit=memory_limit)
        except BaseException:
            con.close()
            raise

    @classmethod
    def _read_after_a_writer(
        cls, path: str, memory_limit: str | None, wait: float, *, older: _OlderSchema | None
    ) -> Store:
        """Open ``path`` for writing and close it (the writer migrates an older schema and applies a
        left-over journal as it opens), then open it read-only. ``older`` is the schema a reader
        refused: then a writer holding the file is an error (the schema is still one this footprint
        cannot read); for a journal it is not (that writer applied the journal as it opened)."""
        try:
            cls.open(path, memory_limit=memory_limit, wait=wait).close()
        except StoreLockedError:
            if older is not None:
                raise
        except StoreError as failed:
            if older is None:
                raise
            raise StoreError(f"{older}, older than this footprint reads ({SCHEMA_VERSION}), and migrating it "
                             f"failed: {failed}") from failed
        return cls.open(path, read_only=True, memory_limit=memory_limit, wait=wait)

    @staticmethod
    def _journal_state(
        con: duckdb.DuckDBPyConnection, path: str, read_only: bool, created: bool
    ) -> tuple[int, list[Bundle | StageRows]]:
        """The last journal record the tables hold, and the journaled bundles they do not (a
        process recording under ``sync`` ended without closing the store)."""
        meta = dict(con.execute("SELECT key, value FROM fp_meta WHERE key = ?", [JOURNAL_KEY]).fetchall())
        journaled = applied_number(meta)
        if not journal_files(path):
            return journaled, []
        replay = [] if created else pending(path, journaled)  # (beside a new store: its file is gone)
        if read_only:
            return journaled, replay  # open() applies them through a writable open first
        if not replay:
            remove_journal(path)
        return journaled, replay

    def _apply_journal(self, bundles: Sequence[Bundle | StageRows]) -> None:
        """Write the journaled bundles the tables lack (in one transaction) before anything else."""
        assert self._writer is not None
        for bundle in bundles:
            self._writer.submit(bundle)
        try:
            self._writer.flush()
        except StoreError as exc:
            self._writer.close()
            raise StoreError(
                f"{self.path}: applying the {len(bundles)} sync-recorded bundle(s) left in "
                f"{journal_path(self.path)} failed; the journal is kept: {exc}"
            ) from exc
        self._journaled = max(self._journaled, bundles[-1].seq)
        remove_journal(self.path)  # all of it is committed now
        logging.getLogger("footprint.tracer").info(
            "%s: applied %d sync-recorded bundle(s) from %s", self.path, len(bundles), journal_path(self.path))

    @staticmethod
    def _prepare(con: duckdb.DuckDBPyConnection, path: str, read_only: bool) -> bool:
        """Check (create, migrate) the schema; True when the store was created just now."""
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        if "fp_meta" not in tables:
            if tables:
                raise NotAStoreError(
                    f"{path} is a DuckDB database but not a footprint store (it has tables "
                    f"{', '.join(sorted(tables)[:5])}); pass another --db path"
                )
            if read_only:
                raise NotAStoreError(f"{path} is an empty DuckDB database, not a footprint store")
            con.execute("BEGIN TRANSACTION")
            con.execute(TABLES)
            con.execute(VIEWS)
            con.execute(
                "INSERT INTO fp_meta VALUES ('application', ?), ('schema_version', ?)",
                [APPLICATION, str(SCHEMA_VERSION)],
            )
            con.execute("COMMIT")
            return True
        meta = dict(con.execute("SELECT key, value FROM fp_meta").fetchall())
        if meta.get("application") != APPLICATION:
            raise NotAStoreError(f"{path} has an fp_meta table but was not written by footprint")
        version = int(meta.get("schema_version", "0"))
        if version > SCHEMA_VERSION:
            raise NewerSchemaError(
                f"{path} uses store schema {version}, newer than this footprint reads ({SCHEMA_VERSION}); "
                f"upgrade footprint to open it"
            )
        if version < SCHEMA_VERSION:
            if read_only:
                raise _OlderSchema(f"{path} uses store schema {version}")
            con.execute("BEGIN TRANSACTION")
            try:
                for step in range(version, SCHEMA_VERSION):
                    con.execute(MIGRATIONS[step])
                con.execute(VIEWS)
                con.execute("UPDATE fp_meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)])
                con.execute("COMMIT")
            except duckdb.Error as exc:
                con.execute("ROLLBACK")
                raise StoreError(
                    f"{path}: migrating the store from schema {version} to {SCHEMA_VERSION} failed, and the "
                    f"file was left as it was: {exc}"
                ) from exc
        if not read_only:
            con.execute(DROP_RUN_INDEXES)
        return False

    # ----------------------------------------------------------------- writing

    def submit(self, bundle: Bundle | StageRows) -> None:
        """Queue rows for the writer thread (blocks while its queue is full)."""
        if self._writer is None:
            raise StoreError(f"{self.path} was opened read-only; open it writable to record")
        self._writer.submit(bundle)

    def submit_journaled(self, bundle: Bundle | StageRows) -> int:
        """Queue rows for the writer and append them to the store's journal (see
        :mod:`tracer._journal`); returns the token :meth:`settle` waits for. An in-memory store,
        which has no journal, returns -1: settling it commits everything queued."""
        writer = self._writer
        if writer is None:
            raise StoreError(f"{self.path} was opened read-only; open it writable to record")
        if self.path == ":memory:":
            writer.submit(bundle)
            return -1
        journal = self._journal or self._open_journal()
        payload = encode_bundle(bundle)
        with journal.lock:  # numbered and queued together: the writer's batches hold journal prefixes
            bundle.seq = journal.append(payload)
            writer.submit(bundle)
        return bundle.seq

    def settle(self, token: int) -> None:
        """Return once the rows :meth:`submit_journaled` returned ``token`` for (and every bundle
        journaled before them) would survive a crash: synced to the journal, from which a crashed
        store is completed when it is next opened."""
        if token < 0:
            self.flush()
        elif self._journal is not None:
            self._journal.sync(token)

    def _open_journal(self) -> Journal:
        with self._lock:
            if self._closed:
                raise StoreError(f"{self.path} is closed; nothing more can be recorded into it")
            if self._journal is None:
                journal = Journal(journal_path(self.path), self._journaled)
                assert self._writer is not None
                self._writer.on_applied = journal.mark_applied
                self._journal = journal
            return self._journal

    def flush(self) -> None:
        """Return once everything submitted so far is committed."""
        if self._writer is not None:
            self._writer.flush()

    async def committed(self) -> None:
        """Return once everything submitted so far is committed, as :meth:`flush`, but awaited: no
        thread is held while it waits, and every wait that comes in while a batch is written is
        answered by the next batch together (a host's concurrent turns share one commit). Raises
        :class:`StoreError` when the rows could not be written."""
        writer = self._writer
        if writer is None:
            return
        loop = asyncio.get_running_loop()
        done: asyncio.Future[BaseException | None] = loop.create_future()

        def answer(error: BaseException | None) -> None:
            if not done.done():
                done.set_result(error)

        def hand_over(error: BaseException | None) -> None:  # on the writer's thread
            loop.call_soon_threadsafe(answer, error)

        writer.when_committed(hand_over)
        error = await done
        if error is not None:
            raise StoreError(f"writing to {self.path} failed: {error}") from error

    @property
    def write_failure(self) -> BaseException | None:
        """The error that stopped the writer (every later write fails with it), or None."""
        return self._writer.failure if self._writer is not None else None

    @property
    def writer_stats(self) -> dict[str, int]:
        """The writer's counters (batches, bundles, rows per table), and the store's ``checkpoints``
        and cache ``trims`` (see :meth:`committing`) with the milliseconds they took all told
        (``checkpoint_ms``, ``trim_ms``); empty when read-only."""
        stats = self._writer.stats if self._writer is not None else {}
        if self._upkeep is not None:
            stats.update(checkpoints=self._upkeep.checkpoints, trims=self._upkeep.trims,
                         checkpoint_ms=round(1000 * self._upkeep.checkpoint_seconds),
                         trim_ms=round(1000 * self._upkeep.trim_seconds))
        return stats

    def committing(self) -> AbstractContextManager[None]:
        """Hold the store for one write transaction made on a cursor of this store (the host's session
        store and agents repository write into the recordings file that way): the block's commit
        cannot overlap a cache trim, and the store checkpoints and trims after it when due. Use it
        around BEGIN ... COMMIT (or a single writing statement), not around another ``committing``
        block. See :mod:`tracer._upkeep`."""
        return nullcontext() if self._upkeep is None else self._upkeep.committing()

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Hold the store for reads made on a cursor of this store: they cannot overlap a cache trim
        (during which a read needing more memory than the trim leaves would fail).

        A block that fails DuckDB's checksum is found only when a read reaches it, after the open
        succeeded: such a read is refused as the open refuses a corrupt file (:class:`NotAStoreError`),
        for every reader — the CLI, the explorer, the read API, blame.
        """
        with nullcontext() if self._upkeep is None else self._upkeep.reading():
            try:
                yield
            except duckdb.Error as exc:
                if "corrupt database file" not in str(exc).lower():
                    raise
                raise NotAStoreError(truncated_message(self.path, " ".join(str(exc).split()))) from exc

    def close(self) -> None:
        """Flush, stop the writer and close the file."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._let_go()

    def _let_go(self) -> None:
        """Flush, stop the writer (and its journal) and close the connection."""
        try:
            if self._writer is not None:
                self._writer.close()
                if self._upkeep is None:
                    self._con.execute("CHECKPOINT")
                else:
                    with self._upkeep.lock.exclusive():  # (a session store may still be committing)
                        self._con.execute("CHECKPOINT")
        finally:
            self._con.close()
            _open_stores.discard(self)
            if self._journal is not None:  # kept while the tables lack some of it: the next open applies it
                writer = self._writer
                self._journal.close(remove=writer is not None and writer.failure is None and self._journal.complete)

    @contextmanager
    def writing(self, *, wait: float = 5.0) -> Iterator[Store]:
        """Hold the file for writing for the length of the block; a writable store just stays as it is.

        A store opened read-only lets go of the file, opens it for writing (waiting up to ``wait``
        seconds for other readers or a writer to let go: a :class:`StoreLockedError` names the
        one that did not) and, once the block ends and what it recorded is committed, opens it
        read-only again, so other processes can read it again. Reads on other threads meanwhile
        go through the writable connection.
        """
        if not self.read_only:
            yield self
            return
        if self.path == ":memory:":
            raise StoreError("an in-memory store opened read-only cannot be written")
        self._reopen(read_only=False, wait=wait)
        try:
            yield self
        finally:
            self._reopen(read_only=True, wait=wait)

    def _reopen(self, *, read_only: bool, wait: float) -> None:
        """Let go of the file and open it again, read-only or for writing (this object carries on)."""
        with self._lock:
            if self._closed:
                raise StoreError(f"{self.path} is closed")
            self._let_go()
            try:
                fresh = Store.open(self.path, read_only=read_only, memory_limit=self._memory_limit, wait=wait)
            except BaseException:
                # the reader gets its file back whatever happened (a writer may hold it a moment longer)
                self._adopt(Store.open(self.path, read_only=True, memory_limit=self._memory_limit, wait=wait + 5.0))
                raise
            self._adopt(fresh)

    def _adopt(self, fresh: Store) -> None:
        """Take over ``fresh``'s connection, writer, upkeep and journal state (``fresh`` is dropped)."""
        self._con, self._writer, self.read_only = fresh._con, fresh._writer, fresh.read_only
        self._upkeep = fresh._upkeep  # (the writer's lock: what commits on this store's cursors takes it too)
        self._journal, self._journaled, self._plain_rows = fresh._journal, fresh._journaled, None
        fresh._closed = True
        _open_stores.discard(fresh)
        _open_stores.add(self)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- reading

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor for reading from any thread; close it when done."""
        if self._closed:
            raise StoreError(f"{self.path} is closed")
        journal, writer = self._journal, self._writer
        if journal is not None and not journal.complete and writer is not None and writer.failure is None:
            # rows recorded under sync are durable in the journal first: a read sees them committed
            # (unless the writer failed: then what is committed is all there is to read until reopened)
            self.flush()
        return self._con.cursor()

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run a read-only SQL query against the store's views and return the rows."""
        cur = self.cursor()
        try:
            with self.reading():
                return cur.execute(sql, list(params)).fetchall()
        finally:
            cur.close()

    def read_query(self, sql: str, params: Sequence[Any] = ()) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run one read-only statement (SELECT, or EXPLAIN of one): its column names and rows.

        Anything else (writes, ATTACH, COPY, several statements) is refused with a
        :class:`StoreError`, as is SQL that DuckDB cannot run, its message included. DuckDB's file
        and URL functions (``read_text``, ``read_csv``, ``glob``) are not refused: for SQL that is
        not your own, ``SET enable_external_access = false`` first (for the rest of the process, as
        ``footprint sql`` does; see docs/store.md).
        """
        try:
            statements = duckdb.extract_statements(sql)
        except duckdb.Error as exc:
            raise StoreError(f"not valid SQL: {exc}") from exc
        if len(statements) != 1:
            raise StoreError(f"give exactly one statement (got {len(statements)})")
        kind = statements[0].type
        if kind == duckdb.StatementType.EXPLAIN:  # EXPLAIN ANALYZE runs the statement it explains
            explained = _explained(sql)
            if explained != duckdb.StatementType.SELECT:
                raise StoreError(f"only read-only queries (SELECT) may run here, not EXPLAIN of {explained.name}")
        elif kind != duckdb.StatementType.SELECT:
            first = next((sql[p:].split(None, 1)[0] for p, k in duckdb.tokenize(sql) if k == duckdb.token_type.keyword),
                         kind.name)  # INSTALL is, to DuckDB, a statement of type LOAD
            raise StoreError(f"only read-only queries (SELECT) may run here, not {first.upper()}")
        cur = self.cursor()
        try:
            with self.reading():
                cur.execute(sql, list(params))
                columns = [d[0] for d in cur.description or []]
                return columns, cur.fetchall()
        except duckdb.Error as exc:
            raise StoreError(f"the query failed on {self.path}: {exc}") from exc
        finally:
            cur.close()

    def _has_plain_rows(self) -> bool:
        """Whether an edge, output or snapshot entry is stored row by row (a value that holds a
        separator): rare, so reads skip those tables until one is."""
        if self._plain_rows is None:  # what the file held when first asked
            self._plain_rows = bool(self.query(
                "SELECT EXISTS (FROM fp_edge) OR EXISTS (FROM fp_output) OR EXISTS (FROM fp_entry)")[0][0])
        if not self._plain_rows and self._writer is not None:  # what this process wrote since
            written = self._writer.stats
            self._plain_rows = any(written.get(t) for t in ("fp_edge", "fp_output", "fp_entry"))
        return self._plain_rows


def _explained(sql: str) -> Any:
    """The type of the statement an EXPLAIN explains: the one that starts at the first token after
    the EXPLAIN keyword from which the rest of the text is one statement (past ANALYZE and an
    options list such as ``(ANALYZE true, FORMAT json)``, none of which is one)."""
    tokens = [position for position, kind in duckdb.tokenize(sql) if kind != duckdb.token_type.comment]
    for position in tokens[1:]:
        try:
            statements = duckdb.extract_statements(sql[position:])
        except duckdb.Error:
            continue
        if len(statements) == 1:
            return statements[0].type
    return duckdb.StatementType.EXPLAIN


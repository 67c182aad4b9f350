"""What DuckDB keeps of glibc's heap per statement, by kind of statement: the soak host's "rest".

    .venv/bin/python bench/duckdb_retained.py            # 2,000 statements of each kind
    .venv/bin/python bench/duckdb_retained.py --n 5000

Each kind runs in a fresh database file (a child process of its own, so what one kind leaves in
malloc's arenas does not blur the next): 100 statements to warm up, then ``--n`` more with a
CHECKPOINT every 300, and it prints the bytes malloc holds in use (``mallinfo2().uordblks``)
afterwards minus before, per statement, and the number of free chunks in malloc's arenas before
and after (what glibc's ``_int_malloc`` walks on its slow path). glibc only (Linux).

The kinds are the session store's statements on tables of its shape: an upsert of 8 sessions'
heads (ON CONFLICT), an UPDATE of the same 8 rows, an upsert of 8 values of 300 bytes, an INSERT of
8 records of 1-4 KB, and SELECT 1; then the append-only alternatives: an INSERT of 8 head
revisions (without and with a PRIMARY KEY on (session, revision)), an INSERT of 8 value revisions
of 300 bytes, and the head INSERT followed by pruning the superseded revisions: a DELETE after
every INSERT (``delete_each``), a DELETE every 256 (``prune_256``), or rewriting the table every
256 (CREATE TABLE AS the latest revisions, DROP, RENAME: ``rewrite_256``); and the value INSERT
with a DELETE of the superseded values every 256 (``values_prune_256``). And two reads of the
heads table (8 rows): by ``session_id IN (SELECT unnest(?))`` (a batch's heads in one statement,
``select_in``) and by ``session_id = ?`` (``select_eq``).

    .venv/bin/python bench/duckdb_retained.py --kinds insert_values values_prune_256
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import random
import sys
import tempfile

from _child import print_figures, run_child

KINDS = ("select", "insert_records", "upsert_heads", "update_heads", "upsert_values",
         "insert_heads", "insert_heads_pk", "insert_values", "delete_each", "prune_256", "rewrite_256", "values_prune_256",
         "select_in", "select_eq")
PRUNE = ("DELETE FROM a USING (SELECT session_id AS s, max(rev) AS m FROM a GROUP BY session_id) l "
         "WHERE a.session_id = l.s AND a.rev < l.m")
SIDS = [f"s{j}" for j in range(8)]


class _Info(ctypes.Structure):
    _fields_ = [(f, ctypes.c_size_t) for f in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def _child(kind: str, n: int) -> dict[str, float]:
    import duckdb

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _Info
    con = duckdb.connect(os.path.join(tempfile.mkdtemp(prefix="footprint-retained-"), "x.duckdb"))
    con.execute("CREATE TABLE h (session_id VARCHAR PRIMARY KEY, next_seq BIGINT, version BIGINT)")
    con.execute("CREATE TABLE r (session_id VARCHAR NOT NULL, seq BIGINT NOT NULL, body VARCHAR NOT NULL)")
    con.execute("CREATE TABLE v (session_id VARCHAR NOT NULL, key VARCHAR NOT NULL, value VARCHAR NOT NULL, "
                "PRIMARY KEY (session_id, key))")
    con.execute("INSERT INTO h SELECT unnest(?), 0, 0", [SIDS])
    appended = "CREATE TABLE a (session_id VARCHAR NOT NULL, rev BIGINT NOT NULL, next_seq BIGINT, version BIGINT"
    con.execute(appended + (", PRIMARY KEY (session_id, rev))" if kind == "insert_heads_pk" else ")"))
    con.execute("CREATE TABLE av (session_id VARCHAR NOT NULL, key VARCHAR NOT NULL, rev BIGINT NOT NULL, value VARCHAR)")
    rng = random.Random(0)

    def step(i: int) -> None:
        if kind == "select":
            con.execute("SELECT 1").fetchall()
        elif kind == "select_in":  # the 8 heads of a batch, by one filter
            con.execute("SELECT * FROM h WHERE session_id IN (SELECT unnest(?))", [SIDS]).fetchall()
        elif kind == "select_eq":  # one head (a batch reads only the heads its writer does not hold)
            con.execute("SELECT * FROM h WHERE session_id = ?", [SIDS[i % 8]]).fetchall()
        elif kind == "insert_records":
            con.execute("INSERT INTO r SELECT unnest(?), unnest(?), unnest(?)",
                        [SIDS, [i] * 8, ["x" * rng.randint(1024, 4096) for _ in SIDS]])
        elif kind == "upsert_heads":
            con.execute("INSERT INTO h SELECT unnest(?), unnest(?), unnest(?) ON CONFLICT (session_id) DO UPDATE "
                        "SET next_seq = excluded.next_seq, version = excluded.version", [SIDS, [i] * 8, [i] * 8])
        elif kind == "update_heads":
            con.execute("UPDATE h SET next_seq = c.n, version = c.v FROM (SELECT unnest(?) AS id, unnest(?) AS n, "
                        "unnest(?) AS v) c WHERE session_id = c.id", [SIDS, [i] * 8, [i] * 8])
        elif kind == "upsert_values":
            con.execute("INSERT INTO v SELECT unnest(?), unnest(?), unnest(?) ON CONFLICT (session_id, key) "
                        "DO UPDATE SET value = excluded.value", [SIDS, ["host.session"] * 8, ["x" * 300] * 8])
        elif kind in ("insert_heads", "insert_heads_pk", "delete_each", "prune_256", "rewrite_256", "values_prune_256",
         "select_in", "select_eq"):
            con.execute("INSERT INTO a SELECT unnest(?), unnest(?), unnest(?), unnest(?)",
                        [SIDS, [i] * 8, [i] * 8, [i] * 8])
            if kind == "delete_each":
                con.execute("DELETE FROM a WHERE session_id IN (SELECT unnest(?)) AND rev < ?", [SIDS, i])
            elif kind == "prune_256" and i % 256 == 255:
                con.execute(PRUNE)
            elif kind == "rewrite_256" and i % 256 == 255:
                con.execute("BEGIN TRANSACTION")
                con.execute("CREATE TABLE a2 AS SELECT * FROM a QUALIFY rev = max(rev) OVER (PARTITION BY session_id)")
                con.execute("DROP TABLE a")
                con.execute("ALTER TABLE a2 RENAME TO a")
                con.execute("COMMIT")
        elif kind in ("insert_values", "values_prune_256"):
            con.execute("INSERT INTO av SELECT unnest(?), unnest(?), unnest(?), unnest(?)",
                        [SIDS, ["host.session"] * 8, [i] * 8, ["x" * 300] * 8])
            if kind == "values_prune_256" and i % 256 == 255:
                con.execute("DELETE FROM av USING (SELECT session_id AS s, key AS k, max(rev) AS m FROM av "
                            "GROUP BY ALL) l WHERE av.session_id = l.s AND av.key = l.k AND av.rev < l.m")
        if i % 300 == 299:
            con.execute("CHECKPOINT")

    for i in range(100):
        step(i)
    before = libc.mallinfo2()
    for i in range(100, 100 + n):
        step(i)
    after = libc.mallinfo2()
    return {"retained_bytes_per_statement": round((after.uordblks - before.uordblks) / n),
            "free_chunks_before": before.ordblks, "free_chunks_after": after.ordblks}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="statements of each kind (default 2000)")
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS), help="the kinds to measure (all)")
    parser.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print_figures(_child(args.child, args.n))
        return 0
    results = {}
    for kind in args.kinds:
        results[kind] = run_child(__file__, "--child", kind, "--n", str(args.n))
        print(f"{kind:16} {results[kind]}", flush=True)
    print(json.dumps({"n": args.n, "load_average": os.getloadavg(), "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

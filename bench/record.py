"""The recording core's benchmark: throughput, raw-insert comparison, bytes on disk, `why` latency, RSS.

    .venv/bin/python bench/record.py            # the whole table (a few minutes on 2 cores)
    .venv/bin/python bench/record.py --quick    # smaller sizes, for a smoke check

What each figure means:

* recorded inference stages/s: a realistic agent conversation recorded through the public
  Recorder API into a fresh store (durability ``exit``), timed until everything is committed.
  Each session is a conversation of runs; each run is input -> inference -> tool -> inference ->
  ... -> answer. Every inference's snapshot is ~20 items: system prompt, two tool definitions,
  settings and a sliding window of the last 16 messages (a few hundred to ~1,500 characters each).
* raw insert: the very rows the recorder wrote, read back and inserted again into a fresh store
  with the same columns and the same batching (the writer's columnar encoding, its mean batch
  size per transaction, the same checkpoint setting), with no recorder and no writer thread in
  between: the cost of DuckDB alone. The ratio is recorder rate / raw rate.
* bytes on disk per unique content byte: the store file after close, divided by the UTF-8 size of
  the distinct items' content; beside it what a full copy of every snapshot would take.
* why latency: `why` on the answer of random runs of a synthetic store of 1,000,000 stages, built
  with bulk SQL inserts in the store's schema (NOT through the recorder) so it builds in seconds.
* peak RSS: the recording process's peak resident memory at 1x and 10x the runs, each in its own
  subprocess so the peaks are separate (the store's default DuckDB memory limit, 512 MB, applies).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _child import print_figures, run_child

from tracer import ContextItem, EdgeKind, Item, ItemKind, Origin, OriginKind, Recorder, Store, why
from tracer._schema import TABLES, VIEWS
from tracer._store import DEFAULT_MEMORY_LIMIT
from tracer._upkeep import CHECKPOINT_AT
from tracer._writer import COLUMN_TYPES, COLUMNS, select_rows

WINDOW = 16  # conversation messages kept in each snapshot (plus 4 fixed items: ~20)
TURNS = 4  # inferences per run: 3 with a tool call, the last one answers
RUNS_PER_SESSION = 5

_WORDS = (
    "the a user asked about order shipping refund policy calendar meeting tomorrow weather Berlin "
    "invoice account password reset ticket priority customer said we should check available slots "
    "between and after before because result returned error retry later summary notes deadline project"
).split()


def _corpus(seed: int = 7) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choices(_WORDS, k=200_000))


class Conversation:
    """Produces a realistic agent conversation's items, lazily (memory stays flat)."""

    def __init__(self, seed: int, corpus: str) -> None:
        self.rng = random.Random(seed)
        self.corpus = corpus
        self.counter = 0

    def text(self, low: int = 200, high: int = 1500) -> str:
        self.counter += 1
        size = self.rng.randint(low, high)
        start = self.rng.randrange(0, len(self.corpus) - size)
        return f"[{self.counter}] {self.corpus[start:start + size]}"


def record_workload(store: Store, runs: int, conv: Conversation) -> int:
    """Record ``runs`` runs through the Recorder; returns the number of inference stages."""
    recorder = Recorder(store)
    fixed_origin = Origin(OriginKind.CONFIG, source="agent")
    system = ContextItem(Item.of_text(ItemKind.SYSTEM, "You are a helpful assistant. " + conv.text(600, 900)),
                         Origin(OriginKind.PROMPT_SECTION, source="base"))
    tools = [
        ContextItem(Item(ItemKind.TOOL_DEFINITION, {"name": name, "description": conv.text(80, 200),
                                                     "parameters": {"type": "object"}}),
                    Origin(OriginKind.CONFIG, source=f"tool:{name}"))
        for name in ("search_orders", "check_calendar")
    ]
    settings = ContextItem(Item(ItemKind.SETTINGS, {"model": "gpt-4o", "temperature": 0.2}), fixed_origin)
    inferences = 0
    history: list[ContextItem] = []
    for n in range(runs):
        if n % RUNS_PER_SESSION == 0:
            history = []
            session = f"session-{n // RUNS_PER_SESSION}"
        run = recorder.start_run(agent="bench", input="...", session_id=session, model="gpt-4o")
        with run.stage("input", "user message") as stage:
            history.append(stage.output(Item.of_text(ItemKind.USER, conv.text(100, 600)),
                                        origin_kind=OriginKind.USER, source="input"))
        last: Any = stage
        edge = EdgeKind.NEXT
        for turn in range(1, TURNS + 1):
            with run.stage("inference", f"turn {turn}", after=[last], edge=edge) as inference:
                inference.inputs([system, *history[-WINDOW:], *tools, settings])
                inferences += 1
                if turn < TURNS:
                    call = inference.output(Item(ItemKind.TOOL_CALL, {
                        "id": f"call_{conv.counter}", "name": "search_orders",
                        "arguments": json.dumps({"query": conv.text(20, 60)})}))
                else:
                    answer = inference.output(Item.of_text(ItemKind.ASSISTANT, conv.text()))
            if turn < TURNS:
                history.append(call)
                with run.stage("tool_batch", "1 tool call(s)", after=[inference]) as batch:
                    with run.stage("tool", "search_orders", after=[batch], edge=EdgeKind.FORK,
                                   parent=batch) as tool:
                        tool.inputs([call])
                        history.append(tool.output(Item(ItemKind.TOOL_RESULT, {
                            "call_id": call.item.body["id"], "name": "search_orders",
                            "content": conv.text(), "is_error": False})))
                last, edge = tool, EdgeKind.JOIN
        history.append(answer)
        with run.stage("answer", "answer", after=[inference]) as final:
            final.inputs([answer])
            final.output(answer.item)
        run.end("answered", output=answer.text[:200], model="gpt-4o", tokens_in=4000, tokens_out=300)
    return inferences


def _peak_rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def child_record(runs: int, path: str) -> None:
    """Subprocess mode: record ``runs`` runs and print figures as JSON."""
    conv = Conversation(1, _corpus())
    store = Store.open(path)
    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    inferences = record_workload(store, runs, conv)
    store.close()
    elapsed = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    stats = store.writer_stats
    print_figures({"inferences": inferences, "seconds": elapsed, "peak_rss_mb": _peak_rss_mb(),
                   "cpu_seconds": usage.ru_utime + usage.ru_stime - before.ru_utime - before.ru_stime,
                   "batches": stats["batches"], "stages": stats.get("fp_stage", 0)})


# ---------------------------------------------------------------------- raw insert comparison

def raw_insert(source_path: str, target_path: str, stages_per_batch: float) -> tuple[float, int]:
    """Insert the rows of ``source_path`` into a fresh file the writer's way; returns (seconds, inferences)."""
    import duckdb

    src = duckdb.connect(source_path, read_only=True)
    order = {"fp_run": "started_at", "fp_item": "rowid", "fp_stage": "rowid", "fp_edge": "rowid",
             "fp_entry": "rowid", "fp_snapshot": "rowid",
             "fp_output": "rowid"}
    tables = {t: src.execute(f"SELECT {', '.join(COLUMNS[t])} FROM {t} ORDER BY {order[t]}").fetchall()
              for t in COLUMNS}
    inferences = int(src.execute("SELECT count(*) FROM fp_stage WHERE kind = 'inference'").fetchone()[0])  # type: ignore[index]
    src.close()
    # split every table's rows into the same number of batches as the recorder's writer made
    stages = len(tables["fp_stage"])
    n_batches = max(1, round(stages / max(stages_per_batch, 1.0)))
    con = duckdb.connect(target_path)
    con.execute(f"SET memory_limit = '{DEFAULT_MEMORY_LIMIT}'")  # as Store.open sets them
    con.execute(f"SET checkpoint_threshold = '{CHECKPOINT_AT}B'")  # where Store checkpoints itself
    con.execute(TABLES)
    con.execute(VIEWS)
    started = time.perf_counter()
    for b in range(n_batches):
        con.execute("BEGIN TRANSACTION")
        for table in ("fp_run", "fp_item", "fp_stage", "fp_edge", "fp_snapshot", "fp_entry", "fp_output"):
            rows = tables[table]
            lo, hi = len(rows) * b // n_batches, len(rows) * (b + 1) // n_batches
            chunk = rows[lo:hi]
            if not chunk:
                continue
            select, params = select_rows(COLUMN_TYPES[table], chunk)
            con.execute(f"INSERT INTO {table} {select}", params)
        con.execute("COMMIT")
    con.execute("CHECKPOINT")
    con.close()
    return time.perf_counter() - started, inferences


# ---------------------------------------------------------------------- storage

def storage(path: str) -> dict[str, float]:
    """Bytes on disk vs bytes of unique content, and what a full copy per snapshot would take."""
    store = Store.open(path, read_only=True)
    unique = store.query("SELECT sum(strlen(text) + coalesce(strlen(body), 0)) FROM fp_item")[0][0]
    full = store.query(
        "SELECT sum(strlen(i.text) + coalesce(strlen(i.body), 0)) "
        "FROM fp_entries e JOIN fp_item i ON i.hash = e.item_hash"
    )[0][0]
    store.close()
    size = os.path.getsize(path)
    return {"file": size, "unique": float(unique), "full": float(full)}


# ---------------------------------------------------------------------- why on a 1M-stage store

def build_synthetic(path: str, runs: int) -> int:
    """A store of ``runs`` x 10 stages written with bulk SQL in the store's schema (not the recorder).

    Each run: input, inference, tool batch, tool, inference, answer, and 4 more tool/inference
    stages to reach 10; each inference sees ~20 items, history items point at the session's earlier
    runs (sessions of 5 runs), so `why` walks across runs. Ids sort by time like real ones.
    """
    store = Store.open(path)  # creates the schema and version table
    store.close()
    import duckdb

    con = duckdb.connect(path)
    base_ms = 0x019000000000
    con.execute("SET preserve_insertion_order = true")
    # runs r, session r//5; stage k of run r has id s-<ms>-<r*10+k>
    con.execute(f"""
        INSERT INTO fp_run
        SELECT printf('r-%012x-%010x', {base_ms} + r, r), 'sess-' || (r // 5), 'bench', 'answered',
               'question ' || r, 'answer ' || r, 'gpt-4o', 1.7e9 + r, 1.7e9 + r + 1, 4000, 300, 0.01,
               NULL, NULL, NULL, [], '{{}}', '{{}}', NULL
        FROM range({runs}) t(r)
    """)
    kinds = ["input", "inference", "tool_batch", "tool", "inference", "tool_batch", "tool", "inference",
             "tool_batch", "answer"]
    kind_sql = "[" + ", ".join(f"'{k}'" for k in kinds) + "]"
    # each stage k > 0 follows stage k - 1 (its edge packed in its row); stage k outputs item
    # "i-<r>-<k>", whose hash is the md5 of that (32 hex like real ones)
    con.execute(f"""
        INSERT INTO fp_stage
        SELECT printf('s-%012x-%010x', {base_ms} + r, r * 10 + k), printf('r-%012x-%010x', {base_ms} + r, r),
               k, {kind_sql}[k + 1], {kind_sql}[k + 1], 'ok', 1.7e9 + r + k / 100, 1.7e9 + r + k / 100 + 0.005,
               NULL, NULL, NULL,
               CASE WHEN k = 0 THEN '' ELSE printf('s-%012x-%010x', {base_ms} + r, r * 10 + k - 1) || chr(27) || 'next'
               END,
               md5('i-' || r || '-' || k)
        FROM range({runs}) t(r), range(10) u(k)
        ORDER BY r, k
    """)
    con.execute(f"""
        INSERT INTO fp_item
        SELECT md5('i-' || r || '-' || k), CASE WHEN k = 0 THEN 'user' ELSE 'assistant' END,
               'message ' || r || '-' || k || ' ' || repeat('lorem ipsum ', 20), NULL
        FROM range({runs}) t(r), range(10) u(k)
    """)
    # snapshots: inference stage k (and the answer) sees the outputs of the 20 stages before it,
    # which reach back into the session's earlier runs (not before the session's first run);
    # packed one row per stage as the recorder writes them (tracer._schema)
    con.execute(f"""
        INSERT INTO fp_snapshot
        SELECT run_id, stage_id, string_agg(item_hash || chr(27) || origin, chr(31) ORDER BY p),
               repeat('1', count(*)::INTEGER), '', stage_id, 0, 0, 0, count(*)::INTEGER, 0, 0, 0, 0, NULL
        FROM (
            SELECT r, k, p, printf('r-%012x-%010x', {base_ms} + r, r) AS run_id,
                   printf('s-%012x-%010x', {base_ms} + r, r * 10 + k) AS stage_id,
                   md5('i-' || (src // 10) || '-' || (src % 10)) AS item_hash,
                   concat_ws(chr(27), 'stage', printf('r-%012x-%010x', {base_ms} + src // 10, src // 10),
                             printf('s-%012x-%010x', {base_ms} + src // 10, src), chr(26)) AS origin
            FROM range({runs}) t(r), (SELECT unnest([1, 4, 7, 9]) AS k) u, range(20) v(p),
                 LATERAL (SELECT r * 10 + k - 20 + p AS src)
            WHERE src >= (r // 5) * 50
        )
        GROUP BY r, k, run_id, stage_id
        ORDER BY r, k
    """)
    con.execute("CHECKPOINT")
    count = int(con.execute("SELECT count(*) FROM fp_stage").fetchone()[0])  # type: ignore[index]
    con.close()
    return count


def why_latency(path: str, runs: int, samples: int) -> tuple[float, float, int]:
    """Median and p95 ms of `why` on the answers of random runs; also the mean nodes per answer."""
    store = Store.open(path, read_only=True)
    rng = random.Random(3)
    base_ms = 0x019000000000
    times: list[float] = []
    nodes = 0
    for _ in range(samples):
        r = rng.randrange(runs)
        run_id = f"r-{base_ms + r:012x}-{r:010x}"
        started = time.perf_counter()
        evidence = why(store, run_id)
        times.append((time.perf_counter() - started) * 1000)
        nodes += sum(1 for _ in evidence.root.walk())
    store.close()
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1], nodes // samples


# ---------------------------------------------------------------------- main

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke check)")
    parser.add_argument("--runs", type=int, default=None, help="runs at 1x (default 2000; --quick 300)")
    parser.add_argument("--child-record", nargs=2, metavar=("RUNS", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_record:
        child_record(int(args.child_record[0]), args.child_record[1])
        return
    runs = args.runs or (300 if args.quick else 2000)
    why_runs = 10_000 if args.quick else 100_000
    tmp = Path(tempfile.mkdtemp(prefix="footprint-bench-"))
    rows: list[tuple[str, str, str, str]] = []

    def report(name: str, value: str, target: str, ok: bool | None) -> None:
        verdict = "" if ok is None else ("met" if ok else "MISSED")
        rows.append((name, value, target, verdict))
        print(f"  {name}: {value}", file=sys.stderr)

    print(f"recording {runs} runs ({runs * TURNS} inference stages) ...", file=sys.stderr)
    one = run_child(__file__, "--child-record", str(runs), str(tmp / "one.duckdb"))
    rate = one["inferences"] / one["seconds"]
    report("recorded inference stages/s", f"{rate:,.0f} ({one['cpu_seconds'] / one['inferences'] * 1e6:.0f} us CPU "
           f"each, both threads)", ">= 5,000", rate >= 5000)

    print("inserting the same rows raw ...", file=sys.stderr)
    per_batch = one["stages"] / max(one["batches"], 1)
    raw_seconds, inferences = raw_insert(str(tmp / "one.duckdb"), str(tmp / "raw.duckdb"), per_batch)
    raw_rate = inferences / raw_seconds
    report("raw DuckDB insert, same rows (stages/s)", f"{raw_rate:,.0f}", "", None)
    report("recorder / raw", f"{rate / raw_rate:.2f}", ">= 0.5", rate / raw_rate >= 0.5)

    sizes = storage(str(tmp / "one.duckdb"))
    per_byte = sizes["file"] / sizes["unique"]
    report("bytes on disk / unique content byte", f"{per_byte:.2f} ({sizes['file'] / 1e6:.1f} MB for "
           f"{sizes['unique'] / 1e6:.1f} MB)", "<= 1.5", per_byte <= 1.5)
    report("full copy per snapshot would take", f"{sizes['full'] / sizes['unique']:.1f} x unique "
           f"({sizes['full'] / 1e6:.0f} MB)", "", None)

    print(f"building a synthetic store of {why_runs * 10:,} stages with bulk SQL ...", file=sys.stderr)
    started = time.perf_counter()
    stages = build_synthetic(str(tmp / "why.duckdb"), why_runs)
    built = time.perf_counter() - started
    median, p95, nodes = why_latency(str(tmp / "why.duckdb"), why_runs, 50 if args.quick else 200)
    report(f"why median (p95) at {stages:,} stages", f"{median:.1f} ms ({p95:.1f} ms), ~{nodes} nodes, "
           f"store built in {built:.0f} s by bulk SQL", "< 50 ms", median < 50)

    print(f"recording {runs * 10} runs for peak RSS at 10x ...", file=sys.stderr)
    ten = run_child(__file__, "--child-record", str(runs * 10), str(tmp / "ten.duckdb"))
    ratio = ten["peak_rss_mb"] / one["peak_rss_mb"]
    report("peak RSS 1x / 10x runs", f"{one['peak_rss_mb']:.0f} MB / {ten['peak_rss_mb']:.0f} MB "
           f"(x{ratio:.2f})", "10x within 1.2x", ratio <= 1.2)
    report("  (10x rate, inference stages/s)", f"{ten['inferences'] / ten['seconds']:,.0f}", "", None)

    widths = [max(len(r[i]) for r in [("figure", "value", "target", ""), *rows]) for i in range(4)]
    print()
    print(f"footprint recording bench: {runs} runs at 1x, {TURNS} inferences each, ~20 items a snapshot; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    header = ("figure", "value", "target", "")
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    for file in tmp.iterdir():
        file.unlink()
    tmp.rmdir()


if __name__ == "__main__":
    main()

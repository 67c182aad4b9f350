"""Store files with one block damaged: each of a good store's DuckDB blocks zeroed in part, in turn.

DuckDB checks a block's checksum when a read first reaches it, so some of these files open and
fail only later, at the read that reaches the damaged block.
"""

from __future__ import annotations

from pathlib import Path

from tracer import Recorder, Store

BLOCK = 262144  # DuckDB's block size
HEADERS = 12288  # the file's three header blocks of 4 KB


def damaged_copies(folder: Path, runs: int = 200) -> list[Path]:
    """A good store of ``runs`` runs written in ``folder``, then one copy per block with that block damaged."""
    good = folder / "good.duckdb"
    with Store.open(good) as store:
        recorder = Recorder(store)
        for n in range(runs):
            run = recorder.start_run(agent="a", input=f"question {n} " + "x" * 200, session_id="s")
            run.end("answered", output=f"answer {n} " + "y" * 200)
    raw = good.read_bytes()
    copies = []
    for block in range(1, len(raw) // BLOCK + 1):
        bad = bytearray(raw)
        at = HEADERS + (block - 1) * BLOCK + 4096
        bad[at:at + 64] = bytes(64)
        copy = folder / f"bad{block}.duckdb"
        copy.write_bytes(bytes(bad))
        copies.append(copy)
    return copies

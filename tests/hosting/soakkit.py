"""The soak workload shared by ``bench/soak.py`` and its CI-sized test: long sessions of big turns.

Each session sends ``turns`` messages of 1-4 KB (``size`` fixes it); every third turn asks for a
tool call (``lookup``), whose result the answer quotes. The model is a test model, so what is
measured is the host and its stores.
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import signal
import threading
import tracemalloc
from pathlib import Path
from typing import Any

from agent import Agent, Tool
from agent.providers import FunctionModel, ModelRequest, calls
from tracer import Recorder

#: When set (to a file path), the soak agent's host traces the Python heap and, on SIGUSR1, writes
#: where its memory is to that file (see :func:`memory_breakdown`); ``bench/soak.py --memory`` uses it.
MEMORY_ENV = "FOOTPRINT_SOAK_MEMORY"
#: When set (to a file path), the soak agent's host writes, on SIGUSR2, its Python threads' names by
#: native thread id and the recordings store's writer_stats (checkpoints, trims and their times) to
#: that file (see :func:`probe`); ``bench/soak.py`` uses it to split the host's CPU by thread.
PROBE_ENV = "FOOTPRINT_SOAK_PROBE"
LOOKUP = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}


def message(session: int, turn: int, size: int | None = None, *, seed: int = 0) -> str:
    """The ``turn``-th message of ``session``: about ``size`` bytes (1-4 KB at random when None)."""
    rng = random.Random(seed * 1_000_003 + session * 10_007 + turn)
    length = size if size is not None else rng.randint(1024, 4096)
    tool = "[tool] " if turn % 3 == 2 else ""
    words = []
    total = len(tool) + 20
    while total < length:
        word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
        words.append(word)
        total += len(word) + 1
    return f"{tool}s{session} t{turn}: " + " ".join(words)


def _answer(request: ModelRequest) -> Any:
    text = request.last_user_text()
    head = text.split(":", 1)[0]
    if text.startswith("[tool]"):
        results = []
        for ci in reversed(request.context):  # the results since the message
            if ci.item.kind == "user":
                break
            if ci.item.kind == "tool_result":
                results.append(ci.item.body["content"])
        if not results:
            return calls(("lookup", {"key": head}, "call-" + head.replace(" ", "-")))
        return f"{head} answered with {results[-1]}"
    return f"{head} answered ({len(text)} bytes read)"


async def _lookup(arguments: dict[str, Any]) -> str:
    return f"value of {arguments['key']}"


def _heap_by_package(snapshot: tracemalloc.Snapshot) -> dict[str, int]:
    """The traced Python heap's bytes by where they were allocated: footprint's packages, or other."""
    sizes: dict[str, int] = {}
    for stat in snapshot.statistics("filename"):
        name = stat.traceback[0].filename.replace(os.sep, "/")
        package = next((p for p in ("hosting/sessions", "hosting", "agent", "tracer") if f"/{p}/" in name), "other")
        sizes[package] = sizes.get(package, 0) + stat.size
    return sizes


def _malloc_free() -> int | None:
    """Bytes glibc's malloc holds free in its arenas (RSS that no object uses), or None elsewhere."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None

    class _Info(ctypes.Structure):
        _fields_ = [(f, ctypes.c_size_t) for f in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
            "keepcost")]

    if not hasattr(libc, "mallinfo2"):
        return None
    libc.mallinfo2.restype = _Info
    return int(libc.mallinfo2().fordblks)


def memory_breakdown(recorder: Recorder | None) -> dict[str, Any]:
    """Where the host's memory is: its RSS, DuckDB's (``duckdb_memory()`` by tag, of the store it
    records into), the traced Python heap by package, and what glibc's malloc holds free."""
    with open("/proc/self/status") as f:
        rss = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
    duckdb: dict[str, int] = {}
    if recorder is not None and recorder.store is not None:
        for tag, used in recorder.store.query(
                "SELECT tag, memory_usage_bytes FROM duckdb_memory() WHERE memory_usage_bytes > 0"):
            duckdb[str(tag)] = int(used)
    heap = _heap_by_package(tracemalloc.take_snapshot()) if tracemalloc.is_tracing() else {}
    return {"rss": rss, "duckdb": duckdb, "python_heap": heap, "malloc_free": _malloc_free()}


def _report_memory_on_signal(recorder: Recorder | None, path: str) -> None:
    tracemalloc.start()
    _write_on_signal(signal.SIGUSR1, path, lambda: memory_breakdown(recorder))


def probe(recorder: Recorder | None) -> dict[str, Any]:
    """The host's Python threads by native id (any other thread of the process is DuckDB's or
    another library's), and the recordings store's writer_stats."""
    threads = {str(t.native_id): t.name for t in threading.enumerate() if t.native_id is not None}
    stats = recorder.store.writer_stats if recorder is not None and recorder.store is not None else {}
    return {"threads": threads, "stats": stats}


def _write_on_signal(signum: int, path: str, what: Any) -> None:
    def write(*_: object) -> None:
        part = Path(f"{path}.part")
        part.write_text(json.dumps(what()))
        part.replace(path)  # whole, or not there yet

    signal.signal(signum, write)


def soak_agent(recorder: Recorder | None = None) -> Agent:
    """The soak's agent: a test model and one tool."""
    if (path := os.environ.get(MEMORY_ENV)) and not tracemalloc.is_tracing():
        _report_memory_on_signal(recorder, path)
    if path := os.environ.get(PROBE_ENV):
        _write_on_signal(signal.SIGUSR2, path, lambda: probe(recorder))
    model = FunctionModel(_answer, name="soak", keep_requests=0)
    return Agent("soak", provider=model, tools=[Tool("lookup", "Look a key up.", LOOKUP, _lookup)],
                 recorder=recorder)


def soak_agent_unrecorded(recorder: Recorder | None = None) -> Agent:
    """The soak's agent recording nothing (to tell the session store's cost from the recorder's)."""
    return soak_agent(None)

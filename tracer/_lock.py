"""Connecting to a store file while other processes use it: the storage version, waiting for a lock, and who holds it.

DuckDB lets one process write a file, or any number read it (a shared lock), never both. A
reader that finds a writer, or a writer that finds anyone, waits a little (a re-run writes for a
moment, then lets go) and then fails with a :class:`StoreLockedError` that names the process
holding the file and says what to do about it.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import duckdb

from ._files import missing_directory, truncated_message
from ._redaction import MASK
from .errors import NotAStoreError, StoreLockedError

#: The storage format new store files are written in. DuckDB 2.0 writes files only 2.0 can open
#: unless told otherwise; footprint's tables and views need nothing newer than the 1.0 format,
#: which every DuckDB since 1.0 (the CLI, DBeaver, the other language bindings) reads.
STORAGE_VERSION = "v1.0.0"
#: Seconds a reader waits for a writer to let go (and a writer for the readers) before failing.
DEFAULT_WAIT = 2.0
_RETRY_EVERY = 0.05
_HOLDER = re.compile(r"held in (?P<program>.*?) \(PID (?P<pid>\d+)\)")


def connect(path: str, *, read_only: bool, wait: float) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection to ``path``, retried for up to ``wait`` seconds while another process holds it.

    A file created here is written in :data:`STORAGE_VERSION`; an existing file keeps its own.
    """
    config: dict[str, str | bool | int | float | list[str]] = {} if read_only or path == ":memory:" or Path(path).exists() else {
        "storage_compatibility_version": STORAGE_VERSION}
    deadline = time.monotonic() + wait
    while True:
        try:
            return duckdb.connect(path, read_only=read_only, config=config)
        except duckdb.IOException as exc:
            text = str(exc)
            if "lock" not in text.lower():
                raise NotAStoreError(_unopenable_message(path, text)) from exc
            if time.monotonic() >= deadline:
                raise StoreLockedError(locked_message(path, text, read_only=read_only)) from exc
            time.sleep(_RETRY_EVERY)
        except duckdb.Error as exc:
            if "corrupt database file" in str(exc).lower():  # a block failed its checksum
                raise NotAStoreError(truncated_message(path, " ".join(str(exc).split()))) from exc
            raise NotAStoreError(f"{path} is not a footprint store: {exc}") from exc


def _unopenable_message(path: str, duckdb_error: str) -> str:
    """Why ``path`` could not be opened, blaming the file only when the file is the trouble."""
    file = Path(path)
    parent = file.parent
    what = missing_directory(file)
    if what is not None:
        return f"cannot create the footprint store {path}: {what} (create the directory, or pass another --db)"
    if "permission denied" in duckdb_error.lower():
        where = path if file.exists() else f"{path} in {parent}"
        return f"cannot open {where}: permission denied (check who owns it and its mode, or pass another --db)"
    if "read-only file system" in duckdb_error.lower():
        return (f"cannot write {path}: it is on a read-only file system (the reading commands - runs, show, "
                f"why, sql - still open an existing store there; to record, pass a --db on a writable disk)")
    return f"{path} is not a footprint store (not a readable DuckDB file: {duckdb_error})"


def locked_message(path: str, duckdb_error: str, *, read_only: bool) -> str:
    """What to tell a person whose open of ``path`` failed on DuckDB's lock: who holds it and what to do."""
    match = _HOLDER.search(duckdb_error)
    pid = int(match["pid"]) if match else None
    command = _command_line(pid) if pid is not None else None
    shown = command if command is None or len(command) <= 120 else command[:119] + "…"
    who = f"process {pid}: {shown or match['program']}" if match else "unknown"
    wanted = "read" if read_only else "write"
    advice = _advice(command or "", read_only=read_only)
    return f"cannot {wanted} {path}: another process holds it ({who}); {advice}"


def _command_line(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    words = [w for w in raw.decode(errors="replace").split("\0") if w]
    if words and Path(words[0]).name.startswith("python") and len(words) > 1:
        words = words[1:]  # `python -m ...` or `python script.py`: the script says more than the interpreter
    if words:
        words[0] = Path(words[0]).name
    return " ".join(_masked_arguments(words))


#: Flags whose value is a secret: ``--token x``, ``--api-key=x``, ``--password x``, ...
_SECRET_FLAG = re.compile(r"^--?[\w-]*(token|key|secret|password|passwd|auth|credential)[\w-]*$", re.IGNORECASE)
_URL_PASSWORD = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://[^:/@\s]*):[^@/\s]*@", re.IGNORECASE)


def _masked_arguments(words: list[str]) -> list[str]:
    """A command line as it may be shown to anyone: secret flag values and URL passwords masked.

    The holder's command line reaches an error message (and so a terminal, a log, a CI page): a
    host started with ``--token`` must not hand its token to whoever runs ``footprint runs``.
    """
    shown: list[str] = []
    hide_next = False
    for word in words:
        if hide_next:
            shown.append(MASK)
            hide_next = False
            continue
        flag, eq, _ = word.partition("=")
        if _SECRET_FLAG.match(flag):
            if eq:
                shown.append(f"{flag}={MASK}")
            else:
                shown.append(word)
                hide_next = True
            continue
        shown.append(_URL_PASSWORD.sub(lambda m: f"{m['scheme']}:{MASK}@", word))
    return shown


def _advice(command: str, *, read_only: bool) -> str:
    words = command.split()
    if "serve" in words or "up" in words:
        port = words[words.index("--port") + 1] if "--port" in words[:-1] else "8080"
        url = "http://127.0.0.1:PORT (the port it printed)" if port == "0" else f"http://127.0.0.1:{port}"
        token = " --token TOKEN" if any(_SECRET_FLAG.match(w.partition("=")[0]) for w in words) else ""
        return (f"it is a footprint host, which owns the file while it runs: read through it "
                f"(footprint explore --host {url}{token}) or stop it first")
    if "explore" in words and not read_only:
        return "it is a footprint explorer reading the file: close it (q) and try again"
    if "explore" in words or "sandbox" in words:
        return "it is a footprint explorer recording a re-run or a persona's chat: try again when it is done"
    if read_only:
        return "it is writing the file: try again when it is done, or stop it"
    return "it is reading or writing the file: try again when it is done, or stop it"

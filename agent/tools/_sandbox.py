"""The code sandbox: JavaScript and TypeScript run by Deno with every permission denied.

Deno runs nothing with access it was not granted; this sandbox grants none and says so explicitly
(``--deny-net --deny-env --deny-run --deny-read --deny-write --deny-sys --deny-ffi --deny-import``,
``--no-prompt``), loads no config, lock file, remote or npm module, and maps every local module
path to a folder that does not exist (Deno loads statically imported local files without the read
permission, so the import map is what keeps ``import "/etc/passwd"`` out). Timers and Web Crypto
stay available. The code arrives on standard input, in a fresh temporary directory, with an
environment holding nothing but Deno's cache directory.

Limits: the V8 heap is capped (``--max-old-space-size``, 64 MB by default); the process's resident
memory is watched and the process killed once it passes the cap plus the runtime's own baseline
(memory outside the heap, such as big ArrayBuffers), with an address-space backstop as the last
line; CPU time is an OS limit (``RLIMIT_CPU``, 30 s) and wall time a deadline (30 s) after which
the process group is killed. Output past 64 KB per stream is cut. Each end is named in the result.
The CPU limit and the memory watch use Linux's ``prlimit`` and ``/proc``; elsewhere the heap cap and
the wall limit still hold.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from .errors import SandboxError

EXECUTABLE_LANGUAGES = ("javascript", "typescript")
RUNTIME_BASELINE_MB = 96  # what Deno itself holds resident beside the JS heap (~45 MB measured), doubled
ADDRESS_SPACE_MB = 2048  # the data-segment backstop (Deno reserves ~550 MB of address space up front)
_POLL_SECONDS = 0.02
_DENIED = ("--deny-net", "--deny-env", "--deny-run", "--deny-read", "--deny-write", "--deny-sys",
           "--deny-ffi", "--deny-import")


@dataclass(frozen=True)
class SandboxLimits:
    """What one run may use: JS heap and resident memory (MB), CPU and wall seconds, output bytes."""

    memory_mb: int = 64
    cpu_seconds: int = 30
    wall_seconds: float = 30.0
    max_output_bytes: int = 64 * 1024

    def __post_init__(self) -> None:
        if self.memory_mb < 16 or self.cpu_seconds < 1 or self.wall_seconds <= 0 or self.max_output_bytes < 1:
            raise SandboxError(f"sandbox limits out of range: {self} (memory >= 16 MB, cpu >= 1 s, wall > 0 s)")


@dataclass
class SandboxResult:
    """How one run ended. ``ended_by`` names a limit that stopped it (``memory``, ``cpu_time``,
    ``wall_time``) or is None; ``error`` is a clear sentence whenever the run did not succeed."""

    language: str
    exit_code: int | None
    stdout: str
    stderr: str
    duration_ms: float
    limits: SandboxLimits
    ended_by: str | None = None
    error: str | None = None
    truncated: bool = False
    permissions: tuple[str, ...] = field(default=_DENIED)

    @property
    def ok(self) -> bool:
        """True when the code ran to the end and exited 0."""
        return self.exit_code == 0 and self.ended_by is None and self.error is None

    def to_record(self, code: str) -> dict[str, Any]:
        """What the tool stage records about the run (the recorder redacts it like everything else)."""
        return {"language": self.language, "code": code, "limits": asdict(self.limits), "exit_code": self.exit_code,
                "ended_by": self.ended_by, "error": self.error, "stdout": self.stdout, "stderr": self.stderr,
                "duration_ms": round(self.duration_ms, 3), "truncated": self.truncated,
                "permissions": list(self.permissions)}


def find_deno() -> str:
    """The Deno binary: ``$FOOTPRINT_DENO``, the ``deno`` Python package's, or one on PATH."""
    configured = os.environ.get("FOOTPRINT_DENO")
    if configured:
        if not os.access(configured, os.X_OK):
            raise SandboxError(f"FOOTPRINT_DENO={configured} is not an executable file")
        return configured
    try:
        import deno  # the PyPI package that ships the binary

        path: str = deno.find_deno_bin()
        return path
    except (ImportError, FileNotFoundError):
        pass
    found = shutil.which("deno")
    if found is None:
        raise SandboxError("the code sandbox needs Deno: pip install 'footprint[sandbox]' (or set FOOTPRINT_DENO)")
    return found


class DenoSandbox:
    """Runs JavaScript or TypeScript in Deno with no permissions, under :class:`SandboxLimits`."""

    def __init__(self, limits: SandboxLimits | None = None, *, deno: str | None = None) -> None:
        self.limits = limits or SandboxLimits()
        self._deno = deno

    @property
    def deno(self) -> str:
        """The binary used (found on first use)."""
        if self._deno is None:
            self._deno = find_deno()
        return self._deno

    def command(self, language: str, import_map: str, limits: SandboxLimits) -> list[str]:
        """The full command line of one run (recorded, so a reader sees what was denied)."""
        return [self.deno, "run", "--quiet", "--no-prompt", "--no-config", "--no-lock", "--no-remote", "--no-npm",
                *_DENIED, f"--import-map={import_map}",
                f"--v8-flags=--max-old-space-size={limits.memory_mb}",
                f"--ext={'ts' if language == 'typescript' else 'js'}", "-"]

    async def run(self, code: str, language: str = "javascript", limits: SandboxLimits | None = None) -> SandboxResult:
        """Run ``code``; every way it can end is a :class:`SandboxResult`, never an exception.

        :class:`SandboxError` only when the language cannot run here or Deno is missing.
        """
        if language not in EXECUTABLE_LANGUAGES:
            raise SandboxError(f"{language} cannot run in the sandbox; it runs {', '.join(EXECUTABLE_LANGUAGES)}")
        limits = limits or self.limits
        with tempfile.TemporaryDirectory(prefix="footprint-sandbox-") as work:
            import_map = os.path.join(work, "import_map.json")
            with open(import_map, "w") as f:  # every local module path leads to a folder that is not there
                json.dump({"imports": {"file:///": "./no-local-modules/", "/": "./no-local-modules/"}}, f)
            env = {"DENO_DIR": os.path.join(work, "cache"), "NO_COLOR": "1", "DENO_NO_UPDATE_CHECK": "1"}
            started = time.perf_counter()
            proc = await asyncio.create_subprocess_exec(
                *self.command(language, import_map, limits), cwd=work, env=env, start_new_session=True,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            # the limits apply before the code is sent: Deno runs nothing until it has read stdin
            _limit(proc.pid, limits)
            return await self._finish(proc, code, language, limits, started)

    async def _finish(self, proc: asyncio.subprocess.Process, code: str, language: str, limits: SandboxLimits,
                      started: float) -> SandboxResult:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        out, err = _Capped(limits.max_output_bytes), _Capped(limits.max_output_bytes)
        ended_by: str | None = None

        async def feed() -> None:
            assert proc.stdin is not None
            try:
                proc.stdin.write(code.encode())
                await proc.stdin.drain()
                proc.stdin.close()
            except (BrokenPipeError, ConnectionResetError):
                pass

        async def watch_memory() -> None:
            nonlocal ended_by
            cap_kb = (limits.memory_mb + RUNTIME_BASELINE_MB) * 1024
            while proc.returncode is None:
                if _resident_kb(proc.pid) > cap_kb:
                    ended_by = "memory"
                    _kill(proc)
                    return
                await asyncio.sleep(_POLL_SECONDS)

        tasks = [asyncio.ensure_future(t) for t in (feed(), out.drain(proc.stdout), err.drain(proc.stderr))]
        watcher = asyncio.ensure_future(watch_memory())
        try:
            await asyncio.wait_for(asyncio.gather(*tasks), timeout=limits.wall_seconds)
            await asyncio.wait_for(proc.wait(), timeout=max(0.1, limits.wall_seconds - (time.perf_counter() - started)))
        except TimeoutError:
            ended_by = ended_by or "wall_time"
            _kill(proc)
        except BaseException:
            _kill(proc)
            raise
        finally:
            await proc.wait()
            watcher.cancel()
            for t in tasks:
                t.cancel()
            await asyncio.gather(watcher, *tasks, return_exceptions=True)
        duration = (time.perf_counter() - started) * 1000
        stderr = err.text()
        code_ = proc.returncode
        if ended_by is None:
            ended_by = _limit_hit(code_, stderr)
        return SandboxResult(language, code_, out.text(), stderr, duration, limits, ended_by,
                             _error(code_, ended_by, limits, stderr), out.truncated or err.truncated)


class _Capped:
    """Keeps the first ``cap`` bytes of a stream and drains (drops) the rest."""

    def __init__(self, cap: int) -> None:
        self.cap, self.data, self.truncated = cap, bytearray(), False

    async def drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            room = self.cap - len(self.data)
            if room > 0:
                self.data += chunk[:room]
            if len(chunk) > room:
                self.truncated = True

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


def _limit(pid: int, limits: SandboxLimits) -> None:
    try:
        import resource  # POSIX only: elsewhere the heap cap and the wall limit still hold
    except ImportError:
        return
    try:
        resource.prlimit(pid, resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 1))
        resource.prlimit(pid, resource.RLIMIT_CORE, (0, 0))
        backstop = max(ADDRESS_SPACE_MB, limits.memory_mb * 4) << 20
        resource.prlimit(pid, resource.RLIMIT_DATA, (backstop, backstop))
    except ProcessLookupError:
        pass  # it already ended (it could not start): its exit code says why


def _resident_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _kill(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _limit_hit(exit_code: int | None, stderr: str) -> str | None:
    if exit_code in (-signal.SIGXCPU, -signal.SIGKILL):
        return "cpu_time"
    lowered = stderr.lower()
    if "out of memory" in lowered or "allocation failed" in lowered or "heap limit" in lowered:
        return "memory"
    return None


def _error(exit_code: int | None, ended_by: str | None, limits: SandboxLimits, stderr: str) -> str | None:
    if ended_by == "memory":
        return f"the code used more than its memory limit ({limits.memory_mb} MB) and was stopped"
    if ended_by == "cpu_time":
        return f"the code used more than its CPU limit ({limits.cpu_seconds} s) and was stopped"
    if ended_by == "wall_time":
        return f"the code ran longer than its time limit ({limits.wall_seconds:g} s) and was stopped"
    if exit_code != 0:
        first = next((line.strip() for line in stderr.splitlines() if line.strip()), "no error output")
        return f"the code failed (exit {exit_code}): {first}"
    return None

"""The Deno sandbox: network, environment, subprocesses and files are denied; memory, CPU and wall
limits end a memory bomb and an infinite loop cleanly with a clear error; output is capped.

These tests need the Deno binary (the ``deno`` package, installed with ``.[dev]``); they skip, and
say so, only when it cannot be found.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.tools import DenoSandbox, SandboxError, SandboxLimits, find_deno

try:
    find_deno()
except SandboxError as exc:  # pragma: no cover - only where the binary cannot be installed
    pytest.skip(f"the Deno binary is not installed here ({exc})", allow_module_level=True)

FAST = SandboxLimits(cpu_seconds=1, wall_seconds=20)  # wall: room for a busy machine


@pytest.fixture(scope="module")
def sandbox() -> DenoSandbox:
    return DenoSandbox()


async def test_typescript_and_javascript_run_with_timers_and_crypto(sandbox: DenoSandbox) -> None:
    ts = await sandbox.run("const n: number = 6;\nawait new Promise((r) => setTimeout(r, 5));\n"
                           "console.log(n * 7, crypto.randomUUID().length);", "typescript")
    assert ts.ok and ts.stdout == "42 36\n" and ts.exit_code == 0 and ts.error is None
    js = await sandbox.run("console.error('to stderr'); console.log([1, 2].map((x) => x * 2).join(','));")
    assert js.ok and js.stdout == "2,4\n" and js.stderr == "to stderr\n"


@pytest.mark.parametrize(("what", "code", "needle"), [
    ("network", 'await fetch("http://127.0.0.1:8080/");', 'Requires net access to "127.0.0.1:8080"'),
    ("network by socket", 'await Deno.connect({ hostname: "127.0.0.1", port: 8080 });', "Requires net access"),
    ("environment", 'console.log(Deno.env.get("HOME"));', 'Requires env access to "HOME"'),
    ("environment listing", "console.log(Deno.env.toObject());", "Requires env access"),
    ("subprocess", 'new Deno.Command("/bin/sh", { args: ["-c", "id"] }).outputSync();',
     'Requires run access to "/bin/sh"'),
    ("file read", 'console.log(Deno.readTextFileSync("/etc/hostname"));', "Requires read access"),
    ("file write", 'Deno.writeTextFileSync("OUT", "x");', "Requires write access"),
    ("fetch of a file URL", 'await fetch("file:///etc/hostname");', "Requires read access"),
    ("system information", "console.log(Deno.hostname());", "Requires sys access"),
    ("a remote import", 'await import("https://example.com/mod.js");', "example.com"),
    ("a static local import", 'import "/etc/hostname";', "no-local-modules"),
    ("a JSON import of a local file", 'import x from "/etc/x.json" with { type: "json" }; console.log(x);',
     "no-local-modules"),
    ("a relative import", 'import "../../../../etc/hostname";', "no-local-modules"),
    ("an import hidden from static analysis",
     '(() => {}).constructor("return import(\\"file:///etc/hostname\\")")().then(console.log);',
     "no-local-modules"),
])
async def test_access_is_denied(sandbox: DenoSandbox, what: str, code: str, needle: str) -> None:
    result = await sandbox.run(code)
    assert not result.ok and result.exit_code == 1, what
    assert needle in result.stderr, (what, result.stderr)
    assert result.error is not None and result.error.startswith("the code failed (exit 1): error:")
    assert result.ended_by is None


async def test_nothing_of_the_host_leaks_into_the_run(sandbox: DenoSandbox, tmp_path: Path) -> None:
    os.environ["FOOTPRINT_SANDBOX_SECRET"] = "sk-should-not-leak"
    try:
        result = await sandbox.run("console.log(Deno.cwd().includes('footprint-sandbox-'), "
                                   "typeof Deno.env, Deno.pid > 0);")
    finally:
        del os.environ["FOOTPRINT_SANDBOX_SECRET"]
    assert result.stdout == "true object true\n"  # cwd: a fresh temporary directory, not ours
    assert not list(tmp_path.iterdir())


async def test_a_heap_memory_bomb_ends_with_a_memory_error(sandbox: DenoSandbox) -> None:
    result = await sandbox.run("const a = []; while (true) a.push(new Array(1e6).fill(1.5));")
    assert result.ended_by == "memory" and not result.ok
    assert result.error == "the code used more than its memory limit (64 MB) and was stopped"


async def test_an_off_heap_memory_bomb_ends_with_a_memory_error(sandbox: DenoSandbox) -> None:
    result = await sandbox.run("const a = []; for (let i = 0; i < 100; i++) "
                               "{ a.push(new Uint8Array(100 * 1024 * 1024)); a[i].fill(1); } console.log('done');")
    assert result.ended_by == "memory" and result.stdout == ""
    assert "memory limit (64 MB)" in (result.error or "")


async def test_an_infinite_loop_ends_at_the_cpu_limit(sandbox: DenoSandbox) -> None:
    result = await sandbox.run("let i = 0; while (true) { i++; }", limits=FAST)
    assert result.ended_by == "cpu_time" and result.exit_code is not None and result.exit_code < 0
    assert result.error == "the code used more than its CPU limit (1 s) and was stopped"
    assert result.duration_ms < 20_000


async def test_an_idle_wait_ends_at_the_wall_limit(sandbox: DenoSandbox) -> None:
    limits = SandboxLimits(cpu_seconds=5, wall_seconds=1)
    result = await sandbox.run("await new Promise((r) => setTimeout(r, 60_000));", limits=limits)
    assert result.ended_by == "wall_time" and 900 < result.duration_ms < 10_000  # room for a busy machine
    assert result.error == "the code ran longer than its time limit (1 s) and was stopped"


async def test_output_is_capped_and_the_cut_is_said(sandbox: DenoSandbox) -> None:
    limits = SandboxLimits(max_output_bytes=1000)
    result = await sandbox.run("for (let i = 0; i < 1000; i++) console.log('x'.repeat(100));", limits=limits)
    assert result.ok and result.truncated and len(result.stdout) == 1000


async def test_the_default_limits_are_the_seeds(sandbox: DenoSandbox) -> None:
    assert (sandbox.limits.memory_mb, sandbox.limits.cpu_seconds, sandbox.limits.wall_seconds) == (64, 30, 30.0)
    command = sandbox.command("typescript", "/tmp/map.json", sandbox.limits)
    for flag in ("--deny-net", "--deny-env", "--deny-run", "--deny-read", "--deny-write", "--no-prompt",
                 "--no-remote", "--v8-flags=--max-old-space-size=64", "--ext=ts"):
        assert flag in command
    assert not any(flag.startswith("--allow") for flag in command)


async def test_languages_and_limits_are_checked(sandbox: DenoSandbox) -> None:
    with pytest.raises(SandboxError, match="python cannot run in the sandbox"):
        await sandbox.run("print(1)", "python")
    with pytest.raises(SandboxError, match="sandbox limits out of range"):
        SandboxLimits(memory_mb=1)


def test_a_missing_binary_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FOOTPRINT_DENO", "/nonexistent/deno")
    with pytest.raises(SandboxError, match="FOOTPRINT_DENO=/nonexistent/deno is not an executable file"):
        find_deno()

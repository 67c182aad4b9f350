"""The code generator: templates and model generation, validation, snippets, stats, and the
execute_code tool in an agent, with the sandbox run recorded (and redacted) on its stage."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent import Agent
from agent.providers import ScriptedModel, calls, tool_results
from agent.tools import (
    CodeGenerator,
    CodeValidationError,
    DenoSandbox,
    SandboxError,
    SandboxLimits,
    code_tool,
    find_deno,
)
from tracer import Recorder, Store

try:
    find_deno()
    HAVE_DENO = True
except SandboxError:  # pragma: no cover - only where the binary cannot be installed
    HAVE_DENO = False
needs_deno = pytest.mark.skipif(not HAVE_DENO, reason="the Deno binary is not installed here")


async def test_without_a_provider_the_templates_answer_and_say_so() -> None:
    gen = CodeGenerator()
    code = await gen.generate("print the first fibonacci numbers")
    assert code.source == "template:fibonacci" and "function fibonacci" in code.code
    assert "built-in fibonacci template" in code.explanation
    with pytest.raises(SandboxError, match="no built-in template fits 'compose a symphony'"):
        await gen.generate("compose a symphony")
    with pytest.raises(SandboxError, match="unknown language 'cobol'"):
        await gen.generate("sort", "cobol")


async def test_with_a_provider_the_first_fenced_block_is_the_code() -> None:
    model = ScriptedModel(["Here:\n```ts\nconsole.log(1 + 1);\n```\nIt adds.", "no code at all"])
    gen = CodeGenerator(provider=model)
    code = await gen.generate("add one and one", "typescript")
    assert (code.code, code.language, code.source, code.explanation) == (
        "console.log(1 + 1);\n", "typescript", "model", "It adds.")
    with pytest.raises(SandboxError, match="held no fenced code block"):
        await gen.generate("again")


@pytest.mark.parametrize(("code", "error"), [
    ("process.exit(1)", "process.exit is not allowed"),
    ("const cp = require('child_process')", "require('child_process') is not allowed"),
    ('const fs = require("node:fs")', "require('fs') is not allowed"),
    ("eval('1')", "eval() is not allowed"),
    ("new Function('return 1')()", "Function() is not allowed"),
    ("await import('./x.js')", "dynamic import() is not allowed"),
    ("   ", "the code is empty"),
])
def test_validation_refuses_dangerous_patterns(code: str, error: str) -> None:
    check = CodeGenerator().validate_code(code, "javascript")
    assert not check.valid and any(error in e for e in check.errors), check.errors


def test_validation_caps_the_length_and_accepts_ordinary_code() -> None:
    gen = CodeGenerator(max_code_length=10)
    assert gen.validate_code("x" * 11, "javascript").errors == (
        "the code is 11 characters long; at most 10 are allowed",)
    ok = CodeGenerator().validate_code("const myFunction = (x) => medieval(x); // evaluate", "typescript")
    assert ok.valid
    assert CodeGenerator().validate_code("eval(1)", "python").valid  # only JS/TS patterns are checked
    assert CodeGenerator().is_executable("typescript") and not CodeGenerator().is_executable("python")


def test_snippets_are_kept_per_user() -> None:
    clock = iter([1.0, 2.0, 3.0])
    gen = CodeGenerator(clock=lambda: next(clock))
    a = gen.save_snippet("ann", "sum", "console.log(1+2)", tags=["math"])
    gen.save_snippet("ann", "types", "let x: number = 1", "typescript")
    gen.save_snippet("bob", "mine", "1")
    assert [s.title for s in gen.get_snippets("ann")] == ["sum", "types"]
    assert gen.get_snippets("ann", language="typescript")[0].title == "types"
    assert gen.get_snippets("ann", tag="math") == [a] and a.created_at == 1.0
    assert gen.get_snippets("carl") == []


@needs_deno
async def test_execute_counts_every_outcome_in_the_stats() -> None:
    gen = CodeGenerator()
    assert (await gen.execute("console.log('hi')", user_id="ann")).stdout == "hi\n"
    failed = await gen.execute("throw new Error('boom')", user_id="ann")
    assert not failed.ok and "Error: boom" in (failed.error or "")
    with pytest.raises(CodeValidationError, match="eval\\(\\) is not allowed"):
        await gen.execute("eval('1')", user_id="ann")
    with pytest.raises(CodeValidationError, match="python code cannot run here"):
        await gen.execute("print(1)", "python", user_id="bob")
    ann = gen.get_stats("ann")
    assert (ann.executions, ann.succeeded, ann.failed, ann.refused, ann.by_language) == (
        3, 1, 1, 1, {"javascript": 3})
    total = gen.get_stats()
    assert total.executions == 4 and total.by_language == {"javascript": 3, "python": 1} and total.total_ms > 0


@needs_deno
async def test_the_code_tool_runs_in_an_agent_and_records_the_run_redacted(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.duckdb")
    secret = "sk-" + "a" * 30
    model = ScriptedModel([
        calls(("execute_code", {"code": f"console.log('key {secret}'); console.log(6 * 7);"}, "c1"),
              ("execute_code", {"code": "while (true) {}", "language": "typescript"}, "c2"),
              ("execute_code", {"code": "process.exit(3)"}, "c3")),
        "It printed 42.",
    ])
    gen = CodeGenerator(sandbox=DenoSandbox(SandboxLimits(cpu_seconds=1, wall_seconds=20)))
    agent = Agent("coder", provider=model, tools=[code_tool(gen)], user_id="ann", recorder=Recorder(store))
    result = await agent.run("what is 6 * 7?")
    ok, loop, refused = tool_results(model.requests[1])
    assert ok["content"] == f"key {secret}\n42\n" and not ok["is_error"]  # the model sees the real output
    assert loop["is_error"] and loop["content"] == "Error: the code used more than its CPU limit (1 s) and was stopped"
    assert refused["content"] == "Error: the code was refused: process.exit is not allowed in the sandbox"
    store.flush()
    stages = [s for s in store.load_run(result.run_id).stages if s.kind == "tool"]
    first = stages[0].attributes["sandbox"]
    assert first["exit_code"] == 0 and first["limits"]["memory_mb"] == 64 and first["language"] == "javascript"
    assert secret not in first["code"] and secret not in first["stdout"] and "[REDACTED]" in first["stdout"]
    assert "--deny-net" in first["permissions"]
    assert stages[1].attributes["sandbox"]["ended_by"] == "cpu_time"
    assert "process.exit" in stages[2].attributes["sandbox"]["refused"]

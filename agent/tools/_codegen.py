"""The code generator: write code (through a model, or from built-in templates), check it, run it.

``generate`` asks the configured provider for code in one language and takes the first fenced
block of its answer; with no provider it picks a built-in template by keyword (fibonacci,
factorial, primes, sorting, dates, array helpers) and says it did. ``validate_code`` refuses code
that is too long or uses a dangerous construct before anything runs; ``execute`` runs JavaScript
and TypeScript in the :class:`DenoSandbox`. Snippets are kept per user, and every execution
counts in the stats. :func:`code_tool` offers execution to an agent, recorded on its tool stage.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tracer import ContextItem, Item, ItemKind, Origin, OriginKind

from ..providers import ModelRequest, Provider
from ._context import ToolContext
from ._sandbox import EXECUTABLE_LANGUAGES, DenoSandbox, SandboxLimits, SandboxResult
from ._tool import Tool
from .errors import CodeValidationError, SandboxError

LANGUAGES = ("javascript", "typescript", "python", "shell", "sql", "html", "css", "json", "markdown")
MAX_CODE_LENGTH = 50_000
#: (pattern, why it is refused) for JavaScript and TypeScript; the sandbox denies these anyway,
#: refusing them first gives the model a clear answer instead of a runtime permission error
DANGEROUS_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"\bprocess\s*\.\s*exit\b", "process.exit"),
    (r"\brequire\s*\(\s*['\"](node:)?child_process['\"]\s*\)", "require('child_process')"),
    (r"\brequire\s*\(\s*['\"](node:)?fs(/promises)?['\"]\s*\)", "require('fs')"),
    (r"\beval\s*\(", "eval()"),
    (r"\bFunction\s*\(", "Function()"),
    (r"\bimport\s*\(", "dynamic import()"),
)
_COMPILED = tuple((re.compile(p), label) for p, label in DANGEROUS_PATTERNS)
_FENCE = re.compile(r"```[\w+-]*\n(.*?)```", re.S)

TEMPLATES: dict[str, tuple[tuple[str, ...], str]] = {
    "fibonacci": (("fibonacci", "fib"),
                  "function fibonacci(n) {\n  const out = [];\n  let [a, b] = [0, 1];\n"
                  "  for (let i = 0; i < n; i++) { out.push(a); [a, b] = [b, a + b]; }\n  return out;\n}\n"
                  "console.log(fibonacci(10).join(', '));\n"),
    "factorial": (("factorial",),
                  "function factorial(n) {\n  let r = 1n;\n  for (let i = 2n; i <= BigInt(n); i++) r *= i;\n"
                  "  return r;\n}\nconsole.log(factorial(20).toString());\n"),
    "primes": (("prime", "primes"),
               "function isPrime(n) {\n  if (n < 2) return false;\n"
               "  for (let d = 2; d * d <= n; d++) if (n % d === 0) return false;\n  return true;\n}\n"
               "console.log([...Array(50).keys()].filter(isPrime).join(', '));\n"),
    "sorting": (("sort", "sorting", "order"),
                "const values = [5, 3, 9, 1, 7];\nconst sorted = [...values].sort((a, b) => a - b);\n"
                "console.log(sorted.join(', '));\n"),
    "dates": (("date", "dates", "format", "time"),
              "const now = new Date();\nconst pad = (n) => String(n).padStart(2, '0');\n"
              "console.log(`${now.getFullYear()}-${pad(now.getMonth() + 1)}-${pad(now.getDate())}`);\n"),
    "arrays": (("array", "unique", "chunk", "flatten", "list"),
               "const unique = (xs) => [...new Set(xs)];\n"
               "const chunk = (xs, n) => xs.reduce((out, x, i) => (i % n ? out[out.length - 1].push(x) "
               ": out.push([x]), out), []);\nconsole.log(JSON.stringify({ unique: unique([1, 1, 2, 3, 3]), "
               "chunk: chunk([1, 2, 3, 4, 5], 2), flat: [[1, [2]], [3]].flat(Infinity) }));\n"),
}


@dataclass(frozen=True)
class GeneratedCode:
    """Code the generator wrote: ``source`` is ``model`` or ``template:<name>``."""

    code: str
    language: str
    source: str
    explanation: str = ""


@dataclass(frozen=True)
class CodeValidation:
    """Whether code may run, and every reason it may not."""

    valid: bool
    errors: tuple[str, ...] = ()


@dataclass(frozen=True)
class CodeSnippet:
    """A piece of code a user kept."""

    id: str
    user_id: str
    title: str
    code: str
    language: str
    tags: tuple[str, ...] = ()
    created_at: float = 0.0


@dataclass
class ExecutionStats:
    """Counts over executions: all, succeeded, failed, stopped by a limit, refused; time spent."""

    executions: int = 0
    succeeded: int = 0
    failed: int = 0
    stopped_by_limit: int = 0
    refused: int = 0
    total_ms: float = 0.0
    by_language: dict[str, int] = field(default_factory=dict)

    def add(self, language: str, result: SandboxResult | None) -> None:
        """Count one execution (``None``: it was refused before it ran)."""
        self.executions += 1
        self.by_language[language] = self.by_language.get(language, 0) + 1
        if result is None:
            self.refused += 1
            return
        self.total_ms += result.duration_ms
        if result.ok:
            self.succeeded += 1
        else:
            self.failed += 1
            if result.ended_by is not None:
                self.stopped_by_limit += 1


class CodeGenerator:
    """Generates, validates and runs code, with snippets per user and execution stats."""

    def __init__(self, *, provider: Provider | None = None, sandbox: DenoSandbox | None = None,
                 max_code_length: int = MAX_CODE_LENGTH, clock: Callable[[], float] = time.time) -> None:
        self.provider = provider
        self.sandbox = sandbox or DenoSandbox()
        self.max_code_length = max_code_length
        self.clock = clock
        self._snippets: dict[str, list[CodeSnippet]] = {}
        self._stats: dict[str, ExecutionStats] = {}

    def set_provider(self, provider: Provider | None) -> None:
        """Generate through ``provider`` from now on (None: templates only)."""
        self.provider = provider

    # ------------------------------------------------------------------ generate

    async def generate(self, task: str, language: str = "javascript") -> GeneratedCode:
        """Code for ``task`` in ``language``: from the model, or a built-in template when none is set."""
        _check_language(language)
        if self.provider is None:
            return _template_for(task, language)
        prompt = (f"Write {language} code for this task. Answer with one fenced code block, then one "
                  f"sentence explaining it.\n\nTask: {task}")
        request = ModelRequest.of([ContextItem(Item.of_text(ItemKind.USER, prompt),
                                               Origin(OriginKind.CONFIG, source="code_generator"))])
        response = await self.provider.complete(request)
        match = _FENCE.search(response.text)
        if match is None:
            raise SandboxError(f"the model's answer held no fenced code block: {response.text[:200]!r}")
        explanation = response.text[match.end():].strip()
        return GeneratedCode(match.group(1).rstrip() + "\n", language, "model", explanation)

    # ------------------------------------------------------------------ validate and run

    def is_executable(self, language: str) -> bool:
        """True for the languages the sandbox runs (JavaScript, TypeScript)."""
        return language in EXECUTABLE_LANGUAGES

    def validate_code(self, code: str, language: str) -> CodeValidation:
        """Whether ``code`` may run: its length, and (JS/TS) no dangerous pattern."""
        errors = []
        if language not in LANGUAGES:
            errors.append(f"unknown language {language!r}; use one of {', '.join(LANGUAGES)}")
        if not code.strip():
            errors.append("the code is empty")
        if len(code) > self.max_code_length:
            errors.append(f"the code is {len(code)} characters long; at most {self.max_code_length} are allowed")
        if language in EXECUTABLE_LANGUAGES:
            errors += [f"{label} is not allowed in the sandbox" for pattern, label in _COMPILED if pattern.search(code)]
        return CodeValidation(not errors, tuple(errors))

    async def execute(self, code: str, language: str = "javascript", *, user_id: str | None = None,
                      limits: SandboxLimits | None = None) -> SandboxResult:
        """Validate, then run ``code`` in the sandbox; refused code raises :class:`CodeValidationError`."""
        stats = self._stats.setdefault(user_id or "", ExecutionStats())
        if not self.is_executable(language):
            stats.add(language, None)
            raise CodeValidationError(f"{language} code cannot run here; the sandbox runs "
                                      f"{', '.join(EXECUTABLE_LANGUAGES)}")
        check = self.validate_code(code, language)
        if not check.valid:
            stats.add(language, None)
            raise CodeValidationError("the code was refused: " + "; ".join(check.errors))
        result = await self.sandbox.run(code, language, limits)
        stats.add(language, result)
        return result

    # ------------------------------------------------------------------ snippets and stats

    def save_snippet(self, user_id: str, title: str, code: str, language: str = "javascript",
                     tags: tuple[str, ...] | list[str] = ()) -> CodeSnippet:
        """Keep a snippet for ``user_id``."""
        _check_language(language)
        snippet = CodeSnippet(uuid.uuid4().hex[:12], user_id, title, code, language, tuple(tags), self.clock())
        self._snippets.setdefault(user_id, []).append(snippet)
        return snippet

    def get_snippets(self, user_id: str, *, language: str | None = None, tag: str | None = None) -> list[CodeSnippet]:
        """The user's snippets, oldest first, optionally of one language or with one tag."""
        return [s for s in self._snippets.get(user_id, ())
                if (language is None or s.language == language) and (tag is None or tag in s.tags)]

    def get_stats(self, user_id: str | None = None) -> ExecutionStats:
        """One user's execution stats, or everyone's added up (``user_id`` None)."""
        if user_id is not None:
            return self._stats.get(user_id, ExecutionStats())
        total = ExecutionStats()
        for s in self._stats.values():
            total.executions += s.executions
            total.succeeded += s.succeeded
            total.failed += s.failed
            total.stopped_by_limit += s.stopped_by_limit
            total.refused += s.refused
            total.total_ms += s.total_ms
            for lang, n in s.by_language.items():
                total.by_language[lang] = total.by_language.get(lang, 0) + n
        return total


def _check_language(language: str) -> None:
    if language not in LANGUAGES:
        raise SandboxError(f"unknown language {language!r}; use one of {', '.join(LANGUAGES)}")


def _template_for(task: str, language: str) -> GeneratedCode:
    words = set(re.findall(r"[a-z]+", task.lower()))
    for name, (keywords, code) in TEMPLATES.items():
        if words & set(keywords):
            return GeneratedCode(code, language, f"template:{name}",
                                 f"No model is configured: this is the built-in {name} template.")
    raise SandboxError(f"no model is configured and no built-in template fits {task[:100]!r}; templates: "
                       f"{', '.join(TEMPLATES)} (set a provider to generate anything else)")


def code_tool(generator: CodeGenerator | None = None, *, name: str = "execute_code") -> Tool:
    """A tool that runs JavaScript or TypeScript in the sandbox; each run is recorded on its stage.

    The result is the program's output; a refusal, a failure or a limit is an error result that
    says which. The stage records the code, the limits, the exit, stdout and stderr (redacted).
    """
    gen = generator or CodeGenerator()

    async def execute(arguments: dict[str, Any], context: ToolContext) -> str:
        code, language = arguments["code"], arguments.get("language", "javascript")
        try:
            result = await gen.execute(code, language, user_id=context.user_id)
        except CodeValidationError as exc:
            context.record(sandbox={"language": language, "code": code, "refused": str(exc)},
                           why_note=f"sandbox refused the code: {exc}")
            raise
        context.record(sandbox=result.to_record(code),
                       why_note=f"sandbox: {result.error or 'exit 0'} ({result.duration_ms:.0f} ms)")
        if not result.ok:
            detail = f"\nstderr:\n{result.stderr[-2000:]}" if result.stderr and result.ended_by is None else ""
            partial = f"\nstdout before it stopped:\n{result.stdout[-2000:]}" if result.stdout else ""
            raise SandboxError(f"{result.error}{partial}{detail}")
        return result.stdout + ("\n[output cut at the sandbox's limit]" if result.truncated else "")

    limits = gen.sandbox.limits
    return Tool(
        name,
        f"Run JavaScript or TypeScript in a sandbox (no network, files, environment or subprocesses; "
        f"{limits.memory_mb} MB memory, {limits.cpu_seconds} s CPU, {limits.wall_seconds:g} s). "
        f"Returns what the code prints with console.log.",
        {"type": "object", "properties": {
            "code": {"type": "string", "description": "the program; print results with console.log"},
            "language": {"enum": list(EXECUTABLE_LANGUAGES), "default": "javascript"}},
         "required": ["code"], "additionalProperties": False},
        execute, category="code_execute", tags=("javascript", "typescript", "sandbox", "run", "compute"),
        takes_context=True, timeout=limits.wall_seconds + 10,
    )

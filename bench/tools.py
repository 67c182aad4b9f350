"""Tool governance figures: prompt tokens with and without meta-tools, permission-check cost,
sandbox start-to-result time.

    .venv/bin/python bench/tools.py [--tools 100] [--checks 20000] [--sandbox-runs 10]

Targets (issue 14): meta-tools cut the prompt tokens of a 100-tool catalogue by >= 10x; a
permission check costs < 20 µs. Ratios are measured within one run (the machine is shared).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent import Agent, Tool, ToolContext, estimate_item_tokens
from agent.providers import FunctionModel, ModelRequest
from agent.tools import (
    CATEGORIES,
    DenoSandbox,
    PermissionChecker,
    PermissionPolicy,
    SandboxError,
    ToolRule,
    UserPermissions,
)
from tracer import ItemKind

VERBS = ("list", "get", "create", "update", "delete", "search", "summarise", "export")
NOUNS = ("emails", "contacts", "notes", "tasks", "bookmarks", "events", "files", "invoices", "tickets",
         "documents", "photos", "playlists", "expenses")


def catalogue(n: int) -> list[Tool]:
    """``n`` realistic tools: a name, a sentence of description, three to five described parameters."""
    tools = []
    categories = list(CATEGORIES)
    for i in range(n):
        verb, noun = VERBS[i % len(VERBS)], NOUNS[(i // len(VERBS)) % len(NOUNS)]
        properties: dict[str, Any] = {
            "query": {"type": "string", "description": f"free text matched against the {noun}' titles and bodies"},
            "limit": {"type": "integer", "description": "how many results to return at most", "default": 20},
            "folder": {"type": "string", "description": f"which collection of {noun} to look in"},
        }
        if i % 2:
            properties["since"] = {"type": "string", "description": "only items changed after this ISO date"}
        if i % 3:
            properties["sort"] = {"enum": ["newest", "oldest", "relevance"], "description": "the order of results"}
        tools.append(Tool(f"{verb}_{noun}_{i}", f"{verb.capitalize()} the user's {noun} in their personal "
                          f"workspace; returns a JSON list with ids, titles and dates.",
                          {"type": "object", "properties": properties, "required": ["query"]},
                          lambda a: [], category=categories[i % len(categories)]))
    return tools


def prompt_tokens(tools: list[Tool], meta: bool) -> tuple[int, int]:
    """(tokens of the whole first request, tokens of its tool definitions and tools section)."""
    seen: list[ModelRequest] = []

    def capture(request: ModelRequest) -> str:
        seen.append(request)
        return "ok"

    agent = Agent("bench", provider=FunctionModel(capture), tools=tools, meta_tools=meta)
    asyncio.run(agent.run("What is on my calendar tomorrow?"))
    items = seen[0].context
    total = sum(estimate_item_tokens(ci) for ci in items)
    tool_part = sum(estimate_item_tokens(ci) for ci in items if ci.item.kind == ItemKind.TOOL_DEFINITION
                    or (ci.item.kind == ItemKind.PROMPT_SECTION and ci.item.body.get("section") == "tools"))
    return total, tool_part


def per_call_us(fn: Any, n: int, repeats: int = 5) -> float:
    """The median over ``repeats`` of the mean µs per call of ``fn`` over ``n`` calls."""
    means = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(n):
            fn()
        means.append((time.perf_counter() - started) / n * 1e6)
    return statistics.median(means)


def permission_costs(n: int) -> dict[str, float]:
    workspace = tempfile.mkdtemp(prefix="bench-tools-")
    os.makedirs(os.path.join(workspace, "notes"), exist_ok=True)
    checker = PermissionChecker(PermissionPolicy(
        tools={"fetch_page": ToolRule("network_read", rate_limit=1_000_000)},
        default=UserPermissions(allowed_hosts=("example.com", "*.example.org")), global_rate_limit=None))
    memory = Tool("recall", "r", {"type": "object"}, lambda a: "", category="memory")
    read = Tool("read_file", "r", {"type": "object"}, lambda a: "", category="file_read")
    fetch = Tool("fetch_page", "f", {"type": "object"}, lambda a: "", category="network_read")
    ctx = ToolContext(user_id="ann", workspace=workspace)
    path_args = {"path": "notes/today.md"}
    host_args = {"url": "https://docs.example.org/page"}
    limited = PermissionChecker(PermissionPolicy(global_rate_limit=10 ** 9))

    def check_and_count() -> None:
        limited.record_usage(memory, ctx, limited.check(memory, ctx))

    notes = os.path.join(workspace, "notes")
    return {
        "one os.lstat, for scale (not a check)": per_call_us(lambda: os.lstat(notes), n),
        "plain tool (memory)": per_call_us(lambda: checker.check(memory, ctx), n),
        "file tool, path resolved (symlinks followed)": per_call_us(lambda: checker.check(read, ctx, path_args), n),
        "network tool, host matched, per-tool window": per_call_us(lambda: checker.check(fetch, ctx, host_args), n),
        "check + record_usage (global window)": per_call_us(check_and_count, n),
    }


def sandbox_times(runs: int) -> dict[str, float] | str:
    try:
        sandbox = DenoSandbox()
        sandbox.deno  # noqa: B018 - find the binary before timing
    except SandboxError as exc:
        return str(exc)

    async def timed(code: str, language: str) -> float:
        started = time.perf_counter()
        result = await sandbox.run(code, language)
        assert result.ok, result.error
        return (time.perf_counter() - started) * 1000

    async def all_runs() -> dict[str, float]:
        await timed("console.log(1)", "javascript")  # warm the page cache
        js = [await timed("console.log([1, 2, 3].map((x) => x * 2).join(','))", "javascript") for _ in range(runs)]
        ts = [await timed("const n: number = 21; console.log(n * 2)", "typescript") for _ in range(runs)]
        return {"javascript median ms": statistics.median(js), "typescript median ms": statistics.median(ts),
                "javascript max ms": max(js), "typescript max ms": max(ts)}

    return asyncio.run(all_runs())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tools", type=int, default=100, help="catalogue size (default 100)")
    parser.add_argument("--checks", type=int, default=20_000, help="permission checks per timing (default 20000)")
    parser.add_argument("--sandbox-runs", type=int, default=10, help="sandbox runs per language (default 10)")
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    tools = catalogue(args.tools)
    full_total, full_tools = prompt_tokens(tools, meta=False)
    meta_total, meta_tools = prompt_tokens(tools, meta=True)
    print(f"\nprompt tokens per request, {args.tools} tools (estimate: ~4 characters a token)")
    print(f"  whole catalogue: {full_total:>7,} tokens  (tool definitions + tools section {full_tools:,})")
    print(f"  meta-tools:      {meta_total:>7,} tokens  (tool definitions + tools section {meta_tools:,})")
    print(f"  reduction: {full_total / meta_total:.1f}x whole request, {full_tools / meta_tools:.1f}x tool part "
          f"(target >= 10x) -> {'met' if full_total / meta_total >= 10 else 'NOT met'}")

    print(f"\npermission check, µs per call (median of 5 x {args.checks:,})")
    costs = permission_costs(args.checks)
    for name, us in costs.items():
        print(f"  {name:<48} {us:6.2f} µs")
    scale = costs.pop("one os.lstat, for scale (not a check)")
    worst = max(costs.values())
    print(f"  worst {worst:.2f} µs = {worst / scale:.1f} x one os.lstat ({scale:.2f} µs now) "
          f"(target < 20 µs) -> {'met' if worst < 20 else 'NOT met'}")

    print(f"\nsandbox start to result ({args.sandbox_runs} runs per language, Deno with every permission denied)")
    times = sandbox_times(args.sandbox_runs)
    if isinstance(times, str):
        print(f"  skipped: {times}")
    else:
        for name, ms in times.items():
            print(f"  {name:<24} {ms:7.1f}")
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

"""JSON nested deeper than Python's stack anywhere in a run — the user's message, the model's text,
a tool call's arguments, a tool's result (as text or as an object), a stage attribute — is stored,
masked, and never a crashed run.

Masking parses a JSON-looking text to mask it by key, and walked the value recursively: a message of
``[[[[...{"password": ...}...]]]]`` 900 levels deep made ``Agent.run`` raise ``RecursionError`` (from
the recorder's start), a model's text of that shape failed the run, and a tool result of it failed
the run too. Arguments deeper than ``json.loads`` reads reached the model as a bare
``RecursionError``; they are an arguments error it can correct.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent import Agent, ToolContext, tool
from agent.providers import ScriptedModel, calls, raw_call, tool_results
from tracer import Recorder, Store

SECRET = "hunter2-" + "Zq9" * 6
PLACES = ("input", "answer", "arguments", "result_text", "result_value", "attribute")


def _deep_text(depth: int, opener: str) -> str:
    closer = "]" if opener == "[" else "}"
    return opener * depth + f'{{"password": "{SECRET}", "note": "kept"}}' + closer * depth


def _deep_value(depth: int) -> Any:
    value: Any = {"password": SECRET, "note": "kept"}
    for _ in range(depth):
        value = [value]
    return value


@settings(max_examples=36, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(place=st.sampled_from(PLACES), depth=st.integers(700, 5000), opener=st.sampled_from(["[", '{"a":']),
       durability=st.sampled_from(["exit", "sync"]))
def test_deep_json_anywhere_is_stored_masked_and_the_run_answers(
    tmp_path_factory: Any, place: str, depth: int, opener: str, durability: str,
) -> None:
    text = _deep_text(depth, opener)

    @tool
    def look(query: str = "", context: ToolContext | None = None) -> Any:
        """Look something up.

        Args:
            query: what to look up
        """
        if place == "attribute" and context is not None:
            context.record(found=_deep_value(depth))
        if place == "result_value":
            return _deep_value(depth)
        return text if place == "result_text" else "found"

    first = (raw_call("look", '{"query": ' + ("[" * depth + '"x"' + "]" * depth) + "}")
             if place == "arguments" else calls(("look", {"query": "q"})))
    script = [first, text if place == "answer" else "done"]
    model = ScriptedModel(script)
    path = Path(tmp_path_factory.mktemp("deep")) / "store.duckdb"
    store = Store.open(path)
    agent = Agent("deep", provider=model, tools=[look], recorder=Recorder(store, durability=durability))
    result = asyncio.run(agent.run(text if place == "input" else "look it up"))
    store.close()

    assert result.status == "answered", (place, result.error)
    [shown] = tool_results(model.requests[1])
    if place == "arguments":
        assert shown["is_error"] and shown["content"].startswith("Error: arguments for look "), shown["content"][:300]
        if depth > 2500:  # deeper than json.loads reads (about 1,000 levels and more, by the stack)
            assert "nested too deeply" in shown["content"]
    else:
        assert not shown["is_error"], shown["content"][:300]
    with Store.open(path, read_only=True) as reopened:
        run = reopened.load_run(result.run_id)
        assert run.run.status == "answered"
        assert [s.kind for s in run.stages].count("tool") == 1
        stored = "\n".join([*(json.dumps([i.kind, i.body]) for i in run.items.values()),
                            *(json.dumps(s.attributes, default=str) for s in run.stages),
                            str(run.run.input), str(run.run.output)])
    assert SECRET not in stored
    if place in ("input", "answer", "result_text"):  # the text is kept, only the password masked
        assert "kept" in stored and "[REDACTED]" in stored
    dump = subprocess.run(["strings", "-n", "8", str(path)], capture_output=True, text=True).stdout
    assert SECRET not in dump  # (DuckDB may compress a long text: the check above reads it back)


def test_an_attribute_json_cannot_write_is_stored_cut(tmp_path: Path) -> None:
    """Circular, or nested past the stack: the attribute is kept as far as it can be written
    (a circular one raised ValueError and failed the run)."""
    twice: dict[str, Any] = {"name": "loop"}
    twice["a"] = twice
    twice["b"] = twice  # cut where it comes back, not copied 2**64 times

    @tool
    def note(context: ToolContext) -> str:
        """Note something."""
        context.record(loop=twice, deep=_deep_value(3000))
        return "noted"

    with Store.open(tmp_path / "s.duckdb") as store:
        result = asyncio.run(Agent("n", provider=ScriptedModel([calls(("note", {})), "done"]), tools=[note],
                                   recorder=Recorder(store)).run("go"))
        assert result.status == "answered", result.error
        store.flush()
        [stage] = [s for s in store.load_run(result.run_id).stages if s.kind == "tool"]
    loop = stage.attributes["loop"]
    assert loop == {"name": "loop", "a": "<circular reference to a dict>", "b": "<circular reference to a dict>"}
    deep = stage.attributes["deep"]
    for _ in range(63):  # 64 levels counted from the attributes object itself
        deep = deep[0]
    assert deep == "<list nested deeper than 64 levels>"

"""A lone surrogate anywhere in a run — the user's message, the model's text, a tool call's name or
arguments, a tool's result, a stage attribute — is kept as its escape, and the run is stored.

A Python str can hold one (``"\\ud800"`` in JSON reads as one, so any HTTP client can send it); no
UTF-8 writer takes it. Before, the item's hash raised in the run (``failed``, ``UnicodeEncodeError``),
and a run's input holding one failed the store's writer for every run of its batch.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent import Agent, ToolContext, tool
from agent.providers import ScriptedModel, calls
from tracer import Recorder, Store, utf8_text

SURROGATES = st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d"])
PLAIN = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)


@st.composite
def texts(draw: st.DrawFn) -> str:
    """A text with lone surrogates at random places, or none."""
    parts = draw(st.lists(st.one_of(PLAIN, SURROGATES), min_size=1, max_size=5))
    return "".join(parts)


@tool
def echo(text: str, context: ToolContext) -> str:
    """Repeat a text.

    Args:
        text: what to repeat
    """
    context.record(echoed=text)
    return text


def _no_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return utf8_text(value) is value
    if isinstance(value, dict):
        return all(_no_surrogate(k) and _no_surrogate(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return all(_no_surrogate(v) for v in value)
    return True


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(question=texts(), argument=texts(), answer=texts(), agent_name=texts(),
       durability=st.sampled_from(["exit", "sync"]))
def test_a_lone_surrogate_anywhere_is_stored_as_its_escape(
    tmp_path_factory: Any, question: str, argument: str, answer: str, agent_name: str, durability: str,
) -> None:
    path = Path(tmp_path_factory.mktemp("surrogates")) / "store.duckdb"
    store = Store.open(path)
    script = [calls(("echo", {"text": argument})), answer or "done"]
    agent = Agent(agent_name.strip() or "a", provider=ScriptedModel(script), tools=[echo],
                  recorder=Recorder(store, durability=durability))
    result = asyncio.run(agent.run(question or "hi"))
    store.close()

    assert result.status == "answered", result.error
    assert result.answer == utf8_text(answer or "done")
    json.dumps(result.answer, ensure_ascii=False).encode()  # a client's UTF-8 JSON carries the reply

    with Store.open(path, read_only=True) as reopened:
        run = reopened.load_run(result.run_id)
        assert run.run.input == utf8_text(question or "hi")
        assert run.run.output == result.answer
        stored = reopened.query("SELECT kind, body, text FROM fp_item")
        results = [json.loads(body)["content"] for kind, body, _ in stored if kind == "tool_result"]
        # the call's arguments travel as JSON, where an escaped pair of surrogates reads as one character
        received = json.loads(json.dumps(argument))
        assert results == [utf8_text(received)]
        # an attribute's JSON text may carry it as a \\u escape, which JSON reads back as the surrogate
        echoed = [json.loads(a)["echoed"] for (a,) in reopened.query("SELECT attributes FROM fp_stage")
                  if a and "echoed" in json.loads(a)]
        assert echoed in ([received], [utf8_text(received)])
        assert all(_no_surrogate(text) for _, _, text in stored if text is not None)

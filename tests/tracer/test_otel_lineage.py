"""OpenTelemetry export keeps a team's lineage: a child run joins its parent's trace, or links to it.

Teams and delegation chains are recorded with the project's agents (ScriptedModel, agent_tool,
MultiAgentOrchestrator) and exported to an in-memory span exporter, live and after the fact.
"""

from __future__ import annotations

import asyncio
import io
import json
import random
from dataclasses import dataclass, field
from typing import Any

import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent.orchestration import AgentConfig, AgentOrchestrator, MultiAgentOrchestrator, Team, agent_tool
from agent.providers import ModelResponse, ScriptedModel, calls
from tracer import Recorder, RunData, Store
from tracer.logs import LoggingListener, configure_logging
from tracer.otel import OTelExporter, export_runs, span_id_of, spans_of, trace_id_of

# ---------------------------------------------------------------------------------------- teams


@dataclass
class Node:
    """One agent of a delegation tree: it asks each of its children, then answers."""

    name: str
    children: list[Node] = field(default_factory=list)

    def walk(self) -> list[Node]:
        return [self, *(n for c in self.children for n in c.walk())]


def chain(depth: int) -> Node:
    """A chain of ``depth`` agents, each handing over to the next."""
    node = Node(f"a{depth - 1}")
    for i in reversed(range(depth - 1)):
        node = Node(f"a{i}", [node])
    return node


def orchestrator(node: Node, recorder: Recorder) -> AgentOrchestrator:
    tools = [agent_tool(orchestrator(child, recorder)) for child in node.children]
    script: list[Any] = []
    if node.children:
        script.append(calls(*((f"ask_{c.name}", {"task": f"help {node.name}"}) for c in node.children)))
    script.append(ModelResponse(f"{node.name} done", (), "stop"))
    return AgentOrchestrator(AgentConfig(name=node.name, system_prompt=f"You are {node.name}.",
                                         provider=ScriptedModel(script), model="m", tools=tools,
                                         recorder=recorder, session_id="lineage"))


def record(tree: Node, recorder: Recorder, *, team: bool = False) -> None:
    """Run the tree (under a team that routes to its root when ``team``)."""
    root = orchestrator(tree, recorder)
    if not team:
        asyncio.run(root.execute("start"))
        return
    teams = MultiAgentOrchestrator(recorder=recorder, session_id="lineage")
    teams.register_team(Team("crew", [root], lambda message, context: root.name))
    asyncio.run(teams.execute("start"))


def stored(store: Store) -> list[RunData]:
    store.flush()
    return [store.load_run(r.id) for r in reversed(store.list_runs(limit=10_000))]  # oldest first


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def agent_span(spans: list[ReadableSpan], run_id: str) -> ReadableSpan:
    [span] = [s for s in spans if s.name.startswith("invoke_agent") and attrs(s)["footprint.run.id"] == run_id]
    return span


def assert_connected(spans: list[ReadableSpan]) -> None:
    """One trace, one root, and every span's parent is a span of the export in the same trace."""
    assert spans
    by_id = {s.context.span_id: s for s in spans}
    assert len(by_id) == len(spans), "span ids are unique"
    assert len({s.context.trace_id for s in spans}) == 1
    roots = [s for s in spans if s.parent is None]
    assert len(roots) == 1
    for span in spans:
        if span.parent is not None:
            assert span.parent.span_id in by_id, f"{span.name} has a parent outside the export"
            assert span.parent.trace_id == span.context.trace_id


# ---------------------------------------------------------------------------------------- tests


def test_a_recorded_team_chain_is_one_trace_with_each_child_under_its_hand_over(tmp_path: Any) -> None:
    with Store.open(tmp_path / "fp.duckdb") as store:
        record(chain(12), Recorder(store), team=True)
        runs = stored(store)
    assert len(runs) == 13  # the team run and its 12 agents
    spans = spans_of(runs)
    assert_connected(spans)
    team = next(d for d in runs if "team" in d.run.labels)
    assert {s.context.trace_id for s in spans} == {trace_id_of(team.run.id)}
    for data in runs:
        if data is team:
            continue
        parent_run, parent_stage = data.run.attributes["parent_run"], data.run.attributes["parent_stage"]
        child = agent_span(spans, data.run.id)
        handover = next(s for s in spans if s.context.span_id == child.parent.span_id)  # type: ignore[union-attr]
        assert handover.context.span_id == span_id_of(parent_stage)
        assert handover.name == f"subagent {data.run.agent}"
        assert attrs(handover)["footprint.run.id"] == parent_run
        assert attrs(handover)["footprint.child.run.id"] == data.run.id
        assert attrs(child)["footprint.parent.run.id"] == parent_run
        assert attrs(child)["gen_ai.agent.name"] == data.run.agent
        assert not child.links
    # a hand-over from inside a tool call hangs under that call's span; the team's under its agent span
    for handover in (s for s in spans if s.name.startswith("subagent ")):
        parent = next(s for s in spans if s.context.span_id == handover.parent.span_id)  # type: ignore[union-attr]
        assert parent.name.startswith("execute_tool ask_" if attrs(parent)["footprint.run.id"] != team.run.id
                                      else "invoke_agent crew")


def test_the_order_of_the_runs_does_not_matter_and_export_runs_sends_the_same_spans(tmp_path: Any) -> None:
    with Store.open(tmp_path / "fp.duckdb") as store:
        record(chain(4), Recorder(store))
        runs = stored(store)
    forward = {(s.context.trace_id, s.context.span_id, s.parent.span_id if s.parent else None)
               for s in spans_of(runs)}
    assert {(s.context.trace_id, s.context.span_id, s.parent.span_id if s.parent else None)
            for s in spans_of(list(reversed(runs)))} == forward
    memory = InMemorySpanExporter()
    assert export_runs(reversed(runs), memory, batch_size=3) == len(forward)
    assert_connected(list(memory.get_finished_spans()))


def test_a_child_exported_without_its_parent_links_to_the_hand_over_span(tmp_path: Any) -> None:
    with Store.open(tmp_path / "fp.duckdb") as store:
        record(chain(3), Recorder(store))
        first, middle, last = stored(store)
    whole = spans_of([first, middle, last])
    handover = next(s for s in whole if s.context.span_id == span_id_of(middle.run.attributes["parent_stage"]))
    alone = spans_of([middle])
    root = agent_span(alone, middle.run.id)
    assert root.parent is None
    assert {s.context.trace_id for s in alone} == {trace_id_of(middle.run.id)}
    [link] = root.links
    # the link names the parent's hand-over span as the full export (the parent's trace) sent it
    assert (link.context.trace_id, link.context.span_id) == (handover.context.trace_id, handover.context.span_id)
    assert link.attributes is not None
    assert link.attributes["footprint.parent.run.id"] == first.run.id
    # the middle run's own child, exported with it, still hangs under it (in the middle run's trace)
    pair = spans_of([last, middle])
    assert_connected(pair)
    assert agent_span(pair, last.run.id).parent.span_id == span_id_of(last.run.attributes["parent_stage"])  # type: ignore[union-attr]


def test_the_live_exporter_keeps_the_lineage_like_the_batch_export(tmp_path: Any) -> None:
    memory = InMemorySpanExporter()
    live = OTelExporter(processor=SimpleSpanProcessor(memory))
    try:
        with Store.open(tmp_path / "fp.duckdb") as store:
            record(Node("lead", [Node("researcher", [Node("searcher")]), Node("writer")]),
                   Recorder(store, listeners=[live]), team=True)
            runs = stored(store)
    finally:
        live.shutdown()
    sent = list(memory.get_finished_spans())
    assert_connected(sent)

    def shape(spans: list[ReadableSpan]) -> set[tuple[int, int, int | None, str]]:
        return {(s.context.trace_id, s.context.span_id, s.parent.span_id if s.parent else None, s.name)
                for s in spans}

    assert shape(sent) == shape(spans_of(runs))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), depth=st.integers(1, 4), width=st.integers(1, 3),
       team=st.booleans(), shuffled=st.booleans())
def test_any_tree_of_delegations_exports_as_one_connected_trace(
    tmp_path_factory: Any, seed: int, depth: int, width: int, team: bool, shuffled: bool,
) -> None:
    rng = random.Random(seed)
    counter = iter(range(10_000))

    def grow(level: int) -> Node:
        name = f"n{next(counter)}"
        kids = [] if level >= depth else [grow(level + 1) for _ in range(rng.randint(0, width))]
        return Node(name, kids)

    tree = grow(1)
    with Store.open(tmp_path_factory.mktemp("tree") / "fp.duckdb") as store:
        record(tree, Recorder(store), team=team)
        runs = stored(store)
    assert len(runs) == len(tree.walk()) + team
    if shuffled:
        rng.shuffle(runs)
    spans = spans_of(runs)
    assert_connected(spans)
    agents = [s for s in spans if s.name.startswith("invoke_agent")]
    assert len(agents) == len(runs)
    # dropping any one run: its children link to it, everything else stays connected in its part
    gone = rng.choice(runs)
    rest = [d for d in runs if d is not gone]
    partial = spans_of(rest)
    ids = {s.context.span_id for s in partial}
    for data in rest:
        span = agent_span(partial, data.run.id)
        if data.run.attributes.get("parent_run") == gone.run.id:
            assert span.parent is None and len(span.links) == 1
            assert span.links[0].context.span_id == span_id_of(data.run.attributes["parent_stage"])
    for span in partial:
        assert span.parent is None or span.parent.span_id in ids


def test_log_lines_of_a_child_run_carry_the_trace_id_its_spans_are_exported_in(tmp_path: Any) -> None:
    out = io.StringIO()
    configure_logging(json=True, stream=out)
    try:
        with Store.open(tmp_path / "fp.duckdb") as store:
            record(chain(3), Recorder(store, listeners=[LoggingListener(trace_ids=True)]))
            spans = spans_of(stored(store))
    finally:
        structlog.reset_defaults()
        structlog.contextvars.clear_contextvars()
    (trace,) = {s.context.trace_id for s in spans}
    events = [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]
    assert len({e["run_id"] for e in events if e["event"] == "run.started"}) == 3
    assert {e["trace_id"] for e in events if "trace_id" in e} == {f"{trace:032x}"}

"""Running the demo: record the scenario's turns, print the answers, then the `why` of the wrong one."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from tracer import Evidence, Recorder, Store, one_line, why

from .._events import RunFinished, RunResult, ToolStarted
from .._memory import ConversationMemory
from ..providers import Provider
from ._scenario import DEMO_SESSION_PREFIX, Scenario, build_demo_agent, default_provider, load_scenario


@dataclass
class DemoResult:
    """What the demo recorded: the session, each turn's result, and the wrong answer's evidence."""

    session_id: str
    results: list[RunResult] = field(default_factory=list)
    wrong_run_id: str | None = None
    evidence: Evidence | None = None
    culprits: list[tuple[str, str, str]] = field(default_factory=list)  # (origin source, text, stage id)
    labels: tuple[str, ...] = ()
    proven: list[tuple[str, str]] = field(default_factory=list)  # (item source, blame verdict)


def _claims(answer: str, evidence: Evidence) -> set[str]:
    """Names the answer asserts that neither the user nor a tool gave it: where did those come from?"""
    given = " ".join(
        n.text or "" for n in evidence.items() if n.item_kind in ("user", "tool_result", "tool_call")
    )
    names = set()
    for sentence in re.split(r"(?<=[.?!])\s+", answer):
        for word in re.findall(r"\b[A-Z][a-z]{2,}\b", sentence)[1:] if sentence else []:
            if word not in given:
                names.add(word)
    return names


async def run_demo(
    store: Store,
    *,
    provider: Provider | None = None,
    scenario: Scenario | None = None,
    echo: Callable[[str], None] = print,
    session_id: str | None = None,
    prove: bool = True,
) -> DemoResult:
    """Run the scenario's turns as one session, recorded into ``store``; print as it goes."""
    scenario = scenario or load_scenario()
    provider = provider or default_provider()
    session = session_id or f"{DEMO_SESSION_PREFIX}{uuid.uuid4().hex[:8]}"
    from tracer.otel import exporter_from_env

    exporter = exporter_from_env()  # OTEL_EXPORTER_OTLP_ENDPOINT set: spans go out live as well
    recorder = Recorder(store, listeners=[exporter] if exporter else [])
    memory = ConversationMemory()
    agent = build_demo_agent(scenario, provider=provider, recorder=recorder, session_id=session, memory=memory)
    demo = DemoResult(session, labels=agent.labels)
    model_note = (
        "offline demo model: deterministic rules that read their context; set OPENAI_API_KEY for a real model"
        if "offline-demo" in agent.labels else f"model {getattr(provider, 'model', provider.name)}"
    )
    echo(f"footprint demo: {scenario.name} ({model_note})")
    echo(f"Recording to {store.path}, session {session}\n")
    wrong: tuple[RunResult, dict[str, object]] | None = None
    for number, turn in enumerate(scenario.turns, 1):
        message = str(turn["message"])
        echo(f"[{number}] Maya: {message}")
        result: RunResult | None = None
        async for event in agent.stream(message):
            if isinstance(event, ToolStarted):
                echo(f"    -> {event.name}({event.arguments})  {event.progress or ''}".rstrip())
            elif isinstance(event, RunFinished):
                result = event.result
        assert result is not None
        demo.results.append(result)
        if result.status != "answered":
            echo(f"    ! run {result.run_id} ended {result.status}: {result.error}")
            continue
        echo(f"    assistant: {result.answer}")
        expected = turn.get("expected_contains")
        if expected and str(expected) not in result.answer:
            echo(f"    x wrong: Maya said she lives in {expected}, but the answer does not say so.")
            wrong = (result, turn)
        echo("")
    store.flush()
    if exporter is not None:
        exporter.shutdown()
        echo("Spans sent to the OpenTelemetry collector named by OTEL_EXPORTER_OTLP_ENDPOINT.\n")
    if wrong is None:
        echo("Every answer was right this time (a real model may not repeat the mistake).")
        return demo
    result, _turn = wrong
    demo.wrong_run_id = result.run_id
    demo.evidence = evidence = why(store, result.run_id)
    echo(f"Why did run {result.run_id} answer that?  (footprint why {result.run_id})\n")
    suspects = _claims(result.answer, evidence)
    echo(f"The answer asserts {', '.join(sorted(suspects)) or 'nothing'} that neither Maya nor a tool said. "
         f"The context it rests on, from outside the run:\n")
    seen: set[str] = set()
    for node in evidence.items():
        origin = node.origin
        if origin is None or origin.kind == "stage" or node.item_hash in seen:
            continue
        seen.add(node.item_hash or "")
        text = (node.text or "").replace("\n", " ")
        mark = "  "
        if any(word in text for word in suspects) and origin.kind in ("memory", "prompt_section", "file", "hook"):
            mark = "=>"
            demo.culprits.append((origin.source or origin.kind, text, origin.stage_id or ""))
        echo(f"  {mark} {node.item_kind:<15} {one_line(text, 64)!r:<68} <- {origin.kind} {origin.source or ''}")
    echo("")
    for source, text, _stage in demo.culprits:
        echo(f"The evidence names {source!r}: {text!r}, injected into the prompt by the composer; it")
        echo("outweighed what Maya said in the conversation.")
    if prove:
        from ..evidence import blame

        echo("\nProving it: re-running the answer with each suspect removed (footprint blame) ...")
        report = await blame(store, result.run_id, provider=provider, tools=list(agent.tools.values()))
        demo.proven = [(s.source, s.verdict) for s in report.culprits]
        for suspect in report.culprits:
            edit = "with the tool returning nothing for" if suspect.action == "nothing" else "without"
            echo(f"  {suspect.verdict}: {edit} {suspect.source} ({suspect.text!r}) "
                 f"{suspect.changed} of {suspect.repeats} re-runs answered differently.")
        held = [s for s in report.tested if s.verdict == "holds"]
        if held:
            echo(f"  holds: with the other {len(held)} suspects removed (in groups or alone) the answer stayed the same.")
    echo(f"\nExplore it:  footprint show {result.run_id}   footprint why {result.run_id}   "
         f"footprint blame {result.run_id}")
    return demo

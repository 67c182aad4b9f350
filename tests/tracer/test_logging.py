"""footprint's structlog logging: recording events with ids, JSON or console, redacted."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from agent import Agent, tool
from agent.providers import ScriptedModel, calls
from tracer import Recorder, Store
from tracer.logs import LoggingListener, configure_logging, get_logger
from tracer.otel import spans_of

SECRET = "sk-live0123456789abcdefghijkl"


@pytest.fixture(autouse=True)
def _reset_structlog() -> Iterator[None]:
    yield
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()


@tool()
async def lookup(city: str) -> str:
    """Weather for a city.

    Args:
        city: the city
    """
    get_logger().info("tool.working", city=city)  # logged inside the run: carries the run's ids
    if city == "Atlantis":
        raise ValueError("no such city")
    return f"sunny in {city}"


async def _run(store: Store, listener: LoggingListener, *cities: str) -> str:
    model = ScriptedModel([calls(*((("lookup", {"city": c})) for c in cities)), "Done."])
    agent = Agent("weather", provider=model, tools=[lookup], recorder=Recorder(store, listeners=[listener]),
                  session_id="session-9")
    result = await agent.run(f"weather please, my key is {SECRET}")
    store.flush()
    return result.run_id


def _lines(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]


async def test_json_events_carry_run_stage_and_session_ids(tmp_path: Path) -> None:
    out = io.StringIO()
    configure_logging(json=True, level="debug", stream=out)
    with Store.open(tmp_path / "fp.duckdb") as store:
        run_id = await _run(store, LoggingListener(trace_ids=False), "Paris")
        data = store.load_run(run_id)
    events = _lines(out)
    names = [e["event"] for e in events]
    assert names[0] == "run.started" and names[-1] == "run.ended"
    closed = [e for e in events if e["event"] == "stage.closed"]
    assert sorted(e["stage_id"] for e in closed) == sorted(s.id for s in data.stages)
    for event in events:
        if event["event"] != "tool.working":
            assert event["run_id"] == run_id and event["session_id"] == "session-9"
        assert event["timestamp"] and event["level"]
        assert "trace_id" not in event
    inference = next(e for e in closed if e["stage_kind"] == "inference")
    assert inference["level"] == "info" and inference["model"] == "scripted" and inference["input_tokens"] > 0
    tool_event = next(e for e in closed if e["stage_kind"] == "tool")
    assert tool_event["tool"] == "lookup" and tool_event["is_error"] is False and "duration_ms" in tool_event
    assert next(e for e in closed if e["stage_kind"] == "input")["level"] == "debug"
    ended = events[-1]
    assert ended["status"] == "answered" and ended["tokens_in"] == data.run.tokens_in
    # the tool's own log line carries the run's ids through structlog's context variables
    working = next(e for e in events if e["event"] == "tool.working")
    assert working["run_id"] == run_id and working["session_id"] == "session-9" and working["agent"] == "weather"
    assert structlog.contextvars.get_contextvars() == {}  # unbound when the run ended
    assert SECRET not in out.getvalue()


async def test_trace_and_span_ids_match_the_exported_spans(tmp_path: Path) -> None:
    out = io.StringIO()
    configure_logging(json=True, stream=out)
    with Store.open(tmp_path / "fp.duckdb") as store:
        run_id = await _run(store, LoggingListener(trace_ids=True), "Paris")
        spans = spans_of([store.load_run(run_id)])
    by_stage = {s.attributes["footprint.stage.id"]: s for s in spans if not s.name.startswith("invoke_agent")}
    agent_span = next(s for s in spans if s.name.startswith("invoke_agent"))
    events = _lines(out)
    assert {e["trace_id"] for e in events if "trace_id" in e} == {f"{agent_span.context.trace_id:032x}"}
    for event in (e for e in events if e["event"] == "stage.closed"):
        span = by_stage.get(event["stage_id"], agent_span)  # stages without a span of their own: the run's
        assert event["span_id"] == f"{span.context.span_id:016x}"
    assert events[-1]["span_id"] == f"{agent_span.context.span_id:016x}"


async def test_a_failing_tool_is_a_warning(tmp_path: Path) -> None:
    out = io.StringIO()
    configure_logging(json=True, stream=out)
    with Store.open(tmp_path / "fp.duckdb") as store:
        await _run(store, LoggingListener(trace_ids=False), "Atlantis")
    failing = next(e for e in _lines(out) if e.get("stage_kind") == "tool")
    assert failing["level"] == "warning" and failing["is_error"] is True


def test_every_event_is_redacted() -> None:
    out = io.StringIO()
    configure_logging(json=True, stream=out)
    get_logger().info("calling", api_key="abc123", note=f"with {SECRET}", nested={"password": "hunter2"})
    (event,) = _lines(out)
    assert event["api_key"] == "[REDACTED]"
    assert event["note"] == "with [REDACTED]"
    assert event["nested"] == {"password": "[REDACTED]"}
    assert event["logger"] == "footprint"


def test_console_output_for_a_terminal_and_the_format_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    configure_logging(json=False, stream=out)
    get_logger().info("run.started", run_id="r-1")
    line = out.getvalue()
    assert "run.started" in line and "run_id=r-1" in line and not line.startswith("{")

    monkeypatch.setenv("FOOTPRINT_LOG_FORMAT", "console")
    out = io.StringIO()  # not a terminal, so JSON would be the guess; the variable says console
    configure_logging(stream=out)
    get_logger().warning("stage.closed")
    assert not out.getvalue().startswith("{")

    monkeypatch.delenv("FOOTPRINT_LOG_FORMAT")
    out = io.StringIO()
    configure_logging(stream=out, level="warning")
    get_logger().info("hidden")
    get_logger().warning("shown")
    (event,) = _lines(out)  # not a terminal: JSON; below the level: filtered
    assert event["event"] == "shown"


def test_an_unknown_level_is_named() -> None:
    with pytest.raises(ValueError, match="verbose"):
        configure_logging(level="verbose")

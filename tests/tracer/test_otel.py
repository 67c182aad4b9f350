"""OpenTelemetry export against real OTLP receivers on loopback (HTTP/protobuf and gRPC).

The receivers decode what the standard exporters send with opentelemetry-proto's
ExportTraceServiceRequest, so these tests check the wire result: span names, parent links, times,
gen_ai.* attributes, and that message content is absent unless opted in.
"""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import pytest
from click.testing import CliRunner
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from agent import Agent, ModelSettings, tool
from agent.errors import ProviderError
from agent.providers import ModelResponse, ScriptedModel, ToolCall, Usage
from explorer.cli import cli
from tracer import ContextItem, ExportError, Item, ItemKind, Origin, OriginKind, Recorder, StageKind, Store
from tracer.otel import OTelExporter, SpanBuilder, export_runs, otlp_span_exporter, resolve_protocol, spans_of

SECRET = "sk-live0123456789abcdefghijkl"
CONTENT_KEYS = {
    "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions", "gen_ai.tool.definitions",
    "gen_ai.tool.call.arguments", "gen_ai.tool.call.result",
}


# ---------------------------------------------------------------------------------------- receivers


@dataclass
class Span:
    """One received span, decoded."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    start: int
    end: int
    status: int
    status_message: str
    attributes: dict[str, Any]
    service: str


def _value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, which) if which else None


def _decode(request: trace_service_pb2.ExportTraceServiceRequest) -> list[Span]:
    out = []
    for rs in request.resource_spans:
        resource = {kv.key: _value(kv.value) for kv in rs.resource.attributes}
        for ss in rs.scope_spans:
            assert ss.scope.name == "footprint"
            for s in ss.spans:
                out.append(Span(
                    s.name, s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(), s.kind,
                    s.start_time_unix_nano, s.end_time_unix_nano, s.status.code, s.status.message,
                    {kv.key: _value(kv.value) for kv in s.attributes}, resource.get("service.name", ""),
                ))
    return out


class Receiver:
    """Spans received, across requests; ``paths`` are the URL paths the HTTP requests were sent to."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.paths: list[str] = []
        self.lock = threading.Lock()

    def add(self, request: trace_service_pb2.ExportTraceServiceRequest, path: str = "") -> None:
        with self.lock:
            self.spans.extend(_decode(request))
            self.paths.append(path)

    def named(self, prefix: str) -> list[Span]:
        return [s for s in self.spans if s.name.startswith(prefix)]


@pytest.fixture
def http_receiver() -> Iterator[tuple[str, Receiver]]:
    """A real OTLP/HTTP receiver on 127.0.0.1 (port 0); yields its base URL."""
    received = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
                self.send_response(404)
                self.end_headers()
                return
            request = trace_service_pb2.ExportTraceServiceRequest()
            request.ParseFromString(body)
            received.add(request, self.path)
            reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def grpc_receiver() -> Iterator[tuple[str, Receiver]]:
    """A real OTLP/gRPC receiver on 127.0.0.1 (port 0)."""
    received = Receiver()

    class Service(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:
            received.add(request)
            return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"http://127.0.0.1:{port}", received
    finally:
        server.stop(grace=None).wait()


# ---------------------------------------------------------------------------------------- the agent


@tool()
async def check_availability(date: str) -> dict[str, Any]:
    """Free slots on a day.

    Args:
        date: the day, e.g. tomorrow
    """
    return {"date": date, "free": ["10:00", "15:30"]}


def _script() -> ScriptedModel:
    return ScriptedModel([
        ModelResponse(
            "", (ToolCall("call_a", "check_availability", '{"date": "tomorrow"}'),
                 ToolCall("call_b", "check_availability", '{"date": "monday"}')),
            "tool_calls", Usage(120, 30, 100), "gpt-test-0613", "resp-1",
        ),
        ModelResponse("You're free at 10:00.", (), "stop", Usage(200, 12, 0), "gpt-test-0613", "resp-2"),
    ])


def _agent(recorder: Recorder, provider: Any = None) -> Agent:
    return Agent(
        "assistant", provider=provider or _script(), tools=[check_availability], recorder=recorder,
        session_id="session-1", model=ModelSettings("gpt-test", temperature=0.2, max_tokens=256, top_p=0.9),
        persona="You are a careful calendar assistant.",
    )


async def _record(store: Store, *listeners: Any, message: str = f"When am I free? my key is {SECRET}") -> str:
    recorder = Recorder(store, listeners=list(listeners))
    result = await _agent(recorder).run(message)
    assert result.status == "answered"
    store.flush()
    return result.run_id


def _check_run_spans(spans: list[Span], store: Store, run_id: str) -> None:
    """Names, parent links, recorded times, gen_ai attributes and usage-only-on-chat of one answered run."""
    data = store.load_run(run_id)
    assert sorted(s.name for s in spans) == [
        "chat gpt-test", "chat gpt-test", "execute_tool check_availability", "execute_tool check_availability",
        "invoke_agent assistant",
    ]
    (agent,) = [s for s in spans if s.name.startswith("invoke_agent")]
    assert agent.parent_id == "" and agent.kind == 1  # INTERNAL, the root of the run's trace
    assert {s.trace_id for s in spans} == {agent.trace_id}
    for s in spans:
        assert s.attributes["footprint.run.id"] == run_id
        assert s.attributes["footprint.stage.id"]
        assert s.attributes["gen_ai.conversation.id"] == "session-1"
        assert s.service == "footprint"
        if s is not agent:
            assert s.parent_id == agent.span_id
            stage = data.stage(s.attributes["footprint.stage.id"])
            assert (s.start, s.end) == (round(stage.started_at * 1e9), round(stage.ended_at * 1e9))
    assert (agent.start, agent.end) == (round(data.run.started_at * 1e9), round(data.run.ended_at * 1e9))
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.agent.name"] == "assistant"
    assert agent.attributes["footprint.run.status"] == "answered"

    chats = sorted((s for s in spans if s.name.startswith("chat")), key=lambda s: s.start)
    assert all(s.kind == 3 for s in chats)  # CLIENT
    first = chats[0].attributes
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.provider.name"] == "scripted"
    assert first["gen_ai.request.model"] == "gpt-test"
    assert first["gen_ai.request.temperature"] == 0.2
    assert first["gen_ai.request.max_tokens"] == 256
    assert first["gen_ai.request.top_p"] == 0.9
    assert first["gen_ai.response.model"] == "gpt-test-0613"
    assert first["gen_ai.response.id"] == "resp-1"
    assert first["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert first["gen_ai.usage.input_tokens"] == 120
    assert first["gen_ai.usage.output_tokens"] == 30
    assert first["gen_ai.usage.cache_read.input_tokens"] == 100
    assert chats[1].attributes["gen_ai.response.finish_reasons"] == ["stop"]
    # usage is on chat spans only, so summing any trace counts each token once
    assert sum(s.attributes.get("gen_ai.usage.input_tokens", 0) for s in spans) == data.run.tokens_in == 320
    assert not [k for s in spans if not s.name.startswith("chat") for k in s.attributes if k.startswith("gen_ai.usage")]

    tools = sorted((s for s in spans if s.name.startswith("execute_tool")), key=lambda s: s.attributes["gen_ai.tool.call.id"])
    assert [t.attributes["gen_ai.tool.call.id"] for t in tools] == ["call_a", "call_b"]
    for t in tools:
        assert t.attributes["gen_ai.operation.name"] == "execute_tool"
        assert t.attributes["gen_ai.tool.name"] == "check_availability"
        assert t.attributes["gen_ai.tool.description"] == "Free slots on a day."
        assert t.status == 0


def _content_keys(spans: list[Span]) -> set[str]:
    return {k for s in spans for k in s.attributes if k in CONTENT_KEYS}


# ---------------------------------------------------------------------------------------- live


async def test_live_export_over_http_sends_genai_spans_without_content(
    tmp_path: Path, http_receiver: tuple[str, Receiver]
) -> None:
    url, received = http_receiver
    exporter = OTelExporter(otlp_span_exporter(url), content=False)
    with Store.open(tmp_path / "fp.duckdb") as store:
        run_id = await _record(store, exporter)
        exporter.shutdown()
        _check_run_spans(received.spans, store, run_id)
    assert received.paths and set(received.paths) == {"/v1/traces"}  # the base URL got the traces path
    assert _content_keys(received.spans) == set()
    assert not any(SECRET in json.dumps(s.attributes) for s in received.spans)


async def test_live_export_with_content_follows_the_message_format_and_stays_redacted(
    tmp_path: Path, http_receiver: tuple[str, Receiver]
) -> None:
    url, received = http_receiver
    exporter = OTelExporter(otlp_span_exporter(url + "/v1/traces"), content=True)
    with Store.open(tmp_path / "fp.duckdb") as store:
        await _record(store, exporter)
        exporter.shutdown()
    spans = received.spans
    assert _content_keys(spans) == CONTENT_KEYS
    assert not any(SECRET in json.dumps(s.attributes) for s in spans)  # the recorder redacted it first
    second = max(received.named("chat"), key=lambda s: s.start).attributes
    messages = json.loads(second["gen_ai.input.messages"])
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool"]
    assert messages[0]["parts"] == [{"type": "text", "content": "When am I free? my key is [REDACTED]"}]
    assert messages[1]["parts"][0] == {
        "type": "tool_call", "id": "call_a", "name": "check_availability", "arguments": {"date": "tomorrow"},
    }
    assert messages[2]["parts"][0]["type"] == "tool_call_response"
    assert messages[2]["parts"][0]["id"] == "call_a"
    assert json.loads(messages[2]["parts"][0]["response"]) == {"date": "tomorrow", "free": ["10:00", "15:30"]}
    assert json.loads(second["gen_ai.output.messages"]) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "You're free at 10:00."}], "finish_reason": "stop"}
    ]
    instructions = json.loads(second["gen_ai.system_instructions"])
    assert instructions[0] == {"type": "text", "content": instructions[0]["content"]}
    assert "careful calendar assistant" in instructions[0]["content"]
    (definition,) = json.loads(second["gen_ai.tool.definitions"])
    assert definition["type"] == "function" and definition["name"] == "check_availability"
    assert definition["parameters"]["properties"]["date"]["type"] == "string"
    first = min(received.named("chat"), key=lambda s: s.start).attributes
    assert json.loads(first["gen_ai.output.messages"])[0]["finish_reason"] == "tool_call"
    tool_span = next(s for s in received.named("execute_tool") if s.attributes["gen_ai.tool.call.id"] == "call_b")
    assert json.loads(tool_span.attributes["gen_ai.tool.call.arguments"]) == {"date": "monday"}
    assert json.loads(tool_span.attributes["gen_ai.tool.call.result"])["date"] == "monday"
    agent = received.named("invoke_agent")[0].attributes
    assert json.loads(agent["gen_ai.output.messages"])[0]["parts"][0]["content"] == "You're free at 10:00."


# ---------------------------------------------------------------------------------------- after the fact


async def test_footprint_export_otlp_sends_stored_runs_like_the_live_exporter(
    tmp_path: Path, http_receiver: tuple[str, Receiver]
) -> None:
    url, received = http_receiver
    db = tmp_path / "fp.duckdb"
    with Store.open(db) as store:
        live: list[Any] = []
        run_id = await _record(store, SpanBuilder(live.append))
    result = CliRunner().invoke(cli, ["export", "otlp", run_id[:12], "--db", str(db), "--endpoint", url])
    assert result.exit_code == 0, result.output
    assert "exported 5 span(s) from 1 run(s)" in result.stdout
    with Store.open(db, read_only=True) as store:
        _check_run_spans(received.spans, store, run_id)
    assert _content_keys(received.spans) == set()
    # the same spans, the same ids, as when the run happened
    assert sorted((f"{s.context.span_id:016x}", s.name) for s in live) == sorted(
        (s.span_id, s.name) for s in received.spans
    )


async def test_export_with_content_flag_and_every_run_of_a_session(
    tmp_path: Path, http_receiver: tuple[str, Receiver]
) -> None:
    url, received = http_receiver
    db = tmp_path / "fp.duckdb"
    with Store.open(db) as store:
        first = await _record(store)
        second = await _record(store, message="and on monday?")
    result = CliRunner().invoke(
        cli, ["export", "otlp", "--session", "session-1", "--content", "--db", str(db), "--endpoint", url]
    )
    assert result.exit_code == 0, result.output
    assert {s.attributes["footprint.run.id"] for s in received.spans} == {first, second}
    assert len({s.trace_id for s in received.spans}) == 2  # one trace per run
    assert _content_keys(received.spans) == CONTENT_KEYS


async def test_export_over_grpc(tmp_path: Path, grpc_receiver: tuple[str, Receiver]) -> None:
    endpoint, received = grpc_receiver
    db = tmp_path / "fp.duckdb"
    with Store.open(db) as store:
        run_id = await _record(store)
    result = CliRunner().invoke(
        cli, ["export", "otlp", "last", "--protocol", "grpc", "--endpoint", endpoint, "--db", str(db)]
    )
    assert result.exit_code == 0, result.output
    with Store.open(db, read_only=True) as store:
        _check_run_spans(received.spans, store, run_id)


async def test_a_failed_run_marks_its_agent_and_chat_spans_as_errors(tmp_path: Path) -> None:
    with Store.open(tmp_path / "fp.duckdb") as store:
        failing = _agent(Recorder(store), ScriptedModel([ProviderError("upstream 503", provider="scripted")]))
        failed = await failing.run("hello")
        assert failed.status == "failed"
        store.flush()
        spans = spans_of([store.load_run(failed.run_id)])
    agent = next(s for s in spans if s.name.startswith("invoke_agent"))
    assert agent.status.status_code.name == "ERROR"
    assert agent.attributes["error.type"] == "provider_error"
    assert agent.attributes["footprint.run.status"] == "failed"
    chat = next(s for s in spans if s.name.startswith("chat"))
    assert chat.status.status_code.name == "ERROR"
    assert chat.attributes["error.type"] == "ProviderError"
    assert "gen_ai.usage.input_tokens" not in chat.attributes


def _paused_then_resumed(recorder: Recorder) -> str:
    """A run recorded through the recorder API: a tool asks a person, the run pauses, then resumes."""
    settings = Item(ItemKind.SETTINGS, {"model": "gpt-test"})
    run = recorder.start_run(agent="assistant", input="book a slot", session_id="session-2")
    with run.stage(StageKind.INPUT, "user message") as first:
        user = first.output(Item.of_text(ItemKind.USER, "book a slot"), origin_kind=OriginKind.USER)
    with run.stage(StageKind.INFERENCE, "turn 1", after=[first]) as inference:
        inference.inputs([user, ContextItem(settings, Origin(OriginKind.CONFIG, source="settings"))])
        call = inference.output(Item(ItemKind.TOOL_CALL, {"id": "call_q", "name": "ask", "arguments": "{}"}))
        inference.set(model="gpt-test", provider="scripted", finish_reason="tool_calls", input_tokens=10,
                      output_tokens=2, cached_tokens=0)
    batch = run.stage(StageKind.TOOL_BATCH, "1 tool call(s)", after=[inference])
    with run.stage(StageKind.TOOL, "ask", after=[batch], edge="fork", parent=batch) as asking:
        asking.inputs([call])
        asking.set(call_id="call_q", arguments="{}", paused=True)
    batch.close()
    with run.stage(StageKind.PAUSE, "awaiting a person", after=[asking]) as pause:
        pause.output(Item.of_text(ItemKind.TEXT, "Which day?"))
    run.end("awaiting", output="Which day?")
    later = recorder.continue_run(run.id, agent="assistant", session_id="session-2", next_seq=run.next_seq)
    with later.stage(StageKind.RESUME, "resume", after=[pause.id], edge="resume") as resume:
        resume.output(Item.of_text(ItemKind.USER, "monday"), origin_kind=OriginKind.USER)
    with later.stage(StageKind.INFERENCE, "turn 2", after=[resume]) as second:
        second.inputs([ContextItem(settings, Origin(OriginKind.CONFIG, source="settings"))])
        second.output(Item.of_text(ItemKind.ASSISTANT, "Booked for Monday."))
        second.set(model="gpt-test", provider="scripted", finish_reason="stop", input_tokens=20, output_tokens=4)
    with later.stage(StageKind.ANSWER, "answer", after=[second]) as answer:
        answer.output(Item.of_text(ItemKind.ASSISTANT, "Booked for Monday."))
    later.end("answered", output="Booked for Monday.", tokens_in=30, tokens_out=6)
    return run.id


def test_a_paused_run_is_two_agent_spans_in_one_trace_live_and_after_the_fact(tmp_path: Path) -> None:
    live: list[Any] = []
    with Store.open(tmp_path / "fp.duckdb") as store:
        run_id = _paused_then_resumed(Recorder(store, listeners=[SpanBuilder(live.append, content=True)]))
        store.flush()
        stored = spans_of([store.load_run(run_id)], content=True)
    for spans in (live, stored):
        segments = sorted((s for s in spans if s.name == "invoke_agent assistant"), key=lambda s: s.start_time)
        assert [s.attributes["footprint.run.status"] for s in segments] == ["awaiting", "answered"]
        assert segments[0].context.trace_id == segments[1].context.trace_id
        assert segments[0].context.span_id != segments[1].context.span_id
        assert segments[1].attributes["footprint.run.resumed"] is True
        assert json.loads(segments[1].attributes["gen_ai.input.messages"])[0]["parts"][0]["content"] == "monday"
        tool_span = next(s for s in spans if s.name == "execute_tool ask")
        assert tool_span.attributes["footprint.tool.paused"] is True
        assert tool_span.parent.span_id == segments[0].context.span_id
        second = next(s for s in spans if s.attributes.get("footprint.stage.seq") == 6 and s.name.startswith("chat"))
        assert second.parent.span_id == segments[1].context.span_id
    assert sorted((s.context.span_id, s.name, s.start_time, s.end_time) for s in live) == sorted(
        (s.context.span_id, s.name, s.start_time, s.end_time) for s in stored
    )


# ---------------------------------------------------------------------------------------- errors


def test_bad_protocol_and_endpoint_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ExportError, match="http/json"):
        resolve_protocol("http/json")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    assert resolve_protocol(None) == "grpc"
    with pytest.raises(ExportError, match="not an http"):
        otlp_span_exporter("localhost:4318", "http")


async def test_unreachable_collector_fails_with_a_clear_error(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    db = tmp_path / "fp.duckdb"
    with Store.open(db) as store:
        run_id = await _record(store)
        with pytest.raises(ExportError, match="did not accept"):
            export_runs([store.load_run(run_id)], otlp_span_exporter(f"http://127.0.0.1:{port}", timeout=0.5))
    result = CliRunner().invoke(cli, ["export", "otlp", "--db", str(db)])
    assert result.exit_code == 2 and "name the runs to export" in result.output
    for both in (["last", "--session", "nobody"], ["last", "--all"], ["--session", "nobody", "--all"]):
        # one of them was used and the other dropped without a word (a session of no runs, too)
        result = CliRunner().invoke(cli, ["export", "otlp", "--db", str(db), *both])
        assert result.exit_code == 2 and "one of" in result.output, both


@pytest.mark.parametrize("protocol", ["http", "grpc"])
async def test_an_unreachable_collector_fails_at_once_in_one_line(
    tmp_path: Path, protocol: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    from explorer.cli import main

    with socket.socket() as sock:  # a port nothing listens on: bound, never listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        db = tmp_path / "fp.duckdb"
        with Store.open(db) as store:
            await _record(store)
        capsys.readouterr()
        with pytest.raises(SystemExit) as exited:
            main(["export", "otlp", "last", "--protocol", protocol, "--db", str(db),
                  "--endpoint", f"http://127.0.0.1:{port}"])
    assert exited.value.code == 1
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert out == ""
    assert lines == [f"footprint: error: cannot reach the OTLP collector at 127.0.0.1:{port} (Connection refused): "
                     "start it, or pass --endpoint (or set OTEL_EXPORTER_OTLP_ENDPOINT)"]


async def test_a_collector_that_refuses_the_spans_is_quoted_in_the_error(
    tmp_path: Path, http_receiver: tuple[str, Receiver], capsys: pytest.CaptureFixture[str]
) -> None:
    """A collector that answers (here 404: the wrong path) is not 'not running': the error says what it
    answered, as the exporter logged it (those logs stay off the terminal otherwise)."""
    from explorer.cli import main

    url, received = http_receiver
    db = tmp_path / "fp.duckdb"
    with Store.open(db) as store:
        await _record(store)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(["export", "otlp", "last", "--db", str(db), "--endpoint", f"{url}/not/traces", "--timeout", "2"])
    assert exited.value.code == 1 and received.spans == []
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("footprint: error:")]
    assert len(lines) == 1 and "did not accept" in lines[0] and "code: 404" in lines[0], lines


def test_export_all_of_an_empty_store_says_so_without_a_collector(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on: reaching for it would fail the export
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        db = tmp_path / "fp.duckdb"
        Store.open(db).close()
        result = CliRunner().invoke(cli, ["export", "otlp", "--all", "--db", str(db),
                                          "--endpoint", f"http://127.0.0.1:{port}"])
    assert (result.exit_code, result.output) == (0, f"no runs to export in {db}\n")

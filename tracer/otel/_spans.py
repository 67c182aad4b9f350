"""Building OpenTelemetry spans from recording events, the same way live and after the fact.

One :class:`SpanBuilder` (a recording listener) turns a run's events into spans:

    invoke_agent {agent}      one per run (per segment of a paused run), the root of the run's spans
    ├── chat {model}          one per inference stage (usage is reported here only)
    ├── execute_tool {tool}   one per tool stage
    │   └── subagent {agent}  a hand-over to another agent from inside a tool call (agent_tool)
    └── subagent {agent}      a hand-over to another agent (a team routing its message)
        └── invoke_agent {agent}   the child run, when it is exported with its parent


Span and trace ids are derived from the recorded ids (trace id from the run id — the root run's,
for a child run exported with its parent, see :mod:`._lineage` — span id from the stage id), so the live exporter and ``footprint export otlp`` produce the same spans, re-exporting a
run is idempotent in any backend that keys spans by id, and a log line can name its span without an
OpenTelemetry context. Every span carries ``footprint.run.id`` and ``footprint.stage.id`` so a trace
seen in any tool leads back to the store.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from .._listeners import RecordedStage, RecordingListener
from .._records import CHILD_RUN, ItemKind, Run, RunStatus, StageKind, StageStatus
from . import _genai as g
from ._lineage import PARENT_RUN_ID, PARENT_STAGE_ID, Lineage, Placement, handed_over_by

RUN_ID = "footprint.run.id"
STAGE_ID = "footprint.stage.id"
STAGE_SEQ = "footprint.stage.seq"
SESSION_ID = "footprint.session.id"
RUN_STATUS = "footprint.run.status"
LABELS = "footprint.run.labels"
RESUMED = "footprint.run.resumed"
TOOL_PAUSED = "footprint.tool.paused"
STAGE_KIND = "footprint.stage.kind"
CHILD_RUN_ID = "footprint.child.run.id"
CHILD_STATUS = "footprint.child.status"
CHILD_AGENT = "footprint.child.agent"
SUBAGENT = "subagent"

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


def trace_id_of(run_id: str) -> int:
    """The trace id of a run's spans (a 128-bit hash of the run id)."""
    value = int.from_bytes(hashlib.blake2b(run_id.encode(), digest_size=16, person=b"fp.trace").digest(), "big")
    return value or 1


def span_id_of(key: str) -> int:
    """The span id for a stage id (or for ``run:{run id}:{first seq}``, the agent span of a segment)."""
    value = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8, person=b"fp.span").digest(), "big")
    return value or 1


def agent_span_key(run_id: str, first_seq: int) -> str:
    """The key whose :func:`span_id_of` is the ``invoke_agent`` span of a run segment."""
    return f"run:{run_id}:{first_seq}"


def trace_id_hex(run_id: str) -> str:
    """A run's trace id as the usual 32 hex digits (what tracing backends show)."""
    return f"{trace_id_of(run_id):032x}"


def span_id_hex(key: str) -> str:
    """A stage's span id (see :func:`span_id_of`) as 16 hex digits."""
    return f"{span_id_of(key):016x}"


def default_resource() -> Resource:
    """The standard resource (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``), named ``footprint`` by default."""
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "footprint"}))
    return resource


def _version() -> str | None:
    try:
        return metadata.version("footprint")
    except metadata.PackageNotFoundError:
        return None


SCOPE = InstrumentationScope("footprint", _version())


@dataclass
class _Segment:
    run: Run
    first_seq: int
    resumed: bool
    placement: Placement
    first_stage: str | None = None
    first_stage_seq: int | None = None
    first_started: float | None = None
    last_ended: float | None = None
    provider: str | None = None
    request_model: str | None = None
    user_text: str | None = None
    outcome: list[tuple[str, str]] = field(default_factory=list)  # (stage kind, text)
    error_reason: str | None = None
    tools: dict[str, str] = field(default_factory=dict)  # tool name -> description


def _clean(attributes: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        if isinstance(value, list | tuple):
            value = [str(v) for v in value if v is not None]
        elif not isinstance(value, str | bool | int | float):
            value = str(value)
        out[key] = value
    return out


def _ns(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * 1e9)


class SpanBuilder(RecordingListener):
    """A recording listener that hands one finished span to ``emit`` per agent segment, inference and tool.

    ``content`` adds the opt-in message content (instructions, messages, tool definitions, tool
    arguments and results) as JSON; without it no content leaves the process.
    """

    def __init__(
        self, emit: Callable[[ReadableSpan], None], *, content: bool = False, resource: Resource | None = None
    ) -> None:
        self.emit = emit
        self.content = content
        self.resource = resource if resource is not None else default_resource()
        self._segments: dict[str, _Segment] = {}
        self._lineage = Lineage()
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ listener callbacks

    def run_started(self, run: Run, *, resumed: bool = False, first_seq: int = 0) -> None:
        """Remember the run until it ends (its agent span is emitted then)."""
        with self._lock:
            self._segments[run.id] = _Segment(run, first_seq, resumed, self._lineage.place(run))

    def trace_id_of_run(self, run_id: str) -> int | None:
        """The trace id this builder gave ``run_id``'s spans (a child's is its root's), None if not seen."""
        with self._lock:
            placed = self._lineage.get(run_id)
        return None if placed is None else placed.trace_id

    def stage_closed(self, recorded: RecordedStage) -> None:
        """Emit the stage's span (inference and tool stages) and note what the agent span needs."""
        stage = recorded.stage
        with self._lock:
            segment = self._segments.get(stage.run_id)
        if segment is None:  # a listener added mid-run: the stages still get spans
            run = Run(stage.run_id, None, "", RunStatus.RUNNING.value, "", None, None, stage.started_at)
            with self._lock:
                segment = _Segment(run, 0, False, self._lineage.place(run))
                self._segments[stage.run_id] = segment
        if segment.first_stage_seq is None or stage.seq < segment.first_stage_seq:
            segment.first_stage, segment.first_stage_seq = stage.id, stage.seq
        if segment.first_started is None or stage.started_at < segment.first_started:
            segment.first_started = stage.started_at
        if stage.ended_at is not None and (segment.last_ended is None or stage.ended_at > segment.last_ended):
            segment.last_ended = stage.ended_at
        outputs = recorded.output_items()
        if stage.kind == StageKind.INFERENCE:
            self._chat(segment, recorded)
        elif stage.kind == StageKind.TOOL:
            self._tool(segment, recorded)
        elif stage.kind == StageKind.SUBAGENT:
            self._subagent(segment, recorded)
        elif stage.kind in (StageKind.INPUT, StageKind.RESUME):
            segment.user_text = next((i.text for i in outputs if i.kind == ItemKind.USER), segment.user_text)
        elif stage.kind in (StageKind.ANSWER, StageKind.PAUSE, StageKind.ERROR):
            segment.outcome.extend((str(stage.kind), i.text) for i in outputs)
            if stage.kind == StageKind.ERROR:
                segment.error_reason = str(stage.attributes.get("reason") or stage.name)

    def run_ended(self, run: Run) -> None:
        """Emit the run's ``invoke_agent`` span."""
        with self._lock:
            segment = self._segments.pop(run.id, None)
            if segment is None:
                segment = _Segment(run, 0, False, self._lineage.place(run))
        self._agent(segment, run)

    # ------------------------------------------------------------------ spans

    def _span(
        self, name: str, segment: _Segment, key: str, parent: str | SpanContext | None, kind: SpanKind,
        start: float, end: float | None, attributes: dict[str, Any], status: Status, links: tuple[Link, ...] = (),
    ) -> None:
        """Emit one span in the segment's trace; ``parent`` is the key of a span of this run, or a context."""
        trace_id = segment.placement.trace_id
        context = SpanContext(trace_id, span_id_of(key), is_remote=False, trace_flags=_SAMPLED)
        if isinstance(parent, str):
            parent = SpanContext(trace_id, span_id_of(parent), is_remote=False, trace_flags=_SAMPLED)
        start_ns = _ns(start)
        end_ns = _ns(end if end is not None else start)
        self.emit(ReadableSpan(
            name, context=context, parent=parent, resource=self.resource, attributes=_clean(attributes),
            kind=kind, status=status, start_time=start_ns, end_time=end_ns, instrumentation_scope=SCOPE,
            links=links,
        ))

    def _common(self, segment: _Segment, stage_id: str, seq: int) -> dict[str, Any]:
        run = segment.run
        return {
            RUN_ID: run.id, STAGE_ID: stage_id, STAGE_SEQ: seq, SESSION_ID: run.session_id,
            g.CONVERSATION_ID: run.session_id,
        }

    def _chat(self, segment: _Segment, recorded: RecordedStage) -> None:
        stage, attrs = recorded.stage, recorded.stage.attributes
        sent = [item for _, item in recorded.snapshot()]
        settings = g.settings_of(sent)
        # what was asked: the settings' model, else (a chain of backends of different models) the
        # model the answering attempt asked for, else the model that answered
        attempts = attrs.get("attempts")
        asked = attempts[-1].get("model") if isinstance(attempts, list) and attempts and isinstance(
            attempts[-1], dict) else None
        request_model = str(settings.get("model") or asked or attrs.get("model") or "") or None
        provider = str(attrs.get("provider") or "") or None
        segment.provider = segment.provider or provider
        segment.request_model = segment.request_model or request_model
        for item in sent:
            if item.kind == ItemKind.TOOL_DEFINITION:
                segment.tools[str(item.body.get("name", ""))] = str(item.body.get("description", ""))
        attributes: dict[str, Any] = {
            g.OPERATION_NAME: g.CHAT, g.PROVIDER_NAME: provider, g.REQUEST_MODEL: request_model,
            g.RESPONSE_MODEL: attrs.get("model"), g.RESPONSE_ID: attrs.get("response_id"),
            g.RESPONSE_FINISH_REASONS: [attrs["finish_reason"]] if attrs.get("finish_reason") else None,
            g.USAGE_INPUT_TOKENS: attrs.get("input_tokens"), g.USAGE_OUTPUT_TOKENS: attrs.get("output_tokens"),
            g.USAGE_CACHE_READ_INPUT_TOKENS: attrs.get("cached_tokens"),
            **self._common(segment, stage.id, stage.seq),
        }
        for key, name in g.SETTINGS_ATTRIBUTES.items():
            attributes[name] = settings.get(key)
        status = Status(StatusCode.UNSET)
        if stage.status in (StageStatus.ERROR, StageStatus.CANCELLED):
            attributes[g.ERROR_TYPE] = g.error_type(stage.error, str(stage.status))
            status = Status(StatusCode.ERROR, stage.error or str(stage.status))
        if self.content:
            attributes[g.SYSTEM_INSTRUCTIONS] = g.to_json(g.system_instructions(sent))
            attributes[g.INPUT_MESSAGES] = g.to_json(g.input_messages(sent))
            attributes[g.TOOL_DEFINITIONS] = g.to_json(g.tool_definitions(sent))
            if stage.status == StageStatus.OK:
                attributes[g.OUTPUT_MESSAGES] = g.to_json(
                    g.output_messages(recorded.output_items(), attrs.get("finish_reason")))
        name = f"{g.CHAT} {request_model}" if request_model else g.CHAT
        self._span(name, segment, stage.id, agent_span_key(stage.run_id, segment.first_seq), SpanKind.CLIENT,
                   stage.started_at, stage.ended_at, attributes, status)

    def _tool(self, segment: _Segment, recorded: RecordedStage) -> None:
        stage, attrs = recorded.stage, recorded.stage.attributes
        attributes: dict[str, Any] = {
            g.OPERATION_NAME: g.EXECUTE_TOOL, g.TOOL_NAME: stage.name, g.TOOL_CALL_ID: attrs.get("call_id"),
            g.TOOL_TYPE: "function", g.TOOL_DESCRIPTION: segment.tools.get(stage.name) or None,
            **self._common(segment, stage.id, stage.seq),
        }
        if attrs.get("paused"):
            attributes[TOOL_PAUSED] = True
        status = Status(StatusCode.UNSET)
        if attrs.get("is_error") or stage.status in (StageStatus.ERROR, StageStatus.CANCELLED):
            attributes[g.ERROR_TYPE] = str(attrs.get("error_type") or g.error_type(stage.error, "tool_error"))
            result = next((i.text for i in recorded.output_items()), None)
            status = Status(StatusCode.ERROR, stage.error or result or "the tool call failed")
        if self.content:
            attributes[g.TOOL_CALL_ARGUMENTS] = attrs.get("arguments")
            results = [i for i in recorded.output_items() if i.kind == ItemKind.TOOL_RESULT]
            if results:
                content = results[0].body.get("content", "")
                attributes[g.TOOL_CALL_RESULT] = content if isinstance(content, str) else g.to_json(content)
        self._span(f"{g.EXECUTE_TOOL} {stage.name}", segment, stage.id,
                   agent_span_key(stage.run_id, segment.first_seq), SpanKind.INTERNAL, stage.started_at,
                   stage.ended_at, attributes, status)

    def _subagent(self, segment: _Segment, recorded: RecordedStage) -> None:
        # the hand-over itself, not a GenAI operation: the child's own ``invoke_agent`` span (under
        # this one when exported together) is the agent invocation the conventions describe
        stage, attrs = recorded.stage, recorded.stage.attributes
        agent = str(attrs.get("agent") or stage.name)
        attributes: dict[str, Any] = {
            STAGE_KIND: SUBAGENT, CHILD_AGENT: agent, CHILD_RUN_ID: attrs.get(CHILD_RUN),
            CHILD_STATUS: attrs.get("child_status"), **self._common(segment, stage.id, stage.seq),
        }
        status = Status(StatusCode.UNSET)
        if stage.status in (StageStatus.ERROR, StageStatus.CANCELLED):
            attributes[g.ERROR_TYPE] = g.error_type(stage.error, str(stage.status))
            status = Status(StatusCode.ERROR, stage.error or str(stage.status))
        # inside a tool call (an agent used as a tool) it hangs under that call's span
        parent = stage.parent_id or agent_span_key(stage.run_id, segment.first_seq)
        self._span(f"{SUBAGENT} {agent}", segment, stage.id, parent, SpanKind.INTERNAL, stage.started_at,
                   stage.ended_at, attributes, status)

    def _agent(self, segment: _Segment, run: Run) -> None:
        attributes: dict[str, Any] = {
            g.OPERATION_NAME: g.INVOKE_AGENT, g.AGENT_NAME: run.agent, g.PROVIDER_NAME: segment.provider,
            g.REQUEST_MODEL: segment.request_model or run.model, g.CONVERSATION_ID: run.session_id,
            RUN_ID: run.id, STAGE_ID: segment.first_stage, STAGE_SEQ: segment.first_stage_seq,
            SESSION_ID: run.session_id, RUN_STATUS: run.status, LABELS: list(run.labels) or None,
            RESUMED: True if segment.resumed else None,
        }
        handed = handed_over_by(segment.run) or handed_over_by(run)
        if handed is not None:
            attributes[PARENT_RUN_ID], attributes[PARENT_STAGE_ID] = handed
        status = Status(StatusCode.UNSET)
        if run.status in (RunStatus.FAILED, RunStatus.CANCELLED):
            fallback = "cancelled" if run.status == RunStatus.CANCELLED else "_OTHER"
            attributes[g.ERROR_TYPE] = segment.error_reason or fallback
            status = Status(StatusCode.ERROR, run.error or run.status)
        if self.content:
            if segment.user_text is not None:
                attributes[g.INPUT_MESSAGES] = g.to_json([{"role": "user", "parts": [g.text_part(segment.user_text)]}])
            if segment.outcome:
                kind, text = segment.outcome[-1]
                reason = {"answer": "stop", "pause": "stop", "error": "error"}.get(kind, "stop")
                attributes[g.OUTPUT_MESSAGES] = g.to_json(
                    [{"role": "assistant", "parts": [g.text_part(text)], "finish_reason": reason}])
        # the store keeps one start and one end per run: a resumed segment begins with its resume
        # stage and a paused one ends with its last stage, so live and stored spans agree
        start, end = segment.run.started_at, run.ended_at
        if segment.resumed and segment.first_started is not None:
            start = segment.first_started
        if run.status == RunStatus.AWAITING and segment.last_ended is not None:
            end = segment.last_ended
        self._span(f"{g.INVOKE_AGENT} {run.agent}" if run.agent else g.INVOKE_AGENT, segment,
                   agent_span_key(run.id, segment.first_seq), segment.placement.parent, SpanKind.INTERNAL, start,
                   end, attributes, status, segment.placement.links)

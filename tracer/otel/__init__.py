"""OpenTelemetry export of recorded runs, after the GenAI semantic conventions.

Spans: ``invoke_agent {agent}`` per run, ``chat {model}`` per inference (with usage),
``execute_tool {tool}`` per tool call, ``subagent {agent}`` per hand-over to another agent (a child
run joins its parent's trace under it, or links to it: see :mod:`._lineage`); message content only
when opted in. Live through
:class:`OTelExporter` (a recording listener), after the fact through :func:`export_runs` or
``footprint export otlp``. Both produce the same spans with the same ids (see :mod:`._spans`).
"""

from ._exporter import (
    CONTENT_ENV,
    OTelExporter,
    active,
    content_from_env,
    export_runs,
    exporter_from_env,
    otlp_span_exporter,
    resolve_protocol,
    spans_of,
)
from ._lineage import Lineage
from ._spans import (
    SpanBuilder,
    agent_span_key,
    default_resource,
    span_id_hex,
    span_id_of,
    trace_id_hex,
    trace_id_of,
)

__all__ = [
    "CONTENT_ENV",
    "Lineage",
    "OTelExporter",
    "SpanBuilder",
    "active",
    "agent_span_key",
    "content_from_env",
    "default_resource",
    "export_runs",
    "exporter_from_env",
    "otlp_span_exporter",
    "resolve_protocol",
    "span_id_hex",
    "span_id_of",
    "spans_of",
    "trace_id_hex",
    "trace_id_of",
]

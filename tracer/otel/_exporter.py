"""Sending runs to an OpenTelemetry backend: live while the agent runs, or later from the store.

Live::

    exporter = OTelExporter()                         # OTLP, configured by the OTEL_* variables
    recorder = Recorder(store, listeners=[exporter])
    ...
    exporter.shutdown()                               # flushes what is still queued

After the fact (what ``footprint export otlp`` does)::

    export_runs([store.load_run(run_id)], otlp_span_exporter("http://localhost:4318"))
"""

from __future__ import annotations

import logging
import os
import socket
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

from opentelemetry import trace as otel_trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from .._listeners import RecordedStage, RecordingListener, feed_listener
from .._records import Run
from .._redaction import RedactionPolicy
from .._render import one_line
from .._rundata import RunData
from ..errors import ExportError
from ._lineage import parents_first
from ._spans import SpanBuilder

CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
PROTOCOLS = ("http", "grpc")

_live: weakref.WeakSet[OTelExporter] = weakref.WeakSet()


def active() -> bool:
    """True when OpenTelemetry export is on in this process: a live :class:`OTelExporter` that was
    not shut down, or an SDK tracer provider installed as the global one."""
    return bool(_live) or isinstance(otel_trace.get_tracer_provider(), TracerProvider)


def content_from_env() -> bool:
    """True when ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` opts in to message content."""
    return os.environ.get(CONTENT_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def resolve_protocol(protocol: str | None) -> str:
    """The OTLP transport to use, ``http`` or ``grpc``: the argument, else the standard variables, else http."""
    value = (
        protocol
        or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip().lower()
    if value in ("http", "http/protobuf"):
        return "http"
    if value == "grpc":
        return "grpc"
    raise ExportError(
        f"OTLP protocol {value!r} is not supported: use http (http/protobuf) or grpc"
    )


def _http_endpoint(endpoint: str) -> str:
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ExportError(f"OTLP endpoint {endpoint!r} is not an http(s) URL, e.g. http://localhost:4318")
    if parts.path in ("", "/"):  # a collector's base URL: traces go to its /v1/traces path
        parts = parts._replace(path="/v1/traces")
    return urlunsplit(parts)


def collector_address(endpoint: str | None, protocol: str) -> tuple[str, int]:
    """The host and port an OTLP exporter would connect to: ``endpoint``, else the OTEL_* variables, else the default."""
    if endpoint is None:
        names = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
        endpoint = next((os.environ[n] for n in names if os.environ.get(n)), None)
    default_port = 4318 if protocol == "http" else 4317
    if not endpoint:
        return "localhost", default_port
    parts = urlsplit(endpoint if "://" in endpoint else f"//{endpoint}")
    try:
        port = parts.port
    except ValueError as exc:
        raise ExportError(f"OTLP endpoint {endpoint!r} has no valid port: {exc}") from exc
    if not parts.hostname:
        raise ExportError(f"OTLP endpoint {endpoint!r} names no host, e.g. http://localhost:{default_port}")
    return parts.hostname, port or (443 if parts.scheme == "https" else 80 if parts.scheme == "http" else default_port)


def check_collector_reachable(endpoint: str | None, protocol: str, *, timeout: float = 1.0) -> None:
    """Fail at once, in one line, when nothing listens at the collector's address.

    The OTLP exporters retry a refused connection with growing pauses for as long as their
    timeout allows (~10 s, a warning per try); a dead collector is better told in a second.
    """
    host, port = collector_address(endpoint, protocol)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        if isinstance(exc, TimeoutError | socket.timeout):
            reason = f"no answer within {timeout:g} s"
        raise ExportError(
            f"cannot reach the OTLP collector at {host}:{port} ({reason}): start it, or pass --endpoint "
            f"(or set OTEL_EXPORTER_OTLP_ENDPOINT)"
        ) from exc


_MASK = RedactionPolicy()  # a collector's reason may quote what it was sent, a header or a key


class _Said(logging.Handler):
    """Keeps what the OTLP exporters log (a refusing collector's status and reason), masked, one line each."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # a bad format string in a library's log call: nothing to keep
            return
        self.lines.append(one_line(_MASK.text(text), 300))


@contextmanager
def quiet_exporter_logs() -> Iterator[list[str]]:
    """Keep the OTLP exporters' per-retry warnings off the terminal; the caller reports the outcome
    once. Yields the list of what they said (masked, one line each), so that report can name the
    collector's answer (``code: 500, reason: ...``) instead of guessing."""
    logger = logging.getLogger("opentelemetry.exporter.otlp")
    before, propagate = logger.level, logger.propagate
    said = _Said()
    logger.setLevel(logging.WARNING)
    logger.propagate = False
    logger.addHandler(said)
    try:
        yield said.lines
    finally:
        logger.removeHandler(said)
        logger.setLevel(before)
        logger.propagate = propagate


def otlp_span_exporter(
    endpoint: str | None = None,
    protocol: str | None = None,
    *,
    headers: dict[str, str] | None = None,
    timeout: float | None = None,
) -> SpanExporter:
    """The standard OTLP span exporter over HTTP (protobuf) or gRPC.

    Without arguments everything comes from the standard ``OTEL_EXPORTER_OTLP_*`` variables
    (endpoint, protocol, headers, timeout, certificates). An HTTP ``endpoint`` given as a base URL
    (``http://localhost:4318``) gets the ``/v1/traces`` path; a full URL is used as it is.
    """
    kind = resolve_protocol(protocol)
    if kind == "http":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        return HttpExporter(endpoint=_http_endpoint(endpoint) if endpoint else None, headers=headers, timeout=timeout)
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

    if endpoint is not None and "://" in endpoint and urlsplit(endpoint).scheme not in ("http", "https"):
        raise ExportError(f"OTLP gRPC endpoint {endpoint!r} must look like http://localhost:4317")
    return GrpcExporter(endpoint=endpoint, headers=headers, timeout=timeout)


class OTelExporter(RecordingListener):
    """Live export: a recording listener that sends each run's spans as the run happens.

    Pass it in ``Recorder(store, listeners=[...])``. Spans go through a span processor (by default
    a ``BatchSpanProcessor`` over ``exporter``, itself by default the OTLP exporter configured by
    the ``OTEL_*`` variables), so the agent never waits for the network. ``content`` opts in to
    message content (default: ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``). Call
    :meth:`shutdown` (or :meth:`force_flush`) before the process exits.
    """

    def __init__(
        self,
        exporter: SpanExporter | None = None,
        *,
        content: bool | None = None,
        processor: SpanProcessor | None = None,
        resource: Resource | None = None,
        endpoint: str | None = None,
        protocol: str | None = None,
    ) -> None:
        if processor is None:
            processor = BatchSpanProcessor(exporter or otlp_span_exporter(endpoint, protocol))
        self.processor = processor
        self.content = content_from_env() if content is None else content
        self._builder = SpanBuilder(processor.on_end, content=self.content, resource=resource)
        _live.add(self)

    def run_started(self, run: Run, *, resumed: bool = False, first_seq: int = 0) -> None:
        """See :class:`~tracer.RecordingListener`."""
        self._builder.run_started(run, resumed=resumed, first_seq=first_seq)

    def stage_closed(self, recorded: RecordedStage) -> None:
        """See :class:`~tracer.RecordingListener`."""
        self._builder.stage_closed(recorded)

    def run_ended(self, run: Run) -> None:
        """See :class:`~tracer.RecordingListener`."""
        self._builder.run_ended(run)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Send everything queued; False when it did not finish in time."""
        return bool(self.processor.force_flush(timeout_millis))

    def shutdown(self) -> None:
        """Flush and stop the processor (and its exporter)."""
        _live.discard(self)
        self.processor.shutdown()


def exporter_from_env() -> OTelExporter | None:
    """A live :class:`OTelExporter` when the standard variables name a collector, else None.

    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT`` switch it on (and
    ``OTEL_SDK_DISABLED=true`` off), so a host or a script can offer tracing with no code:
    ``Recorder(store, listeners=[e for e in [exporter_from_env()] if e])``.
    """
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if not (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")):
        return None
    return OTelExporter()


def spans_of(runs: Iterable[RunData], *, content: bool = False, resource: Resource | None = None) -> list[ReadableSpan]:
    """The spans of stored runs, exactly as the live exporter produced (or would have produced) them.

    A child run given with its parent joins the parent's trace (see :mod:`._lineage`), whatever the
    order of ``runs``.
    """
    spans: list[ReadableSpan] = []
    builder = SpanBuilder(spans.append, content=content, resource=resource)
    for data in parents_first(runs):
        feed_listener(data, builder)
    return spans


def export_runs(
    runs: Iterable[RunData],
    exporter: SpanExporter,
    *,
    content: bool = False,
    resource: Resource | None = None,
    batch_size: int = 512,
) -> int:
    """Export stored runs' spans through ``exporter`` (after the fact); returns how many were sent.

    Spans keep their recorded start and end times. A child run sent with its parent joins the
    parent's trace under the hand-over span; sent without it, it links to that span. Raises :class:`~tracer.ExportError` when the
    exporter reports a failure (an unreachable or refusing collector).
    """
    builder_spans: list[ReadableSpan] = []
    builder = SpanBuilder(builder_spans.append, content=content, resource=resource)
    sent = 0

    def send(batch: list[ReadableSpan]) -> None:
        nonlocal sent
        if batch:
            result = exporter.export(batch)
            if result is not SpanExportResult.SUCCESS:
                raise ExportError(
                    f"the span exporter did not accept {len(batch)} span(s) "
                    f"({sent} sent before); is the collector running and the endpoint right?"
                )
            sent += len(batch)

    for data in parents_first(runs):
        feed_listener(data, builder)
        while len(builder_spans) >= batch_size:
            send(builder_spans[:batch_size])
            del builder_spans[:batch_size]
    send(builder_spans)
    return sent

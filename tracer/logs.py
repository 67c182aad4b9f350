"""footprint's logs, through structlog: recording events with run, stage, session (and trace) ids.

    configure_logging()                           # JSON when stderr is not a terminal, console when it is
    recorder = Recorder(store, listeners=[LoggingListener()])

:class:`LoggingListener` is a recording listener (the same mechanism as the OpenTelemetry
exporter): it logs ``run.started``, ``stage.closed`` and ``run.ended`` with ``run_id``, ``stage_id``
and ``session_id``, and — when OpenTelemetry export is on — ``trace_id`` and ``span_id`` equal to
the exported spans' ids, so a log line links to its trace. While a run goes on, its ``run_id``,
``session_id`` and ``agent`` are bound in structlog's context variables, so anything logged inside
the run's task (a tool, a hook) carries them too.

Values come from the recorder already redacted; :func:`configure_logging` also applies the
redaction policy to every event, so a secret passed to a log call is masked as well.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog
from opentelemetry import trace as otel_trace

from ._listeners import RecordedStage, RecordingListener
from ._records import Run, RunStatus, StageKind, StageStatus
from ._redaction import RedactionPolicy
from .otel import Lineage, agent_span_key, span_id_hex, trace_id_of
from .otel import active as otel_active

LOGGER_NAME = "footprint"
FORMAT_ENV = "FOOTPRINT_LOG_FORMAT"

EventDict = MutableMapping[str, Any]

_CONTEXT_KEYS = ("run_id", "session_id", "agent")
_UNREDACTED = frozenset({"timestamp", "level", "logger", "run_id", "stage_id", "session_id", "trace_id", "span_id"})


def add_otel_context(logger: Any, method: str, event: EventDict) -> EventDict:
    """A structlog processor: the current OpenTelemetry span's trace and span ids, when one is active."""
    if "trace_id" not in event:
        context = otel_trace.get_current_span().get_span_context()
        if context.is_valid:
            event["trace_id"] = f"{context.trace_id:032x}"
            event["span_id"] = f"{context.span_id:016x}"
    return event


class Redact:
    """A structlog processor applying a :class:`~tracer.RedactionPolicy` to every event value."""

    def __init__(self, policy: RedactionPolicy | None = None) -> None:
        self.policy = policy if policy is not None else RedactionPolicy()

    def __call__(self, logger: Any, method: str, event: EventDict) -> EventDict:
        """Mask sensitive keys and matching text in the event."""
        masked = self.policy.value({k: v for k, v in event.items() if k not in _UNREDACTED})
        event.update(masked)
        return event


def _wants_json(json: bool | None, stream: TextIO) -> bool:
    if json is not None:
        return json
    chosen = os.environ.get(FORMAT_ENV, "").strip().lower()
    if chosen in ("json", "console"):
        return chosen == "json"
    isatty = getattr(stream, "isatty", None)
    return not (isatty is not None and isatty())


def configure_logging(
    json: bool | None = None,
    level: int | str = "INFO",
    *,
    stream: TextIO | None = None,
    redaction: RedactionPolicy | None = None,
) -> None:
    """Configure structlog for footprint: JSON lines for machines, a readable console for a terminal.

    ``json=None`` picks JSON unless ``stream`` (default stderr) is a terminal; ``FOOTPRINT_LOG_FORMAT``
    (``json`` or ``console``) overrides that guess. Every event gets a timestamp, its level, the
    context variables bound for the current run, the current OpenTelemetry span ids, and the
    redaction policy (default: :class:`~tracer.RedactionPolicy`'s keys and patterns). Tracebacks
    never include local variables (they may hold secrets).
    """
    out = stream if stream is not None else sys.stderr
    as_json = _wants_json(json, out)
    numeric = level if isinstance(level, int) else _level_number(level)
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        add_otel_context,
        Redact(redaction),
    ]
    if as_json:
        processors += [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    else:
        isatty = getattr(out, "isatty", None)
        processors.append(structlog.dev.ConsoleRenderer(
            colors=bool(isatty and isatty()), exception_formatter=structlog.dev.plain_traceback,
        ))
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )


def _level_number(level: str) -> int:
    import logging

    value = logging.getLevelName(level.upper())
    if not isinstance(value, int):
        raise ValueError(f"unknown log level {level!r}: use debug, info, warning, error or critical")
    return value


def get_logger(**initial: Any) -> Any:
    """footprint's structlog logger (``logger="footprint"``), with ``initial`` values bound.

    It is bound to the configuration of the moment: get it where you log, not once at import.
    """
    return structlog.get_logger(LOGGER_NAME).bind(logger=LOGGER_NAME, **initial)


class LoggingListener(RecordingListener):
    """A recording listener that logs each run start, stage close and run end through structlog.

    ``trace_ids``: add ``trace_id``/``span_id`` (the ids the OpenTelemetry export gives the run's
    spans); ``None`` adds them when OpenTelemetry is on in this process (an :class:`~tracer.otel.OTelExporter`
    exists or an SDK tracer provider is installed). ``bind_context`` binds ``run_id``,
    ``session_id`` and ``agent`` in structlog's context variables between run start and end.
    """

    def __init__(self, logger: Any = None, *, trace_ids: bool | None = None, bind_context: bool = True) -> None:
        self._logger = logger
        self.trace_ids = trace_ids
        self.bind_context = bind_context
        self._runs: dict[str, tuple[int, str | None]] = {}  # run id -> (first seq of the segment, session)
        self._lineage = Lineage()  # a child run's trace is its parent's, as the export places it

    @property
    def log(self) -> Any:
        """The logger events go to (footprint's, as currently configured, unless one was given)."""
        return self._logger if self._logger is not None else get_logger()

    def _ids(self, run_id: str, span_key: str | None) -> dict[str, Any]:
        wanted = self.trace_ids if self.trace_ids is not None else otel_active()
        if not wanted:
            return {}
        placed = self._lineage.get(run_id)
        ids = {"trace_id": f"{placed.trace_id if placed is not None else trace_id_of(run_id):032x}"}
        if span_key is not None:
            ids["span_id"] = span_id_hex(span_key)
        return ids

    def run_started(self, run: Run, *, resumed: bool = False, first_seq: int = 0) -> None:
        """Log ``run.started`` and bind the run's ids for everything logged during it."""
        self._runs[run.id] = (first_seq, run.session_id)
        self._lineage.place(run)
        if self.bind_context:
            structlog.contextvars.bind_contextvars(run_id=run.id, session_id=run.session_id, agent=run.agent)
        self.log.info(
            "run.started", run_id=run.id, session_id=run.session_id, agent=run.agent, model=run.model,
            resumed=resumed, **self._ids(run.id, agent_span_key(run.id, first_seq)),
        )

    def stage_closed(self, recorded: RecordedStage) -> None:
        """Log ``stage.closed`` with the stage's ids, kind, status, duration and what matters for its kind."""
        stage, attrs = recorded.stage, recorded.stage.attributes
        first_seq, session_id = self._runs.get(stage.run_id, (0, None))
        fields: dict[str, Any] = {
            "run_id": stage.run_id, "stage_id": stage.id, "session_id": session_id, "stage_kind": str(stage.kind),
            "stage_name": stage.name, "seq": stage.seq, "status": str(stage.status),
        }
        if stage.ended_at is not None:
            fields["duration_ms"] = round((stage.ended_at - stage.started_at) * 1000, 3)
        if stage.kind == StageKind.INFERENCE:
            for key in ("model", "provider", "finish_reason", "input_tokens", "output_tokens", "cached_tokens"):
                fields[key] = attrs.get(key)
        elif stage.kind == StageKind.TOOL:
            fields.update(tool=stage.name, call_id=attrs.get("call_id"), is_error=attrs.get("is_error"))
        if stage.error:
            fields["error"] = stage.error
        own_span = stage.kind in (StageKind.INFERENCE, StageKind.TOOL)
        span_key = stage.id if own_span else agent_span_key(stage.run_id, first_seq)
        fields.update(self._ids(stage.run_id, span_key))
        failed = stage.status in (StageStatus.ERROR, StageStatus.CANCELLED) or attrs.get("is_error") is True
        if failed:
            self.log.warning("stage.closed", **fields)
        elif own_span:
            self.log.info("stage.closed", **fields)
        else:
            self.log.debug("stage.closed", **fields)

    def run_ended(self, run: Run) -> None:
        """Log ``run.ended`` with the outcome, and unbind the run's ids."""
        first_seq = self._runs.pop(run.id, (0, None))[0]
        fields: dict[str, Any] = {
            "run_id": run.id, "session_id": run.session_id, "agent": run.agent, "status": run.status,
            "tokens_in": run.tokens_in, "tokens_out": run.tokens_out, "cost": run.cost,
        }
        if run.ended_at is not None:
            fields["duration_ms"] = round((run.ended_at - run.started_at) * 1000, 3)
        if run.error:
            fields["error"] = run.error
        fields.update(self._ids(run.id, agent_span_key(run.id, first_seq)))
        failed = run.status in (RunStatus.FAILED, RunStatus.CANCELLED)
        (self.log.warning if failed else self.log.info)("run.ended", **fields)
        if self.bind_context and structlog.contextvars.get_contextvars().get("run_id") == run.id:
            structlog.contextvars.unbind_contextvars(*_CONTEXT_KEYS)

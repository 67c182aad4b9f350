"""Reading a run in two parts on a thread pool: its outline first (to draw), then all of it."""

from __future__ import annotations

from concurrent.futures import Executor, Future
from dataclasses import dataclass, field

from tracer import RunData

from ._source import HostSource, RecordingSource


@dataclass
class RunLoad:
    """A run being read: ``outline`` (stages, edges, outputs) now, the whole run when asked.

    The screen asks for the whole run once the outline is drawn: read side by side, the two would
    share one interpreter lock and the outline, which the reader is waiting to see, would come
    later. A host's read API sends a run in one piece, so there the outline is the whole run.
    """

    pool: Executor
    source: RecordingSource
    run_id: str
    outline: Future[RunData]
    _full: Future[RunData] | None = field(default=None, repr=False)

    @classmethod
    def start(cls, pool: Executor, source: RecordingSource, run_id: str) -> RunLoad:
        """Start reading the outline now."""
        if isinstance(source, HostSource):
            whole = pool.submit(source.load_run, run_id)
            return cls(pool, source, run_id, whole, whole)
        return cls(pool, source, run_id, pool.submit(source.load_outline, run_id))

    @property
    def split(self) -> bool:
        """True when the outline is not the whole run."""
        return self._full is not self.outline

    def full(self) -> Future[RunData]:
        """The whole run (its read starts on the first call)."""
        if self._full is None:
            self._full = self.pool.submit(self.source.load_run, self.run_id)
        return self._full

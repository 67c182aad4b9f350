"""Where the explorer reads recordings from: a store file, or a host's read API.

The screens are written against :class:`RecordingSource`, a small protocol of read methods that a
:class:`tracer.Store` already has (``list_runs``, ``load_run``, ...) plus ``why``. Two sources
implement it: :class:`StoreSource` (a DuckDB file opened in this process) and :class:`HostSource`
(a standing-agent host in another process, through its read API client). Every method blocks, so
the screens call them from worker threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from tracer import (
    Evidence,
    Item,
    Run,
    RunData,
    RunFilter,
    SnapshotEntry,
    Store,
    run_from_dict,
    rundata_from_dict,
    why,
)

from ._evidence import evidence_from_dict
from .errors import SourceError

#: The filter that matches every run.
ALL_RUNS = RunFilter()

#: Some stages read whole: each one's entries (as ``RunData.inputs``) and the items they saw and output.
Snapshots = tuple[dict[str, list[SnapshotEntry]], dict[str, Item]]


@runtime_checkable
class RecordingSource(Protocol):
    """The read methods every screen of the explorer uses."""

    @property
    def label(self) -> str:
        """Where the recordings come from, for the title bar (a file path or a URL)."""
        ...

    @property
    def live(self) -> bool:
        """True when new runs may appear while the explorer is open (so the runs table polls)."""
        ...

    def list_runs(self, where: RunFilter = ALL_RUNS, *, limit: int = 50, offset: int = 0) -> list[Run]:
        """Runs matching ``where``, newest first."""
        ...

    def count_runs(self, where: RunFilter = ALL_RUNS) -> int:
        """How many runs match ``where``."""
        ...

    def get_run(self, run_id: str) -> Run:
        """One run by id."""
        ...

    def load_run(self, run_id: str) -> RunData:
        """Everything recorded about one run."""
        ...

    def load_outline(self, run_id: str, snapshots: Sequence[str] = ()) -> RunData:
        """The run's stages, edges and outputs, with the ``snapshots`` stages read whole (``Store.load_run``).

        Enough to draw its flowchart and the stage shown first; :meth:`load_snapshots` reads the
        others when they are shown.
        """
        ...

    def load_snapshots(self, run_id: str, stage_ids: Sequence[str]) -> Snapshots:
        """The snapshots of these stages of the run and the items they saw and output."""
        ...

    def resolve_run_id(self, ref: str) -> str:
        """The full id a prefix (or ``last``) names."""
        ...

    def session_runs(self, session_id: str) -> list[Run]:
        """The runs of a session, oldest first."""
        ...

    def why(self, run_id: str, item: str | None = None) -> Evidence:
        """The evidence for the run's answer (or for an item of the run)."""
        ...

    def flush(self) -> None:
        """Make what this process has recorded visible to the reads above (blocking)."""
        ...


class StoreSource:
    """Recordings in a :class:`tracer.Store` opened by this process."""

    def __init__(self, store: Store, *, live: bool = False, label: str | None = None) -> None:
        self.store = store
        self._live = live
        self._label = label

    @property
    def label(self) -> str:
        """The store's path (or the label given)."""
        return self._label or self.store.path

    @property
    def live(self) -> bool:
        """True when something in this process records into the store (the sandbox, a host)."""
        return self._live or not self.store.read_only

    def list_runs(self, where: RunFilter = ALL_RUNS, *, limit: int = 50, offset: int = 0) -> list[Run]:
        """Runs matching ``where``, newest first."""
        return self.store.list_runs(where, limit=limit, offset=offset)

    def count_runs(self, where: RunFilter = ALL_RUNS) -> int:
        """How many runs match ``where``."""
        return self.store.count_runs(where)

    def get_run(self, run_id: str) -> Run:
        """One run by id."""
        return self.store.get_run(run_id)

    def load_run(self, run_id: str) -> RunData:
        """Everything recorded about one run."""
        return self.store.load_run(run_id)

    def load_outline(self, run_id: str, snapshots: Sequence[str] = ()) -> RunData:
        """Stages, edges and outputs, with the ``snapshots`` stages read whole (``Store.load_run``)."""
        return self.store.load_run(run_id, snapshots=snapshots)

    def load_snapshots(self, run_id: str, stage_ids: Sequence[str]) -> Snapshots:
        """The snapshots of these stages of the run and the items they saw and output."""
        return self.store.load_snapshots(run_id, stage_ids)

    def resolve_run_id(self, ref: str) -> str:
        """The full id a prefix (or ``last``) names."""
        return self.store.resolve_run_id(ref)

    def session_runs(self, session_id: str) -> list[Run]:
        """The runs of a session, oldest first."""
        return self.store.session_runs(session_id)

    def why(self, run_id: str, item: str | None = None) -> Evidence:
        """The evidence graph, walked over this store."""
        return why(self.store, run_id, item)

    def flush(self) -> None:
        """Wait until the store's writer has committed what was recorded so far."""
        if not self.store.read_only:
            self.store.flush()


class RecordingsClientLike(Protocol):
    """The part of ``hosting.RecordingsClient`` the explorer uses (a host's read API)."""

    base_url: str

    def list_runs(self, where: RunFilter = ALL_RUNS, *, limit: int = ..., offset: int = ...) -> Any: ...
    def count_runs(self, where: RunFilter = ALL_RUNS) -> Any: ...
    def get_run(self, run_id: str) -> Any: ...
    def load_run(self, run_id: str, *, snapshots: Sequence[str] | None = None) -> Any: ...
    def load_snapshots(self, run_id: str, stage_ids: Sequence[str]) -> Any: ...
    def resolve_run_id(self, ref: str) -> Any: ...
    def session_runs(self, session_id: str) -> Any: ...
    def why(self, run_id: str, item: str | None = None) -> Any: ...


class HostSource:
    """Recordings of a standing-agent host in another process, read through its read API client.

    The client's answers are accepted as records or as their JSON forms (``tracer.run_to_dict``,
    ``rundata_to_dict``, ``Evidence.to_dict``) so the screens always get records.
    """

    def __init__(self, client: RecordingsClientLike) -> None:
        self.client = client

    @property
    def label(self) -> str:
        """The host's URL."""
        return str(getattr(self.client, "base_url", "host"))

    @property
    def live(self) -> bool:
        """Always: the host records while the explorer watches."""
        return True

    def list_runs(self, where: RunFilter = ALL_RUNS, *, limit: int = 50, offset: int = 0) -> list[Run]:
        """Runs matching ``where``, newest first."""
        return [_run(r) for r in self.client.list_runs(where, limit=limit, offset=offset)]

    def count_runs(self, where: RunFilter = ALL_RUNS) -> int:
        """How many runs match ``where``."""
        return int(self.client.count_runs(where))

    def get_run(self, run_id: str) -> Run:
        """One run by id."""
        return _run(self.client.get_run(run_id))

    def load_outline(self, run_id: str, snapshots: Sequence[str] = ()) -> RunData:
        """Stages, edges and outputs, with the ``snapshots`` stages read whole, in one request."""
        return self._rundata(run_id, self.client.load_run(run_id, snapshots=list(snapshots)))

    def load_snapshots(self, run_id: str, stage_ids: Sequence[str]) -> Snapshots:
        """The snapshots of these stages of the run and the items they saw and output, in one request."""
        answer = self.client.load_snapshots(run_id, list(stage_ids))
        if isinstance(answer, tuple) and len(answer) == 2:
            return answer[0], answer[1]
        try:
            data = rundata_from_dict(answer)
        except ValueError as exc:
            raise SourceError(f"{self.label} sent snapshots of run {run_id} in a form the explorer cannot read: "
                              f"{exc}") from exc
        return data.inputs, data.items

    def load_run(self, run_id: str) -> RunData:
        """Everything recorded about one run."""
        return self._rundata(run_id, self.client.load_run(run_id))

    def _rundata(self, run_id: str, data: Any) -> RunData:
        if isinstance(data, RunData):
            return data
        try:
            return rundata_from_dict(data)
        except ValueError as exc:
            raise SourceError(f"{self.label} sent run {run_id} in a form the explorer cannot read: {exc}") from exc

    def resolve_run_id(self, ref: str) -> str:
        """The full id a prefix (or ``last``) names."""
        return str(self.client.resolve_run_id(ref))

    def session_runs(self, session_id: str) -> list[Run]:
        """The runs of a session, oldest first."""
        return [_run(r) for r in self.client.session_runs(session_id)]

    def why(self, run_id: str, item: str | None = None) -> Evidence:
        """The evidence graph, walked by the host."""
        result = self.client.why(run_id, item)
        if isinstance(result, Evidence):
            return result
        if not isinstance(result, dict):
            raise SourceError(f"{self.label} answered why({run_id}) with {type(result).__name__}, not evidence")
        try:
            return evidence_from_dict(result)
        except ValueError as exc:
            raise SourceError(f"{self.label} sent evidence for run {run_id} the explorer cannot read: {exc}") from exc


    def flush(self) -> None:
        """Nothing to do: the host commits its own recordings."""


def _run(value: Run | dict[str, Any]) -> Run:
    if isinstance(value, Run):
        return value
    try:
        return run_from_dict(value)
    except TypeError as exc:
        raise SourceError(f"a host sent a run the explorer cannot read: {exc}") from exc


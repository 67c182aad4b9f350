"""The recorder with recording switched off: the agent's path runs the same, and nothing is written."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ._ids import new_id
from ._recorder import Durability, Recorder, RunRecording, StageRecording
from ._records import ContextItem, Item, OriginKind, Recorded, RunStatus, StageStatus
from ._redaction import RedactionPolicy
from ._writer import Bundle, StageRows


class NullRecorder(Recorder):
    """A recorder that records nothing: the agent's path with recording switched off."""

    def __init__(self) -> None:
        self.durability = Durability.EXIT
        self.redaction = RedactionPolicy.none()
        self._redacted = {}
        self._sent = {}
        self._policy_json = None
        self.listeners = []

    @property
    def enabled(self) -> bool:
        """False: nothing is written."""
        return False

    def _submit(self, bundle: Bundle | StageRows, run: RunRecording | None = None) -> None:
        return None

    def _submit_all(self, bundles: list[StageRows], run: RunRecording | None = None) -> None:
        return None

    def start_run(self, **kwargs: Any) -> RunRecording:
        """A run recording whose stages and end write nothing."""
        return _NullRun(self, kwargs.get("run_id") or new_id("r"), kwargs.get("agent", ""), kwargs.get("session_id"))

    def continue_run(
        self, run_id: str, *, agent: str, session_id: str | None = None, next_seq: int = 0,
        deferred_sync: bool = False,
    ) -> RunRecording:
        """A resumed run recording whose stages and end write nothing."""
        return _NullRun(self, run_id, agent, session_id, first_seq=next_seq)


class _NullRun(RunRecording):
    def stage(self, kind: str, name: str = "", **kwargs: Any) -> StageRecording:
        return _NullStage(self, new_id("s"), 0, str(kind), name or str(kind), None)

    def end(self, status: RunStatus | str, **kwargs: Any) -> None:
        self._ended = True
        self.status = str(status)


class _NullStage(StageRecording):
    __slots__ = ()

    def inputs(self, items: Sequence[ContextItem], dropped: Iterable[tuple[ContextItem, str]] = ()) -> None:
        return None

    def output(
        self, item: Item, *, origin_kind: OriginKind | str = OriginKind.STAGE, source: str | None = None
    ) -> ContextItem:
        return ContextItem(item, self.origin(origin_kind, source))

    def close(self, status: StageStatus | str = StageStatus.OK, error: str | None = None) -> None:
        self._closed = True

    def can_name(self, receipt: Recorded) -> bool:
        return False  # (nothing is recorded: no receipt is issued, and none names what a stage left out)

"""footprint's recording core: runs as flowcharts of context snapshots in DuckDB.

The public front of ``tracer``: records, the recorder, the store, and the questions it answers.
"""

from ._compare import (
    DroppedChange,
    RunComparison,
    StagePair,
    ToolCallChange,
    UsageComparison,
    compare_run_data,
    compare_runs,
)
from ._diff import DiffEntry, RunDivergence, SnapshotDiff, diff_runs, diff_snapshots, estimate_tokens
from ._dropped import DROPPED_SINCE, DroppedContext, dropped_context, left_out
from ._files import missing_directory, refuse_truncated, restrict_to_owner
from ._ids import new_id
from ._json import canonical_json
from ._lineage import child_run_ids, child_runs, started_run
from ._listeners import RecordedStage, RecordingListener, feed_listener, recorded_stages
from ._names import item_names, resolve_item
from ._rank import RankedItem, earlier_verdicts, rank
from ._recorder import Durability, NullRecorder, Recorder, RunRecording, StageRecording
from ._records import (
    CHILD_RUN,
    PARENT_AGENT,
    PARENT_RUN,
    PARENT_STAGE,
    ContextItem,
    Edge,
    EdgeKind,
    Item,
    ItemKind,
    LeftOut,
    Origin,
    OriginKind,
    Recorded,
    Run,
    RunStatus,
    SnapshotEntry,
    Stage,
    StageKind,
    StageStatus,
    content_hash,
    context_item_from_dict,
    context_item_to_dict,
)
from ._redaction import RedactionPolicy
from ._render import one_line
from ._run_finding import RunFilter
from ._rundata import RunData
from ._serialize import (
    origin_from_dict,
    origin_to_dict,
    run_from_dict,
    run_to_dict,
    rundata_from_dict,
    rundata_to_dict,
)
from ._store import DEFAULT_PATH, Store
from ._why import SHOWN_ABOVE, DroppedItem, Evidence, EvidenceNode, RunSource, why
from .errors import (
    ExportError,
    FootprintError,
    NewerSchemaError,
    NotAStoreError,
    NotFoundError,
    RecordingError,
    StoreError,
    StoreLockedError,
    TracerError,
)

__all__ = [
    "CHILD_RUN",
    "DEFAULT_PATH",
    "DROPPED_SINCE",
    "PARENT_AGENT",
    "PARENT_RUN",
    "PARENT_STAGE",
    "SHOWN_ABOVE",
    "ContextItem",
    "DiffEntry",
    "DroppedChange",
    "DroppedContext",
    "DroppedItem",
    "Durability",
    "Edge",
    "EdgeKind",
    "Evidence",
    "EvidenceNode",
    "ExportError",
    "FootprintError",
    "Item",
    "ItemKind",
    "LeftOut",
    "NewerSchemaError",
    "NotAStoreError",
    "NotFoundError",
    "NullRecorder",
    "Origin",
    "OriginKind",
    "RankedItem",
    "Recorded",
    "RecordedStage",
    "Recorder",
    "RecordingError",
    "RecordingListener",
    "RedactionPolicy",
    "Run",
    "RunComparison",
    "RunData",
    "RunDivergence",
    "RunFilter",
    "RunRecording",
    "RunSource",
    "RunStatus",
    "SnapshotDiff",
    "SnapshotEntry",
    "Stage",
    "StageKind",
    "StagePair",
    "StageRecording",
    "StageStatus",
    "Store",
    "StoreError",
    "StoreLockedError",
    "ToolCallChange",
    "TracerError",
    "UsageComparison",
    "canonical_json",
    "child_run_ids",
    "child_runs",
    "compare_run_data",
    "compare_runs",
    "content_hash",
    "context_item_from_dict",
    "context_item_to_dict",
    "diff_runs",
    "diff_snapshots",
    "dropped_context",
    "earlier_verdicts",
    "estimate_tokens",
    "feed_listener",
    "item_names",
    "left_out",
    "missing_directory",
    "new_id",
    "one_line",
    "origin_from_dict",
    "origin_to_dict",
    "rank",
    "recorded_stages",
    "refuse_truncated",
    "resolve_item",
    "restrict_to_owner",
    "run_from_dict",
    "run_to_dict",
    "rundata_from_dict",
    "rundata_to_dict",
    "started_run",
    "why",
]

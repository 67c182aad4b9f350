"""The read API for recordings: the host owns the DuckDB file, so other processes read through it.

    GET /v1/recordings/runs?session=&agent=&status=&search=&label=&limit=&offset=
        -> {"runs": [tracer.run_to_dict(run), ...], "total": N}
    GET /v1/recordings/runs/{run_id}?snapshots=  -> tracer.rundata_to_dict(store.load_run(id))
        (``snapshots``: comma-separated ids of the stages to send whole, when not every stage;
        empty for none: ``store.load_run(id, snapshots=...)``, all stages, edges and outputs; a
        stage id the run does not have is 404, naming it)
    GET /v1/recordings/runs/{run_id}/snapshots?stages=  -> store.load_snapshots(id, stages) in
        rundata_to_dict's form: the run, ``inputs`` of those stages and ``items`` those stages saw
        and output (no stages, edges or outputs); a stage id the run does not have is 404, naming it
    GET /v1/recordings/runs/{run_id}/why?item=&depth=  -> tracer.why(...).to_dict()
        (``item``: an item's name — ``memory:KEY``, ``result:TOOL#n`` — or a hash prefix, as the CLI takes)
    GET /v1/recordings/sessions/{session_id}/runs      -> {"runs": [...]} oldest first

``run_id`` may be a unique prefix or ``last``; a prefix several runs start with is 409 ``ambiguous_id``,
saying how many (``matches``). :class:`hosting.RecordingsClient` is the client.
The handlers are plain functions, so FastAPI runs the DuckDB reads in its thread pool and the
event loop never waits on them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Query

from tracer import RunData, RunFilter, RunStatus, Store, run_to_dict, rundata_to_dict, why

from ._params import Offset, SessionId

MAX_PAGE = 1000


def recordings_router(get_store: Callable[[], Store]) -> APIRouter:
    """The recordings routes, reading from the store ``get_store()`` returns."""
    router = APIRouter(prefix="/v1/recordings", tags=["recordings"])

    def fresh() -> Store:
        store = get_store()
        # rows recorded under `exit` durability may still sit in the writer's queue
        if not store.read_only:
            store.flush()
        return store

    @router.get("/runs", summary="List recorded runs, newest first")
    def list_runs(
        session: str | None = None,
        agent: str | None = None,
        status: RunStatus | None = None,
        search: str | None = None,
        label: str | None = None,
        forks: Annotated[bool, Query(description="true: include the re-runs forked from a recorded run "
                                             "(replays, counterfactual and blame runs)")] = False,
        children: Annotated[bool, Query(description="false: leave out the runs sub-agents made for another run "
                                                "(reached through that run)")] = True,
        limit: Annotated[int, Query(ge=0, le=MAX_PAGE)] = 50,
        offset: Offset = 0,
    ) -> dict[str, Any]:
        store = fresh()
        where = RunFilter(session_id=session, agent=agent, status=status, search=search, label=label, forks=forks,
                          children=children)
        runs = store.list_runs(where, limit=limit, offset=offset)
        return {"runs": [run_to_dict(r) for r in runs], "total": store.count_runs(where)}

    @router.get("/runs/{run_id}", summary="Everything recorded about one run (id, unique prefix or `last`)")
    def load_run(run_id: str, snapshots: str | None = None) -> dict[str, Any]:
        store = fresh()
        return rundata_to_dict(store.load_run(store.resolve_run_id(run_id), snapshots=_ids(snapshots)))

    @router.get("/runs/{run_id}/snapshots", summary="Some stages of a run read whole: their snapshots and items")
    def load_snapshots(run_id: str, stages: str) -> dict[str, Any]:
        store = fresh()
        resolved = store.resolve_run_id(run_id)
        inputs, items = store.load_snapshots(resolved, _ids(stages) or [])
        return rundata_to_dict(RunData(run=store.get_run(resolved), stages=[], edges=[], inputs=inputs, items=items))

    @router.get("/sessions/{session_id}/runs", summary="A session's recorded runs, oldest first")
    def session_runs(session_id: SessionId) -> dict[str, Any]:
        return {"runs": [run_to_dict(r) for r in fresh().session_runs(session_id)]}

    @router.get("/runs/{run_id}/why", summary="The evidence graph behind a run's answer (or one item)")
    def why_run(
        run_id: str,
        item: Annotated[str | None, Query(description="An item's name (memory:KEY, result:TOOL#n, call:TOOL#n, "
                                                       "history:KIND#n, input, ...) or a unique hash prefix")] = None,
        depth: Annotated[int, Query(ge=1, le=128, description="How many origins deep to walk, as "
                                                                "`footprint why --depth`")] = 32,
    ) -> dict[str, Any]:
        store = fresh()
        return why(store, store.resolve_run_id(run_id), item, depth=depth).to_dict()

    return router


def _ids(value: str | None) -> list[str] | None:
    """Comma-separated ids as a list (None stays None: no list given)."""
    return None if value is None else [part.strip() for part in value.split(",") if part.strip()]

"""A client for the host's API: recordings for other processes, and turns for a chat.

The host process owns its DuckDB file, so another process (the explorer, a script) reads the
recordings through the host. :class:`RecordingsClient` mirrors the read methods of
:class:`tracer.Store` and satisfies :class:`tracer.RunSource`, so ``tracer.why(client, run_id)``
works against a remote host the same as against a local file.

    client = RecordingsClient("http://127.0.0.1:8080", token="s3cret")
    runs = client.list_runs(RunFilter(session_id="alice"), limit=20)
    data = client.load_run("last")
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpx2 as httpx

from tracer import (
    AmbiguousIdError,
    Item,
    NotFoundError,
    Run,
    RunData,
    RunFilter,
    SnapshotEntry,
    run_from_dict,
    rundata_from_dict,
)

from .errors import HostAuthError, HostClientError

_ALL = RunFilter()
_NOT_JSON = object()


class RecordingsClient:
    """The host's read API and turn endpoint over HTTP (synchronous; safe to share between threads)."""

    def __init__(self, base_url: str, token: str | None = None, *, timeout: float = 30.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout, transport=transport)

    # ------------------------------------------------------------------ plumbing

    def _request(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                 json: dict[str, Any] | None = None, timeout: float | None = None) -> Any:
        clean = {k: v for k, v in (params or {}).items() if v is not None}
        kwargs: dict[str, Any] = {"params": clean, "json": json}
        if timeout is not None:
            kwargs["timeout"] = timeout
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise HostClientError(f"cannot reach the footprint host at {self.base_url}: {exc}") from exc
        try:
            body = response.json()
        except ValueError:
            body = _NOT_JSON
        error = body.get("error") if isinstance(body, dict) else None
        if response.status_code < 400 and body is not _NOT_JSON:
            return body
        if not isinstance(error, dict) or not error.get("message"):
            # not the host's JSON: another server (a web page, a proxy's error) answers at this address
            raise HostClientError(
                f"{self.base_url}{path} answered {response.status_code} {response.reason_phrase}, and not as a "
                f"footprint host does: is {self.base_url} the address footprint serve printed?",
                status=response.status_code)
        message = str(error["message"])
        code = error.get("code")
        if response.status_code == 401:
            raise HostAuthError(f"{self.base_url}: {message}", status=401, code=code)
        if response.status_code == 404:
            raise NotFoundError(message)
        if code == "ambiguous_id":  # the same error the store raises, so a caller handles both alike
            raise AmbiguousIdError(message, ref=str(error.get("id", "")), matches=int(error.get("matches", 0)))
        raise HostClientError(f"{self.base_url}{path}: {response.status_code} {message}",
                              status=response.status_code, code=code)

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> RecordingsClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ recordings (tracer.Store's read methods)

    def list_runs(self, where: RunFilter = _ALL, *, limit: int = 50, offset: int = 0) -> list[Run]:
        """Runs, newest first."""
        return [run_from_dict(r) for r in self._runs_page(where, limit, offset)["runs"]]

    def count_runs(self, where: RunFilter = _ALL) -> int:
        """How many runs match."""
        return int(self._runs_page(where, 0, 0)["total"])

    def _runs_page(self, where: RunFilter, limit: int, offset: int) -> dict[str, Any]:
        params = {"session": where.session_id, "agent": where.agent, "status": where.status,
                  "search": where.search, "label": where.label, "forks": where.forks,
                  "children": where.children, "limit": limit,
                  "offset": offset}
        result: dict[str, Any] = self._request("GET", "/v1/recordings/runs", params=params)
        return result

    def get_run(self, run_id: str) -> Run:
        """One run (id, unique prefix or ``last``)."""
        return self.load_run(run_id).run

    def load_run(self, run_id: str, *, snapshots: Iterable[str] | None = None) -> RunData:
        """Everything recorded about one run (id, unique prefix or ``last``).

        ``snapshots``, as for ``Store.load_run``: only those stages come whole (read the others with
        :meth:`load_snapshots`).
        """
        params = None if snapshots is None else {"snapshots": ",".join(snapshots)}
        return rundata_from_dict(self._request("GET", f"/v1/recordings/runs/{run_id}", params=params))

    def load_snapshots(
        self, run_id: str, stage_ids: Iterable[str]
    ) -> tuple[dict[str, list[SnapshotEntry]], dict[str, Item]]:
        """The snapshots of some stages of a run and the items they saw and output, as ``Store.load_snapshots``."""
        wanted = list(dict.fromkeys(stage_ids))
        if not wanted:
            return {}, {}
        data = rundata_from_dict(self._request("GET", f"/v1/recordings/runs/{run_id}/snapshots",
                                               params={"stages": ",".join(wanted)}))
        return data.inputs, data.items

    def resolve_run_id(self, ref: str) -> str:
        """The full id of the run ``ref`` names: an id, a unique prefix, or ``last``."""
        return self.get_run(ref).id

    def session_runs(self, session_id: str) -> list[Run]:
        """The runs of a session, oldest first."""
        data = self._request("GET", f"/v1/recordings/sessions/{session_id}/runs")
        return [run_from_dict(r) for r in data["runs"]]

    def why(self, run_id: str, item: str | None = None, *, depth: int | None = None) -> dict[str, Any]:
        """The evidence graph behind a run's answer (or one item), as ``tracer.Evidence.to_dict()``."""
        result: dict[str, Any] = self._request("GET", f"/v1/recordings/runs/{run_id}/why",
                                               params={"item": item, "depth": depth})
        return result

    # ------------------------------------------------------------------ the host

    def sessions(self) -> list[dict[str, Any]]:
        """The host's sessions: ``{session_id, active, running, last_activity, status}``."""
        return list(self._request("GET", "/v1/sessions")["sessions"])

    def durable_sessions(self) -> list[dict[str, Any]]:
        """The host's durable sessions with their queue lengths (empty when it serves none).

        Each: ``{session_id, busy, steering, send, pending_calls}``.
        """
        try:
            return list(self._request("GET", "/v1/durable")["sessions"])
        except NotFoundError:
            return []

    def send(self, message: str, session_id: str | None = None, decision: str | None = None, *,
             turn_id: str | None = None, timeout: float | None = 300.0) -> dict[str, Any]:
        """Send a turn (or a decision for a paused session) and wait for the reply."""
        body = {"message": message, "session_id": session_id, "decision": decision, "turn_id": turn_id}
        result: dict[str, Any] = self._request(
            "POST", "/v1/turns", json={k: v for k, v in body.items() if v is not None}, timeout=timeout
        )
        return result

    def agents(self) -> list[dict[str, Any]]:
        """The host's stored agents (``GET /api/agents``; a host without a gateway answers 404)."""
        return list(self._request("GET", "/api/agents")["agents"])

    def health(self) -> dict[str, Any]:
        """The host's liveness and load figures."""
        result: dict[str, Any] = self._request("GET", "/v1/health")
        return result

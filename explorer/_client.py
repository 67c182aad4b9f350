"""The host's API as the host panel uses it: :class:`hosting.RecordingsClient`, and a durable
session's send.

A durable session takes a message on its send queue (``POST /v1/durable/{id}/send`` answers 202
once the message is durable, not when it is answered) and reports the turn that takes it on its
event stream (``GET /v1/durable/{id}/events``): :meth:`HostClient.durable_send` listens first, then
queues the message, then waits for that turn to end, so a chat in a durable session reads like one
through ``/v1/turns``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx2 as httpx

from hosting import HostClientError, RecordingsClient

#: how long a durable turn may take before the panel stops waiting for it (it goes on in the host)
DURABLE_REPLY_SECONDS = 300.0


class HostClient(RecordingsClient):
    """A :class:`~hosting.RecordingsClient` that can also chat in a durable session."""

    def durable_send(self, session_id: str, text: str, *, timeout: float = DURABLE_REPLY_SECONDS) -> dict[str, Any]:
        """Queue ``text`` on durable session ``session_id``'s send queue and wait for the turn that
        takes it; its reply as ``/v1/turns`` answers: ``{status, session_id, run_id, answer, error}``.

        Raises :class:`~hosting.HostClientError` when the host serves no durable sessions, refuses the
        message, or the turn has not ended within ``timeout`` seconds (it goes on in the host).
        """
        path = f"/v1/durable/{session_id}"
        deadline = time.monotonic() + timeout
        try:
            # a read waits at most for the stream's keep-alive (every 15 s) before the deadline is looked at
            with self._http.stream("GET", f"{path}/events", timeout=httpx.Timeout(60.0, connect=10.0)) as stream:
                if stream.status_code != 200:
                    stream.read()
                    raise HostClientError(
                        f"{self.base_url}{path}/events: {stream.status_code}: cannot follow durable session "
                        f"{session_id} (does the host serve durable sessions? footprint serve --durable)",
                        status=stream.status_code)
                lines = stream.iter_lines()
                next(lines, None)  # ": subscribed": listening, so no event of the turn is missed
                key = str(self._request("POST", f"{path}/send", json={"text": text})["key"])
                return _reply(session_id, key, _events(lines, deadline, session_id))
        except httpx.HTTPError as exc:
            raise HostClientError(f"lost the events of durable session {session_id} at {self.base_url}: {exc}") from exc


def _events(lines: Iterator[str], deadline: float, session_id: str) -> Iterator[dict[str, Any]]:
    """The events of a Server-Sent Events stream (its ``data:`` lines), until ``deadline``."""
    for line in lines:
        if time.monotonic() > deadline:
            break
        if line.startswith("data:"):
            event = json.loads(line[5:])
            if isinstance(event, dict):
                yield event
    raise HostClientError(f"durable session {session_id} has not answered yet: the turn goes on in the host, "
                          "and its run shows here when it ends")


def _reply(session_id: str, key: str, events: Iterator[dict[str, Any]]) -> dict[str, Any]:
    """The reply to the message queued as ``key``: the end of the run that consumed it."""
    run_id: str | None = None
    for event in events:
        kind = event.get("type")
        if kind == "MessagesConsumed" and key in event.get("keys", ()):
            run_id = event.get("run_id")
        elif kind == "TurnDone" and run_id is not None and event.get("run_id") == run_id:
            return {"status": event.get("state", "?"), "session_id": session_id, "run_id": run_id,
                    "answer": event.get("answer") or "", "error": event.get("error")}
        elif kind == "TurnDone" and event.get("run_id") is None and event.get("state") == "internal_error":
            # the history could not be loaded: nothing ran, the message waits in its queue
            return {"status": "failed", "session_id": session_id, "run_id": None,
                    "error": f"{event.get('error')} (the message stays queued for the next turn)"}
    raise AssertionError("unreachable: _events ends by raising")  # pragma: no cover

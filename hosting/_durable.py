"""Durable sessions served by the host: one :class:`~agent.durable.DurableAgent` per session id.

The host keeps an index of sessions with unfinished work (``open.<session id>`` values of the
reserved session ``INDEX_SESSION`` in the same persistence): written before a message is queued,
removed once the session settles with nothing queued or owed. After a restart,
:meth:`DurableHost.resume_unfinished` calls ``start()`` on each indexed session, so a turn a crash
or a shutdown cut off goes on by itself.

A session's events reach its listeners in order; one that reports a finished run (``TurnDone``,
``Compacted``, ``Settled``) is held — with every event after it — until the recorder's rows are
committed (under ``exit`` durability they are written in the background: :mod:`hosting._committed`),
so a listener never hears of a run that is not recorded.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, is_dataclass
from functools import partial
from typing import Any

from agent import Agent
from agent.durable import (
    AgentProviders,
    Compacted,
    DurableAgent,
    InferenceSettings,
    PersistenceContext,
    SessionPersistence,
    Settled,
    TurnDone,
)
from agent.durable.errors import DurableError, SettingsError
from tracer import Recorder

from ._committed import RecordingsCommits
from .errors import HostingError

log = logging.getLogger("footprint.hosting.durable")
INDEX_SESSION = "__footprint_durable_index__"
EVENTS_KEPT = 256  # events a slow SSE subscriber may fall behind before it is dropped
#: events that report a finished run: delivered only once its recorded rows are committed
_RUN_REPORTS = (TurnDone, Compacted, Settled)

#: factory(session_id, persistence) -> the session's DurableAgent
SessionFactory = Callable[[str, SessionPersistence], DurableAgent]


class DurableSessionError(HostingError):
    """A durable-session request failed (the message names the session and what to do)."""


def event_to_dict(event: Any) -> dict[str, Any]:
    """A session event as JSON-ready data: its type and its fields."""
    body: dict[str, Any] = asdict(event) if is_dataclass(event) and not isinstance(event, type) else {
        "repr": repr(event)}
    if "result" in body and isinstance(body["result"], dict):  # RunFinished: the result without its pause
        body["result"].pop("pause", None)
    return {"type": type(event).__name__, **body}


def agent_factory(build: Callable[[Recorder], Agent], recorder: Recorder) -> SessionFactory:
    """Durable sessions shaped like the agent ``build`` makes: its provider, persona, tools and name.

    The provider is registered as ``default`` with its own name as its compatibility type.
    """
    template = build(recorder)
    providers = AgentProviders().add("default", template.provider, template.provider.name)

    def make(session_id: str, persistence: SessionPersistence) -> DurableAgent:
        agent = build(recorder)
        return DurableAgent(session_id, providers=providers, provider="default", persistence=persistence,
                            instructions=agent.persona, tools=list(agent.tools.values()), recorder=recorder,
                            name=agent.name, model=agent.settings.model or None)

    return make


#: how many idle durable sessions a host keeps loaded by default
DEFAULT_MAX_LOADED = 1000


class DurableHost:
    """The host's durable sessions: created on first use, continued after a restart.

    At most ``max_loaded`` sessions stay loaded once idle: when a session settles with more loaded,
    the least recently used idle ones (nothing queued, running or owed) are closed and let go. A
    session let go is loaded again from the persistence by its next message, as after a restart;
    its listeners keep listening (they subscribe by id).
    """

    def __init__(self, factory: SessionFactory, persistence: SessionPersistence, *,
                 max_loaded: int = DEFAULT_MAX_LOADED) -> None:
        if max_loaded < 1:
            raise ValueError(f"max_loaded must be at least 1, got {max_loaded}")
        self.factory = factory
        self.persistence = persistence
        self.max_loaded = max_loaded
        #: the loaded sessions, the least recently used first
        self.sessions: dict[str, DurableAgent] = {}
        self._index = PersistenceContext(INDEX_SESSION)
        self._index_lock = asyncio.Lock()
        self._subscribers: dict[str, set[asyncio.Queue[dict[str, Any] | None]]] = {}
        self._closed = False
        self._tasks: set[asyncio.Future[Any]] = set()
        self._commits = RecordingsCommits()
        #: per session, events waiting (in order) for a run they report to be committed; each
        #: with whether it reports one
        self._held: dict[str, deque[tuple[dict[str, Any], bool]]] = {}
        self._releasing: set[asyncio.Future[None]] = set()

    def session(self, session_id: str) -> DurableAgent:
        """The session's agent (created, with its listeners, on first use)."""
        if self._closed:
            raise DurableSessionError("the host is shutting down; send the message again once it is back")
        if session_id == INDEX_SESSION:
            raise DurableSessionError(f"session id {session_id!r} is reserved")
        agent = self.sessions.pop(session_id, None)
        if agent is None:
            agent = self.factory(session_id, self.persistence)
            agent.listeners.append(partial(self._publish, session_id, agent.agent.recorder))
        self.sessions[session_id] = agent  # the most recently used, last
        return agent

    async def queue(self, session_id: str, queue: str, text: str, settings: InferenceSettings) -> str:
        """Steer or send: durable (index entry first, then the queue write) when this returns."""
        self.session(session_id)  # refused here, before any write, when the host is closing
        async with self._index_lock:  # the entry and the message land before a settle can drop the entry
            agent = self.session(session_id)  # (the one loaded now: an idle one may have been let go)
            await self.persistence.write_value(self._index, f"open.{session_id}", {"open": True})
            try:
                if queue == "steering":
                    return await agent.steer(text, settings)
                return await agent.send(text, settings)
            except SettingsError:
                raise  # the client's mistake (an unknown setting or provider): a 422, not a 503
            except DurableError as exc:
                raise DurableSessionError(f"session {session_id}: {exc}") from exc

    async def abort(self, session_id: str) -> bool:
        """Abort the session's active turn; False when it was idle (or not loaded here)."""
        agent = self.sessions.get(session_id)
        if agent is None or not agent.busy:
            return False
        await agent.abort()
        return True

    async def compact(self, session_id: str) -> None:
        """Compact the session (its queues are kept; raises when the provider fails)."""
        await self.session(session_id).compact()

    def describe(self, session_id: str) -> dict[str, Any]:
        """What a panel shows: busy, the queues, calls owed, the history's size.

        A session this host has not loaded since it started says ``loaded: false`` and
        ``messages: null`` (unknown, not zero: its history is in the store until its next turn).
        """
        agent = self.sessions.get(session_id)
        if agent is None:
            return {"session_id": session_id, "loaded": False, "busy": False,
                    "queues": {"steering": [], "send": []}, "pending_calls": 0, "messages": None}
        return {"session_id": session_id, "loaded": True, "busy": agent.busy, "queues": agent.queued(),
                "pending_calls": len(agent.pending_calls), "messages": len(agent.history)}

    async def stored(self, session_id: str) -> bool:
        """True when the session is loaded here or the persistence holds anything of it (a queued
        message, a record); False for an id never used."""
        if session_id in self.sessions:
            return True
        ctx = PersistenceContext(session_id)
        return bool(await self.persistence.read_values(ctx, "")) or bool(await self.persistence.load(ctx))

    def overview(self) -> list[dict[str, Any]]:
        """Every session loaded in this host, with its queue lengths."""
        return [{"session_id": sid, "busy": a.busy, "steering": len(a.queues["steering"]),
                 "send": len(a.queues["send"]), "pending_calls": len(a.pending_calls)}
                for sid, a in sorted(self.sessions.items())]

    async def resume_unfinished(self) -> list[str]:
        """``start()`` every session the index says has unfinished work; their ids."""
        entries = await self.persistence.read_values(self._index, "open.")
        ids = [key.removeprefix("open.") for key, _ in entries]
        for session_id in ids:
            self.session(session_id).start()
        log.info("continuing %d durable session(s) with unfinished work", len(ids))
        return ids

    def subscribe(self, session_id: str) -> asyncio.Queue[dict[str, Any] | None]:
        """A queue of the session's events as JSON-ready dicts (None: the stream ends).

        Subscribing loads nothing: a session's events are published to whoever subscribed to its
        id by then, so a client may listen before its first message. (It made the session, and kept
        it loaded for the life of the process: every id a client listened to — a typo, a scan —
        was listed by GET /v1/durable as a session, ~7 KB each.)
        """
        if self._closed:
            raise DurableSessionError("the host is shutting down; listen again once it is back")
        if session_id == INDEX_SESSION:
            raise DurableSessionError(f"session id {session_id!r} is reserved")
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(EVENTS_KEPT)
        self._subscribers.setdefault(session_id, set()).add(queue)
        return queue

    def unsubscribe(self, session_id: str, queue: asyncio.Queue[dict[str, Any] | None]) -> None:
        """Stop delivering events to ``queue``."""
        queues = self._subscribers.get(session_id)
        if queues is not None:
            queues.discard(queue)
            if not queues:
                del self._subscribers[session_id]

    async def close(self, grace: float = 5.0) -> None:
        """Stop every session (running turns get ``grace`` seconds, then are aborted and stay owed)."""
        self._closed = True
        await asyncio.gather(*(a.close(grace) for a in self.sessions.values()), return_exceptions=True)
        if self._releasing:  # events waiting for their runs' commit go out before the streams end
            await asyncio.gather(*self._releasing, return_exceptions=True)
        for queues in self._subscribers.values():
            for queue in queues:
                try:
                    queue.put_nowait(None)
                except asyncio.QueueFull:
                    pass

    # ------------------------------------------------------------------ internals

    def _publish(self, session_id: str, recorder: Recorder | None, event: Any) -> None:
        if isinstance(event, Settled) and not self._closed:
            task = asyncio.ensure_future(self._close_entry(session_id))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        held = self._held.get(session_id)
        if held is None and not self._subscribers.get(session_id):
            return  # nobody listens (a listener that comes later hears the events from then on)
        reports = isinstance(event, _RUN_REPORTS) and self._commits.needed(recorder)
        if held is None and not reports:
            self._deliver(session_id, event_to_dict(event))
            return
        if held is None:
            held = self._held[session_id] = deque()
            release = asyncio.ensure_future(self._release(session_id, recorder, held))
            self._releasing.add(release)
            release.add_done_callback(self._releasing.discard)
        held.append((event_to_dict(event), reports))

    def _deliver(self, session_id: str, data: dict[str, Any] | None) -> None:
        subscribers = self._subscribers.get(session_id)
        if not subscribers:
            return
        for queue in list(subscribers):
            try:
                queue.put_nowait(data)
            except asyncio.QueueFull:  # too slow: drop the subscriber, not the session
                subscribers.discard(queue)

    async def _release(self, session_id: str, recorder: Recorder | None,
                       held: deque[tuple[dict[str, Any], bool]]) -> None:
        """Deliver the session's held events in order, each run report once its rows are committed
        (one flush serves every event held by then; events held meanwhile wait for the next)."""
        try:
            while held:
                if any(reports for _, reports in held):
                    waiting = len(held)  # published before the flush begins: it covers their runs
                    await self._commits.committed(recorder)
                    for _ in range(waiting):
                        self._deliver(session_id, held.popleft()[0])
                else:
                    while held:
                        self._deliver(session_id, held.popleft()[0])
        except Exception as exc:
            # the recordings cannot be written: no listener is told a run ended that is not
            # recorded; their streams end instead (the session itself is stored: it goes on)
            log.error("session %s: its events were not sent, since the recordings could not be committed: %s",
                      session_id, exc)
            held.clear()
            self._deliver(session_id, None)
        finally:
            self._held.pop(session_id, None)

    async def _close_entry(self, session_id: str) -> None:
        """Drop the index entry of a session that settled with nothing queued or owed; then let
        go of idle sessions beyond ``max_loaded``."""
        agent = self.sessions.get(session_id)
        if agent is None:
            return
        await agent.wait_for_idle()
        async with self._index_lock:
            if not _idle(agent):
                return
            try:
                await self.persistence.delete_value(self._index, f"open.{session_id}")
            except Exception:  # kept: the next restart starts it once more, which only loads
                log.warning("could not drop the index entry of session %s", session_id, exc_info=True)
                return
            # chosen under the lock queue() takes: a message queued later finds the session gone
            # and loads it anew; one queued before has made its session busy
            chosen = self._idle_beyond_limit()
        await self._let_go(chosen)

    def _idle_beyond_limit(self) -> list[tuple[str, DurableAgent]]:
        """The least recently used idle sessions while more than ``max_loaded`` are loaded,
        removed from :attr:`sessions`."""
        excess = len(self.sessions) - self.max_loaded
        if excess <= 0 or self._closed:
            return []
        chosen = [(sid, a) for sid, a in self.sessions.items() if _idle(a)][:excess]
        for sid, _ in chosen:
            del self.sessions[sid]
        return chosen

    async def _let_go(self, chosen: list[tuple[str, DurableAgent]]) -> None:
        for sid, agent in chosen:
            try:
                await agent.close()
            except Exception:  # its tools failed to close: it is let go all the same
                log.warning("closing idle durable session %s failed", sid, exc_info=True)
        if chosen:
            log.debug("let go of %d idle durable session(s); %d loaded", len(chosen), len(self.sessions))


def _idle(agent: DurableAgent) -> bool:
    """Nothing running, queued or owed: the session can be let go and loaded again later."""
    return not (agent.busy or agent.has_work() or agent.pending_calls or agent.queues["steering"]
                or agent.queues["send"])

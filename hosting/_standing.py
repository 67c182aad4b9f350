"""The standing agent: an agent that stays up and remembers, one session at a time.

    host = standing_agent(agent_factory=make_agent, sessions=DuckDBSessions(store), durability="sync")
    reply = await host.handle("hello", session_id="alice")

Two shapes, one composer:

* ``agent=``: one instance for every session. An instance holds per-run state on itself, so its
  runs are serialized globally — a correctness requirement, not a tuning choice: two runs
  overlapping on one instance could leave one session's conversation in another's envelope.
* ``agent_factory=``: one instance per ACTIVE session (:class:`hosting._pool.AgentPool`), so
  sessions run in parallel and each session's turns are serialized on its own instance.

Requests without a session share one fallback instance. ``on_concurrent_invoke`` decides what a
second turn of the SAME session gets while one is running: ``refuse`` (default,
:class:`SessionBusyError`) or ``enqueue``. A request for a different session is never refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from typing import Any

from agent import Agent, Hooks
from tracer import Durability, Recorder, Store, one_line

from ._pool import AgentFactory, AgentPool, Slot
from ._recovery import end_abandoned_runs, needs_recovery, recover
from ._reply import TurnReply
from ._turn import Emit, SessionTurns, run_anonymous
from .errors import (
    AwaitingDecisionError,
    HostFailedError,
    HostShuttingDownError,
    NotAwaitingError,
    SessionBusyError,
    SessionNotFoundError,
    SessionStoreError,
    TurnIdReusedError,
    UnreadableEnvelopeError,
    VersionConflictError,
)
from .sessions import Envelope, InMemorySessions, SessionStore

log = logging.getLogger("footprint.host")

ON_CONCURRENT = ("refuse", "enqueue")


class StandingAgent:
    """Serves an agent with per-session conversations kept in a :class:`SessionStore`.

    ``durability``: ``exit`` persists a session when its run ends; ``sync`` also after each
    inference and tool call (and sets the recorder of every instance to ``Durability.SYNC``).
    ``recordings`` is the tracer store the read API serves (default: the agent's recorder's).
    ``close_sessions``: close the session store when the host closes (default: only a store the
    host made itself).
    """

    def __init__(
        self,
        *,
        agent: Agent | None = None,
        agent_factory: AgentFactory | None = None,
        sessions: SessionStore | None = None,
        durability: str | Durability = "exit",
        on_concurrent_invoke: str = "refuse",
        max_active_sessions: int = 100,
        recordings: Store | None = None,
        host_id: str | None = None,
        lease_seconds: float = 60.0,
        close_sessions: bool | None = None,
    ) -> None:
        if (agent is None) == (agent_factory is None):
            raise ValueError("standing_agent needs exactly one of `agent` (one shared instance) or `agent_factory`")
        durability = Durability(durability).value
        if on_concurrent_invoke not in ON_CONCURRENT:
            raise ValueError(f"on_concurrent_invoke must be one of {', '.join(ON_CONCURRENT)}, "
                             f"not {on_concurrent_invoke!r}")
        if max_active_sessions < 1:
            raise ValueError(f"max_active_sessions must be at least 1, not {max_active_sessions}")
        self.sessions = sessions if sessions is not None else InMemorySessions()
        self._owns_sessions = sessions is None if close_sessions is None else close_sessions
        self.durability = durability
        self.on_concurrent_invoke = on_concurrent_invoke
        self.recordings = recordings
        self.host_id = host_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self._turns = SessionTurns(self.sessions, durability=durability, host_id=self.host_id,
                                   lease_seconds=lease_seconds)
        self._original_hooks: dict[int, Hooks] = {}
        self._inflight: dict[str, int] = {}
        self._session_locks: dict[str, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[TurnReply]] = set()
        self._draining = False
        self._closed = False
        self._started: asyncio.Task[list[str]] | None = None  # the sweep of crash leftovers, once
        self.failed: str | None = None  # why the host cannot serve any more (it exits to be restarted)
        self.on_failed: list[Any] = []  # called (no arguments) once the host has failed
        self._reopening = asyncio.Lock()
        self._reopen: asyncio.Task[None] | None = None  # the session store being reopened
        self._shared: Slot | None = None
        self._pool: AgentPool | None = None
        self._fallback: Slot | None = None
        if agent is not None:
            self._wire(agent)
            self._shared = Slot(None, agent)
        else:
            assert agent_factory is not None
            self._pool = AgentPool(agent_factory, max_active_sessions, wire=self._wire, unwire=self._unwire)

    # ------------------------------------------------------------------ properties

    @property
    def shape(self) -> str:
        """``shared`` (one instance, runs serialized globally) or ``pooled`` (one per session)."""
        return "shared" if self._shared is not None else "pooled"

    @property
    def pool(self) -> AgentPool | None:
        """The instance pool of the ``agent_factory`` shape."""
        return self._pool

    @property
    def draining(self) -> bool:
        """True once shutdown began: new turns are refused."""
        return self._draining

    def running_sessions(self) -> set[str]:
        """Sessions with a turn admitted (running or queued)."""
        return {sid for sid, n in self._inflight.items() if n > 0}

    # ------------------------------------------------------------------ wiring

    def _wire(self, agent: Agent) -> None:
        self._original_hooks[id(agent)] = agent.hooks
        agent.hooks = Hooks.merge([agent.hooks, self._turns.hooks])
        if agent.recorder.enabled:
            if self.durability == Durability.SYNC:
                agent.recorder.durability = Durability.SYNC  # recordings survive a crash too
            if self.recordings is None:
                self.recordings = agent.recorder.store

    def _unwire(self, agent: Agent) -> None:
        original = self._original_hooks.pop(id(agent), None)
        if original is not None:
            agent.hooks = original

    # ------------------------------------------------------------------ start

    async def start(self) -> list[str]:
        """Finish what a dead process left in the recordings; the ids of the runs it ended.

        Runs left ``running`` (the process died between starting a run and storing the turn, or
        mid-turn) are ended ``failed`` with reason ``interrupted`` — except those a session's
        stored turn continues, which recovery ends on the session's next request. Runs once;
        the first turn waits for it, and the HTTP app calls it on startup.
        """
        if self.recordings is None:
            return []  # (no recordings yet: an agent factory's first instance brings them)
        if self._started is None:
            self._started = asyncio.get_running_loop().create_task(self._sweep())
        return await asyncio.shield(self._started)

    async def _sweep(self) -> list[str]:
        store = self.recordings
        if store is None or store.read_only:
            return []

        async def continued(session_id: str, run_id: str) -> bool:
            try:
                envelope = await self.sessions.load(session_id)
            except SessionStoreError:
                return False  # unreadable: nothing will continue it
            turn = envelope.turn if envelope is not None else None
            return turn is not None and turn.get("state") in ("running", "interrupted") and turn.get("run_id") == run_id

        ended = await end_abandoned_runs(Recorder(store, durability=Durability.SYNC), continued)
        if ended:
            log.warning("ended %d run(s) a stopped process left running: %s", len(ended), ", ".join(ended[:10]))
        return ended

    # ------------------------------------------------------------------ failure

    async def _store_failed(self) -> None:
        """A save failed: when the session store is broken, reopen it; when that fails too, fail the host."""
        if self.sessions.healthy or self.failed is not None:
            return  # one failed commit (its turn was refused), the store itself goes on
        async with self._reopening:
            if self.sessions.healthy:
                return
            try:
                await self.sessions.reopen()
                log.warning("the session store failed and was reopened; the turn that failed was reported")
            except Exception as exc:
                self._fail(f"the session store failed and could not be reopened: {exc}")

    def _check_recordings(self) -> None:
        store = self.recordings
        failure = store.write_failure if store is not None and not store.read_only else None
        if failure is not None:
            self._fail(f"the recordings store {store.path if store else ''} failed: {failure}")

    def _fail(self, reason: str) -> None:
        """Stop taking turns and tell whoever runs the host (``footprint serve`` exits non-zero)."""
        if self.failed is not None:
            return
        self.failed = self.sessions.policy.text(reason)
        log.error("the host cannot go on and exits to be restarted: %s", self.failed)
        self._draining = True
        for callback in self.on_failed:
            try:
                callback()
            except Exception:
                log.exception("an on_failed callback failed")

    # ------------------------------------------------------------------ turns

    async def handle(
        self,
        message: str = "",
        *,
        session_id: str | None = None,
        decision: str | None = None,
        turn_id: str | None = None,
        emit: Emit | None = None,
    ) -> TurnReply:
        """Run one turn: hydrate the session, continue it or start fresh, persist, reply.

        ``decision`` continues a session paused on a question. ``emit(event, data)`` receives
        stream events. Raises :class:`TurnRefusedError` subclasses for turns the host will not
        run, :class:`UnreadableEnvelopeError` when the session's stored data cannot be read.
        """
        if self.failed is not None:
            raise HostFailedError(f"this host is exiting to be restarted: {self.failed}", session_id=session_id)
        if self._draining:
            raise HostShuttingDownError("the host is shutting down and takes no new turns", session_id=session_id)
        if decision is not None and session_id is None:
            raise NotAwaitingError("a decision needs the session_id of the paused session")
        if session_id is not None:
            if self.on_concurrent_invoke == "refuse" and self._inflight.get(session_id, 0) > 0:
                raise SessionBusyError(
                    f"session {session_id!r} is already running a turn; wait for its reply "
                    f"(or start the host with `footprint serve --on-concurrent enqueue`, "
                    f"on_concurrent_invoke='enqueue' from Python)", session_id=session_id,
                )
            self._inflight[session_id] = self._inflight.get(session_id, 0) + 1
        slot = self._acquire(session_id)
        # the turn runs in a task of its own: a client that goes away does not cut a turn short
        task = asyncio.get_running_loop().create_task(
            self._admitted(slot, session_id, message, decision, turn_id, emit)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return await asyncio.shield(task)

    def _acquire(self, session_id: str | None) -> Slot:
        if self._shared is not None:
            slot = self._shared
        elif session_id is None:
            assert self._pool is not None
            if self._fallback is None:
                self._fallback = self._pool.build(None)
            slot = self._fallback
        else:
            assert self._pool is not None
            return self._pool.acquire(session_id)
        slot.users += 1
        return slot

    def _release(self, slot: Slot, session_id: str | None) -> None:
        if self._pool is not None and slot.key is not None:
            self._pool.release(slot)
        else:
            slot.users -= 1
        if session_id is not None:
            left = self._inflight.get(session_id, 1) - 1
            if left > 0:
                self._inflight[session_id] = left
            else:
                self._inflight.pop(session_id, None)

    async def _admitted(
        self, slot: Slot, session_id: str | None, message: str, decision: str | None, turn_id: str | None,
        emit: Emit | None,
    ) -> TurnReply:
        # Two locks: the SESSION's (its turns in order, from load to save) and the INSTANCE's (one
        # run at a time on it). Pooled, they are the same lock. Shared, the instance is held only
        # while it runs, so one session's save does not hold up every other session.
        if session_id is None:
            session_lock: asyncio.Lock | None = None
        elif self._shared is not None:
            session_lock = self._session_locks.setdefault(session_id, asyncio.Lock())
        else:
            session_lock = slot.lock
        try:
            if self._reopen is not None and not self._reopen.done():
                await asyncio.shield(self._reopen)
            if self.failed is not None:
                raise HostFailedError(f"this host is exiting to be restarted: {self.failed}", session_id=session_id)
            if self._started is None or not self._started.done():
                await self.start()
            if session_lock is None or session_id is None:
                async with slot.lock:
                    self._check_draining(session_id)
                    reply = await run_anonymous(slot.agent, message, emit)
                await self._turns.recorded(slot.agent)  # its reply names its run: recorded first
                return reply
            async with session_lock:
                self._check_draining(session_id)
                return await self._session_turn(slot, session_id, message, decision, turn_id, emit)
        except SessionStoreError as exc:
            if not isinstance(exc, VersionConflictError | UnreadableEnvelopeError) and not self.sessions.healthy:
                # this turn fails (its caller is told); the store is reopened beside it (in a task
                # of its own: a cancelled run may leave this one's cancellation pending), and the
                # next turns wait for that
                if self._reopen is None or self._reopen.done():
                    self._reopen = asyncio.get_running_loop().create_task(self._store_failed())
            raise
        finally:
            self._check_recordings()
            self._release(slot, session_id)
            if session_id is not None and session_id not in self._inflight:
                self._session_locks.pop(session_id, None)

    def _check_draining(self, session_id: str | None) -> None:
        if self._draining:
            raise HostShuttingDownError("the host is shutting down; this queued turn was not run",
                                        session_id=session_id)

    def _check_same_turn(self, marker: dict[str, Any], session_id: str, turn_id: str, text: str) -> None:
        """Refuse a ``turn_id`` sent again with another message (or decision): only an honest retry
        gets the stored reply. The stored text was masked by the store's policy, so the new text is
        compared masked the same way (a retry that quotes a secret is still a retry)."""
        stored = marker.get("text")
        if stored != text and stored != self.sessions.policy.text(text):
            raise TurnIdReusedError(session_id, turn_id)

    @staticmethod
    def _replayed(turn: dict[str, Any]) -> TurnReply:
        """The stored reply of a finished turn, sent again to a retry of it."""
        reply = TurnReply.from_dict(turn.get("reply") or {"status": "answered"})
        reply.replayed = True
        return reply

    def _instance_lock(self, slot: Slot) -> contextlib.AbstractAsyncContextManager[Any]:
        return slot.lock if self._shared is not None else contextlib.nullcontext()

    async def _session_turn(
        self, slot: Slot, session_id: str, message: str, decision: str | None, turn_id: str | None,
        emit: Emit | None,
    ) -> TurnReply:
        agent = slot.agent
        envelope = await self.sessions.load(session_id)  # UnreadableEnvelopeError fails this request
        marker = envelope.turn if envelope is not None else None
        sent = decision if decision is not None else message
        if turn_id and marker and marker.get("turn_id") == turn_id:
            self._check_same_turn(marker, session_id, turn_id, sent)
        if turn_id and marker and marker.get("turn_id") == turn_id and marker.get("state") == "done":
            return self._replayed(marker)
        if turn_id and envelope is not None and (not marker or marker.get("turn_id") != turn_id):
            earlier = await self.sessions.finished_turn(session_id, turn_id, sent)  # an id names one turn forever
            if earlier is not None:
                if not earlier[1]:
                    raise TurnIdReusedError(session_id, turn_id)
                return self._replayed({"reply": earlier[0]})
        recovered: dict[str, Any] | None = None
        if envelope is not None and needs_recovery(envelope, shared=self.sessions.shared, host_id=self.host_id):
            async with self._instance_lock(slot):
                done = await recover(self._turns, agent, envelope, emit)
            if done.status == "interrupted" or (turn_id and marker and marker.get("turn_id") == turn_id):
                return done  # stopped again, or this request is the retry of the interrupted turn
            recovered = {"run_id": done.run_id, "status": done.status, "answer": done.answer,
                         "question": done.question}
            if done.status != "answered":
                done.error = (f"{done.error + '; ' if done.error else ''}this request's message was not run: "
                              f"the session's interrupted turn ended {done.status}")
                return done
            envelope = await self.sessions.load(session_id)
        pause = None
        if decision is not None:
            if envelope is None:
                raise SessionNotFoundError(session_id)
            if envelope.pause is None:
                raise NotAwaitingError(f"session {session_id!r} is not waiting for a decision; send a message",
                                       session_id=session_id)
            pause = envelope.pause_state()
        elif envelope is not None and envelope.pause is not None:
            question = envelope.pause.get("question", "")
            raise AwaitingDecisionError(
                f"session {session_id!r} is waiting for a decision on: {one_line(question, 300)} (send it as "
                f"`decision`)",
                session_id=session_id,
            )
        kind, text = ("resume", decision) if decision is not None else ("run", message)
        async with self._instance_lock(slot):
            state = self._turns.hydrate(agent, session_id, envelope, kind=kind, text=text, turn_id=turn_id)
            if emit is not None:
                emit("turn", {"session_id": session_id, "kind": kind})
            try:
                result = await self._turns.run(state, pause=pause, emit=emit)
                outcome = self._turns.capture(state, result, recovered=recovered)
            finally:
                self._turns.release(state)
        return await self._turns.persist(state, *outcome)

    # ------------------------------------------------------------------ sessions

    async def _status(self, session_id: str, stored: str | None, running: bool,
                      envelope: Envelope | None = None) -> str | None:
        """A session's status as the API shows it: ``running`` while one of its turns runs (here, or
        on another host sharing the store, under that host's lease); ``interrupted`` for a turn a
        crash or a shutdown stopped, until the session's next request finishes it; else its last
        run's (``answered``, ``awaiting``, ``failed``, ``cancelled``).

        The stored status alone said ``running`` after a crash, beside ``running: false``, until the
        session's next request.
        """
        if running:
            return "running"
        if stored != "running":
            return stored
        if not self.sessions.shared:
            return "interrupted"  # one writer process, and it is not running it: a dead one's turn
        if envelope is None:
            try:
                envelope = await self.sessions.load(session_id)
            except SessionStoreError:
                return stored  # unreadable here: say what is stored
        turn = (envelope.turn if envelope is not None else None) or {}
        live = turn.get("state") == "running" and turn.get("host") != self.host_id \
            and turn.get("lease_until", 0) > time.time()
        return "running" if live else "interrupted"

    async def sessions_overview(self, *, limit: int = 1000) -> list[dict[str, Any]]:
        """Sessions as ``{session_id, active, running, last_activity, status}``, latest first
        (``running``: a turn of it runs on this host; ``status``: see :meth:`_status`)."""
        running = self.running_sessions()
        lines: dict[str, dict[str, Any]] = {}
        for s in await self.sessions.list(limit=limit):
            lines[s.session_id] = {"session_id": s.session_id, "active": self._is_active(s.session_id),
                                   "running": s.session_id in running, "last_activity": s.updated_at,
                                   "status": await self._status(s.session_id, s.status, s.session_id in running)}
        for sid in running - set(lines):
            lines[sid] = {"session_id": sid, "active": self._is_active(sid), "running": True,
                          "last_activity": None, "status": "running"}
        return sorted(lines.values(), key=lambda line: line["last_activity"] or float("inf"), reverse=True)

    def _is_active(self, session_id: str) -> bool:
        if self._pool is not None:
            return session_id in self._pool
        return session_id in self.running_sessions()

    async def session_info(self, session_id: str) -> dict[str, Any] | None:
        """One session's stored state: status, pause question, message count, version."""
        envelope = await self.sessions.load(session_id)
        if envelope is None:
            return None
        running = session_id in self.running_sessions()
        return {
            "session_id": session_id, "version": envelope.version,
            "status": await self._status(session_id, envelope.status, running, envelope),
            "awaiting": envelope.awaiting, "question": (envelope.pause or {}).get("question"),
            "messages": envelope.message_count, "created_at": envelope.created_at,
            "updated_at": envelope.updated_at, "last_run_id": envelope.last_run_id,
            "active": self._is_active(session_id), "running": running,
            "turn": (envelope.turn or {}).get("state"), "persisted_tool_results": sorted(envelope.tool_results),
        }

    async def delete_session(self, session_id: str) -> bool:
        """Forget a session (refused while it runs)."""
        if session_id in self.running_sessions():
            raise SessionBusyError(f"session {session_id!r} is running a turn; delete it afterwards",
                                   session_id=session_id)
        if self._pool is not None:
            self._pool.evict(session_id)
        return await self.sessions.delete(session_id)

    def health(self) -> dict[str, Any]:
        """Liveness and load figures."""
        active = len(self._pool) if self._pool is not None else int(self._shared is not None)
        status = "failed" if self.failed is not None else "draining" if self._draining else "ok"
        return {"status": status, "shape": self.shape,
                "durability": self.durability, "sessions_store": self.sessions.name,
                "active_sessions": active, "running_turns": len(self._tasks), "draining": self._draining,
                "failed": self.failed}

    # ------------------------------------------------------------------ shutdown

    def begin_shutdown(self, grace: float = 10.0) -> None:
        """Take no new turns; turns still running after ``grace`` seconds are stopped and stored.

        A stopped turn is stored as ``interrupted`` with what it finished, and the session's next
        request finishes it (see :mod:`hosting._recovery`) — a shutdown pauses a turn, it does
        not lose it.
        """
        if self._draining:
            return
        self._draining = True
        asyncio.get_running_loop().call_later(max(grace, 0.0), self._interrupt_running)

    def _interrupt_running(self) -> None:
        for state in list(self._turns.active.values()):
            state.interrupt = True
            state.agent.cancel()

    async def close(self, grace: float = 10.0) -> None:
        """Drain (see :meth:`begin_shutdown`), close every instance's tools, flush the stores."""
        if self._closed:
            return
        self.begin_shutdown(grace)
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=grace + 30)
        self._closed = True
        if self._pool is not None:
            await self._pool.close("closed")
            if self._fallback is not None:
                await self._fallback.agent.close("closed")
                self._unwire(self._fallback.agent)
        elif self._shared is not None:
            await self._shared.agent.close("closed")
            self._unwire(self._shared.agent)
        await self.sessions.flush()
        if self.recordings is not None and not self.recordings.read_only:
            await asyncio.to_thread(self.recordings.flush)
        if self._owns_sessions:
            await self.sessions.close()

    async def __aenter__(self) -> StandingAgent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def standing_agent(
    *,
    agent: Agent | None = None,
    agent_factory: AgentFactory | None = None,
    sessions: SessionStore | None = None,
    durability: str | Durability = "exit",
    on_concurrent_invoke: str = "refuse",
    max_active_sessions: int = 100,
    recordings: Store | None = None,
    host_id: str | None = None,
    lease_seconds: float = 60.0,
    close_sessions: bool | None = None,
) -> StandingAgent:
    """Serve an agent with per-session memory: ``agent`` (one shared instance) or ``agent_factory``.

    See :class:`StandingAgent`; serve it over HTTP with :func:`hosting.create_app` or
    :func:`hosting.serve`.
    """
    return StandingAgent(
        agent=agent, agent_factory=agent_factory, sessions=sessions, durability=durability,
        on_concurrent_invoke=on_concurrent_invoke, max_active_sessions=max_active_sessions,
        recordings=recordings, host_id=host_id, lease_seconds=lease_seconds, close_sessions=close_sessions,
    )

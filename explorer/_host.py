"""The explorer next to a standing-agent host: attached over HTTP, or running the host in-process.

``footprint explore --host URL`` attaches to a host in another process: runs come through its
read API (:class:`~explorer.HostSource`), and the host panel lists its sessions and sends turns.
``footprint up`` starts the host itself on a thread of this process (serving the same HTTP API, so
other processes can attach too) and opens the explorer on the host panel; the explorer reads the
store directly, since this process owns the file.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import uvicorn

from agent import Agent
from hosting import DuckDBSessions, HostAuthError, StandingAgent, create_app
from tracer import Durability, NotFoundError, Recorder, Store

from ._client import HostClient
from ._source import HostSource, StoreSource
from .app import ExplorerApp
from .errors import SourceError
from .sandbox import PersonaStore, sandbox_registry

if TYPE_CHECKING:
    from hosting import DurableHost


class HostLink(Protocol):
    """What the host panel needs of a host: its sessions, and a way to send a turn.

    A host that serves durable sessions has two more (:class:`~explorer._client.HostClient` has
    both; the panel does without them): ``durable_sessions()``, each ``{session_id, busy, steering,
    send, pending_calls}``, and ``durable_send(session_id, text)``, which queues a message on a
    durable session's send queue and answers as :meth:`send` does once its turn ended.
    """

    base_url: str

    def sessions(self) -> list[dict[str, Any]]:
        """The host's sessions: ``{session_id, active, running, last_activity, status}``."""
        ...

    def send(self, message: str, session_id: str | None = None, decision: str | None = None) -> dict[str, Any]:
        """Send a turn (or a decision for a paused session) and wait for the reply."""
        ...


def attach(url: str, *, token: str | None = None, run_ref: str | None = None,
           poll_interval: float | None = 2.0) -> ExplorerApp:
    """An explorer over the host at ``url``, checked before any screen opens: reachable, and
    taking ``token`` (a wrong or missing one raises :class:`~hosting.HostAuthError`)."""
    client = HostClient(url, token)
    try:
        client.health()  # reachable (the health route never needs the token)
        _check_token(client, token)
        run_id = client.resolve_run_id(run_ref) if run_ref else None
    except Exception:
        client.close()
        raise
    return ExplorerApp(HostSource(client), host=client, run_id=run_id, poll_interval=poll_interval,
                       start="runs" if run_id else "host")


def _check_token(client: HostClient, token: str | None) -> None:
    """One authenticated read, so a refused token fails here and not inside the app."""
    try:
        client.count_runs()
    except HostAuthError as exc:
        advice = ("it wants one: pass --token or set FOOTPRINT_TOKEN" if token is None
                  else "check --token (or FOOTPRINT_TOKEN) against the token the host was started with")
        raise HostAuthError(f"{exc}; {advice}", status=exc.status, code=exc.code) from None
    except NotFoundError:
        pass  # a host that records no runs: the token was taken


AgentBuilder = Callable[[Recorder], Agent]


class InProcessHost:
    """A standing-agent host served over HTTP from a thread of this process.

    Use as a context manager: the server is up (``url`` known) inside the block, and stopped —
    running turns finished or stored as interrupted, sessions flushed — when it exits. With
    ``durable``, it serves those durable sessions too (under ``/v1/durable``, as ``footprint serve
    --durable`` does).
    """

    def __init__(self, store: Store, build: AgentBuilder, *, bind: str = "127.0.0.1", port: int = 0,
                 token: str | None = None, durability: str = "exit", grace: float = 10.0,
                 durable: DurableHost | None = None) -> None:
        recorder = Recorder(store, durability=Durability(durability))
        self.store = store
        self.host = StandingAgent(
            agent_factory=lambda: build(recorder), sessions=DuckDBSessions(store), durability=durability,
            recordings=store, close_sessions=True,
        )
        self.token = token
        config = uvicorn.Config(
            create_app(self.host, token=token, shutdown_grace=grace, durable=durable), host=bind, port=port,
            log_level="critical", access_log=False, lifespan="on",
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="footprint-host", daemon=True)
        self.url = ""

    def __enter__(self) -> InProcessHost:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise SourceError("the host did not start (is the port free?)")
            time.sleep(0.02)
        sock = self._server.servers[0].sockets[0]
        host, port = sock.getsockname()[:2]
        self.url = f"http://{host}:{port}"
        return self

    def client(self) -> HostClient:
        """A client of this host's API."""
        return HostClient(self.url, self.token)

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=60)


def up(db: str | Path, build: AgentBuilder, *, port: int = 8080, token: str | None = None,
       durability: str = "exit", on_started: Callable[[str], None] | None = None) -> None:
    """Run a host on ``db`` and the explorer in this process until the explorer is closed."""
    store = Store.open(db)
    try:
        with InProcessHost(store, build, port=port, token=token, durability=durability) as running:
            if on_started is not None:
                on_started(running.url)
            client = running.client()
            try:
                app = ExplorerApp(
                    StoreSource(store, live=True), host=client, start="host",
                    personas=PersonaStore(store, known_tools=sandbox_registry().names()),
                )
                # the URL first: it is what another process attaches with, and a narrow title cuts its end
                app.sub_title = f"host {running.url} · {store.path}"
                app.run()
            finally:
                client.close()
    finally:
        store.close()

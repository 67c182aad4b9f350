"""The hosting commands of the `footprint` CLI: `footprint serve`.

Importing this module imports only click: ``serve`` imports the store, the agent and the session stores when it
runs, so that ``footprint serve --help`` or a usage error is answered at once.
"""

from __future__ import annotations

import importlib
import os
import re
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tracer.cli import DEFAULT_PATH

from .errors import HostingError

if TYPE_CHECKING:
    from agent import Agent
    from tracer import Recorder, RedactionPolicy, Store

    from .sessions import PostgresSessions, SessionStore

#: hosting.sessions.DEFAULT_CACHE_BYTES in megabytes (importing the session stores imports DuckDB and
#: psycopg; tests/test_package_fronts.py checks they agree)
DEFAULT_CACHE_MB = 64

AGENT_HELP = (
    "The agent to serve: `demo` (the personal assistant: the offline demo model, or OpenAI when "
    "OPENAI_API_KEY is set), `echo` (repeats the message; for trying the host), or MODULE:CALLABLE, "
    "a function taking `recorder=` and returning an agent.Agent."
)


def register(group: click.Group) -> None:
    """Add the hosting commands to ``group``."""
    group.add_command(serve_command)


def host_token(token: str | None) -> str | None:
    """The token a host requires; an empty one is refused (no client could send it: every request would be 401)."""
    if token is not None and not token.strip():
        raise click.BadParameter("an empty token would refuse every request: give one, or leave --token and "
                                 "FOOTPRINT_TOKEN unset for a host without one", param_hint="--token")
    if token is not None and len(token) < MIN_TOKEN_LENGTH:
        # the host masks its token in everything it records: a token 'T' masked every capital T
        raise click.BadParameter(f"a token of {len(token)} character(s) is too easy to guess, and the host masks its "
                                 f"token in everything it records, so ordinary text holding it would be masked too: "
                                 f"give at least {MIN_TOKEN_LENGTH} characters", param_hint="--token")
    return token


MIN_TOKEN_LENGTH = 6


def agent_builder(spec: str) -> tuple[Callable[[Recorder], Agent], str]:
    """A builder for the ``--agent`` spec (``footprint serve`` and ``footprint up``) and a line
    describing the model it uses; a spec that names nothing buildable is a :class:`click.BadParameter`."""
    from agent import Agent

    if spec == "demo":
        from agent.demo import build_demo_agent, default_provider, load_scenario

        scenario = load_scenario()
        provider = default_provider()
        described = "OpenAI" if os.environ.get("OPENAI_API_KEY") else "the offline demo model"
        return (lambda recorder: build_demo_agent(scenario, provider=provider, recorder=recorder)), described
    if spec == "echo":
        from agent.providers import FunctionModel

        def echo(request: Any) -> str:
            return f"echo: {request.last_user_text()}"

        model = FunctionModel(echo, name="echo")
        return (lambda recorder: Agent("echo", provider=model, recorder=recorder)), "an echo model"
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise click.BadParameter(f"{spec!r} is not demo, echo or MODULE:CALLABLE", param_hint="--agent")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise click.BadParameter(f"cannot load {spec!r}: {exc}", param_hint="--agent") from exc
    except Exception as exc:  # the module's file is not Python (a SyntaxError: not UTF-8, a typo) or its code failed
        raise click.BadParameter(f"cannot load {spec!r}: importing {module_name} failed: {type(exc).__name__}: {exc}",
                                 param_hint="--agent") from exc
    try:
        factory = getattr(module, attribute)
    except AttributeError as exc:
        raise click.BadParameter(f"cannot load {spec!r}: {exc}", param_hint="--agent") from exc
    if not callable(factory):
        raise click.BadParameter(f"{spec!r} is not callable", param_hint="--agent")

    def build(recorder: Recorder) -> Agent:
        agent = factory(recorder=recorder)
        if not isinstance(agent, Agent):
            raise TypeError(f"it returned {type(agent).__name__}, not an agent.Agent")
        return agent

    return build, spec


def host_redaction(token: str | None) -> RedactionPolicy | None:
    """What the host's recorder and session store mask: the default policy (None), plus ``token``
    when the host requires one. (Each gets a policy of its own: a policy's caches are not shared.)"""
    if token is None:
        return None
    from ._token_policy import HostTokenPolicy

    return HostTokenPolicy.with_extra(patterns=[re.escape(token)])


def _first_agent(build: Callable[[Recorder], Agent], spec: str, recorder: Recorder) -> Agent:
    """One agent from ``build``, so a --agent that cannot make one stops the host before it serves."""
    try:
        return build(recorder)
    except Exception as exc:
        raise click.BadParameter(f"{spec!r} cannot build an agent: {type(exc).__name__}: {exc}",
                                 param_hint="--agent") from None


#: a libpq keyword DSN ("host=db port=5432 dbname=app user=app"): each of its words is KEY=VALUE
_KEYWORD_DSN = re.compile(r"\s*[a-z_]+\s*=\s*\S*(\s+[a-z_]+\s*=\s*\S*)*\s*")


def _is_postgres_dsn(spec: str) -> bool:
    """True when ``spec`` names a PostgreSQL database: a postgresql:// URL or a libpq keyword DSN
    (anything else given to --sessions or --agents-store is a DuckDB file)."""
    return (spec.startswith(("postgresql://", "postgres://")) or "dbname=" in spec
            or _KEYWORD_DSN.fullmatch(spec) is not None)


def _sessions_store(
    spec: str, store: Store, schema: str = "public", cache_mb: int = DEFAULT_CACHE_MB,
    policy: RedactionPolicy | None = None,
) -> SessionStore:
    from .sessions import DuckDBSessions, InMemorySessions

    cache_bytes = cache_mb * 1024 * 1024
    if spec == "duckdb":
        return DuckDBSessions(store, cache_bytes=cache_bytes, policy=policy)
    if spec == "memory":
        return InMemorySessions(policy=policy)
    if _is_postgres_dsn(spec):
        return _postgres_sessions(spec, schema, cache_mb, policy)
    if Path(spec).resolve() == Path(store.path).resolve():
        return DuckDBSessions(store, cache_bytes=cache_bytes, policy=policy)
    return DuckDBSessions(path=spec, cache_bytes=cache_bytes, policy=policy)


def _postgres_sessions(dsn: str, schema: str, cache_mb: int, policy: RedactionPolicy | None = None) -> PostgresSessions:
    """The PostgreSQL session store, once it is reached: a host that cannot store a turn does not
    start (SessionStoreError: exit 1)."""
    from .sessions import PostgresSessions

    try:
        sessions = PostgresSessions(dsn, schema=schema, cache_bytes=cache_mb * 1024 * 1024, policy=policy)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--sessions-schema") from None
    sessions.check_reachable()
    return sessions


@click.command("serve")
@click.option("--db", default=DEFAULT_PATH, envvar="FOOTPRINT_DB", show_default=True,
              help="The footprint store the host records into and owns (a DuckDB file).")
@click.option("--host", "bind", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535), help="The port.")
@click.option("--token", envvar="FOOTPRINT_TOKEN", default=None, callback=lambda c, p, v: host_token(v),
              help="Require `Authorization: Bearer TOKEN` on every route but /v1/health (env FOOTPRINT_TOKEN).")
@click.option("--durability", type=click.Choice(["exit", "sync"]), default="exit", show_default=True,
              help="exit: persist a session when its run ends; sync: after every inference and tool call too.")
@click.option("--agent", "agent_spec", default="demo", show_default=True, help=AGENT_HELP)
@click.option("--shape", type=click.Choice(["pooled", "shared"]), default="pooled", show_default=True,
              help="pooled: one agent instance per active session, sessions in parallel; shared: one instance.")
@click.option("--sessions", "sessions_spec", default="duckdb", show_default=True,
              help="Where sessions live: duckdb (in --db), memory, another DuckDB file, or a PostgreSQL DSN "
                   "(postgresql://... or host=... dbname=...).")
@click.option("--sessions-schema", default="public", show_default=True,
              help="The PostgreSQL schema of the session tables (with a postgresql:// --sessions).")
@click.option("--max-active-sessions", default=100, show_default=True, type=click.IntRange(1),
              help="Idle agent instances kept (pooled shape).")
@click.option("--session-cache-mb", default=DEFAULT_CACHE_MB, show_default=True, type=click.IntRange(0),
              help="Megabytes of conversations kept in memory (as stored), the least recently used let go first: "
                   "a session let go is read back from --sessions on its next turn. 0 keeps none.")
@click.option("--on-concurrent", type=click.Choice(["refuse", "enqueue"]), default="refuse", show_default=True,
              help="A second turn of a session while one runs: refuse it (409) or queue it.")
@click.option("--grace", default=10.0, show_default=True, type=click.FloatRange(0),
              help="Seconds running turns get after SIGTERM before they are stopped and stored.")
@click.option("--request-timeout", default=60.0, show_default=True, type=click.FloatRange(0, min_open=True),
              help="Seconds a client has to send a whole request (headers and body); a slower one gets 408.")
@click.option("--host-id", default=None, help="This host's name in turn markers (default: hostname:port:db).")
@click.option("--gateway", "with_gateway", is_flag=True,
              help="Also serve stored agents under /api/agents (the agents gateway); implied by --agents-seed.")
@click.option("--agents-seed", type=click.Path(dir_okay=False), default=None,
              help="The default agents JSON file the gateway seeds (default: footprint's bundled defaults).")
@click.option("--agents-store", default="duckdb", show_default=True,
              help="Where stored agents live: duckdb (in --db), another DuckDB file, or a PostgreSQL DSN "
                   "(postgresql://... or host=... dbname=...).")
@click.option("--durable/--no-durable", default=False, show_default=True,
              help="Also serve durable sessions of the same agent under /v1/durable (steer, send, abort, compact, "
                   "events), stored beside --sessions; unfinished ones continue after a restart.")
@click.option("--durable-loaded", default=1000, show_default=True, type=click.IntRange(1),
              help="Idle durable sessions kept loaded (with --durable); beyond it the least recently used are "
                   "let go and loaded again from --sessions by their next message.")
def serve_command(
    db: str, bind: str, port: int, token: str | None, durability: str, agent_spec: str, shape: str,
    sessions_spec: str, sessions_schema: str, max_active_sessions: int, session_cache_mb: int, on_concurrent: str,
    grace: float, request_timeout: float, host_id: str | None, with_gateway: bool, agents_seed: str | None, agents_store: str, durable: bool,
    durable_loaded: int,
) -> None:
    """Start the standing-agent host: sessions, turns over HTTP, and the read API for recordings.

    With --gateway, stored agents too: created, edited and chatted with under /api/agents, on the
    --agent's model (see docs/gateway.md).
    """
    from tracer import Durability, Recorder, Store

    from ._serve import serve
    from ._standing import StandingAgent

    build, described = agent_builder(agent_spec)
    # first what can fail without --db: an address it cannot listen on, a PostgreSQL store it cannot
    # reach or a bad --agents-seed stop it before the store file is created
    sock = _bind(bind, port)
    serve_gateway = with_gateway or bool(agents_seed)
    try:
        reached = (_postgres_sessions(sessions_spec, sessions_schema, session_cache_mb, host_redaction(token))
                   if _is_postgres_dsn(sessions_spec) else None)
        seed = _seed_file(agents_seed) if serve_gateway else None
        agents_postgres = _postgres_agents(agents_store) if serve_gateway and _is_postgres_dsn(agents_store) else None
        store = Store.open(db)
    except BaseException:
        sock.close()
        raise
    try:
        recorder = Recorder(store, durability=Durability(durability), redaction=host_redaction(token))
        first = _first_agent(build, agent_spec, recorder)
        sessions = reached if reached is not None else _sessions_store(sessions_spec, store, sessions_schema,
                                                                        session_cache_mb, host_redaction(token))
        if shape == "shared":
            host = StandingAgent(agent=first, sessions=sessions, durability=durability,
                                 on_concurrent_invoke=on_concurrent, recordings=store, close_sessions=True,
                                 host_id=host_id or _host_id(port, db))
        else:
            host = StandingAgent(agent_factory=lambda: build(recorder), sessions=sessions, durability=durability,
                                 on_concurrent_invoke=on_concurrent, max_active_sessions=max_active_sessions,
                                 recordings=store, close_sessions=True, host_id=host_id or _host_id(port, db))
        gateway = None
        if seed is not None:
            gateway = _gateway(first.provider, agents_store, agents_postgres, seed, store, recorder, sessions,
                               durability, on_concurrent, max_active_sessions, host_id or _host_id(port, db))
        actual_port = sock.getsockname()[1]

        def started(_: Any) -> None:
            click.echo(
                f"footprint host on http://{bind}:{actual_port} — agent {agent_spec} ({described}), "
                f"{shape} shape, sessions in {getattr(sessions, 'location', sessions.name)}, "
                f"durability {durability}{', token required' if token else ''}"
                f"{', stored agents under /api/agents' if gateway else ''}. Ctrl-C or SIGTERM stops it.",
                err=True,
            )

        durable_host = _durable_host(sessions_spec, store, build, recorder, durable_loaded) if durable else None
        serve(host, token=token, shutdown_grace=grace, sock=sock, on_started=started, log_level="warning",
              gateway=gateway, durable=durable_host, request_timeout=request_timeout)
        click.echo("footprint host stopped; sessions and recordings flushed.", err=True)
    finally:
        store.close()
        sock.close()


def _postgres_agents(dsn: str) -> Any:
    """The PostgreSQL agents repository, once it is reached: as the session store, a host that
    cannot read its agents does not start (AgentStoreError: exit 1)."""
    from .gateway import PostgresAgents

    repository = PostgresAgents(dsn)
    repository.check_reachable()
    return repository


def _seed_file(agents_seed: str | None) -> Path:
    """The default agents file, read: a bad one is refused, with what and where, before the host starts."""
    from .gateway._seeds import BUNDLED_SEED_FILE, load_seed_file

    seed = Path(agents_seed) if agents_seed else BUNDLED_SEED_FILE
    load_seed_file(seed)
    return seed


def _gateway(
    provider: Any, agents_store: str, postgres: Any, seed: Path, store: Store, recorder: Recorder,
    sessions: SessionStore, durability: str, on_concurrent: str, max_active_sessions: int, host_id: str,
) -> Any:
    """The agents gateway on the host's model, stores and durability (``postgres``: the
    PostgreSQL repository :func:`_postgres_agents` reached, when --agents-store names one)."""
    from .gateway import DuckDBAgents, Gateway, GatewaySettings

    if postgres is not None:
        repository: Any = postgres
    elif agents_store == "duckdb" or Path(agents_store).resolve() == Path(store.path).resolve():
        repository = DuckDBAgents(store)
    else:
        repository = DuckDBAgents(path=agents_store)
    return Gateway(repository, settings=GatewaySettings({provider.name: provider}, provider.name),
                   sessions=sessions, recorder=recorder, durability=durability, on_concurrent_invoke=on_concurrent,
                   max_active_sessions=max_active_sessions, seed_file=seed, host_id=host_id)


def _durable_host(spec: str, store: Store, build: Callable[[Recorder], Agent], recorder: Recorder,
                  max_loaded: int) -> Any:
    """Durable sessions of the served agent, in the storage --sessions names (tables ``fp_durable_*``)."""
    from agent.durable import InMemoryPersistence, SessionPersistence

    from ._durable import DurableHost, agent_factory
    from .sessions import DuckDBPersistence, PostgresPersistence

    persistence: SessionPersistence
    policy = recorder.redaction  # (the host's: its own --token masked too)
    if spec == "memory":
        persistence = InMemoryPersistence()
    elif _is_postgres_dsn(spec):
        persistence = PostgresPersistence(spec, prefix="fp_durable", policy=policy)
    elif spec == "duckdb" or Path(spec).resolve() == Path(store.path).resolve():
        persistence = DuckDBPersistence(store, prefix="fp_durable", policy=policy)
    else:
        persistence = DuckDBPersistence(path=spec, prefix="fp_durable", policy=policy)
    return DurableHost(agent_factory(build, recorder), persistence, max_loaded=max_loaded)


def _host_id(port: int, db: str) -> str:
    return f"{socket.gethostname()}:{port}:{os.path.abspath(db)}"


def _bind(bind: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((bind, port))
    except OSError as exc:
        sock.close()
        raise HostingError(f"cannot listen on {bind}:{port}: {exc.strerror or exc}") from exc
    sock.set_inheritable(True)
    if sys.platform != "win32":
        sock.listen(2048)
    return sock

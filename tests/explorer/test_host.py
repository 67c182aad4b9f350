"""The explorer next to a host: in one process (footprint up) and attached over HTTP (explore --host)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len
from textual.widgets import Input, RichLog, Static

from agent import Agent
from agent.providers import FunctionModel
from explorer import ExplorerApp, HostSource, StoreSource
from explorer._host import InProcessHost, attach
from explorer.components.runs_table import RunsTable
from explorer.components.sessions_table import SessionRef, SessionsTable
from explorer.components.snapshot_view import SnapshotView
from explorer.screens.host import HostScreen
from explorer.screens.run import RunScreen
from explorer.screens.why import WhyScreen
from tracer import ItemKind, Recorder, Store


def _echo(request: Any) -> str:
    users = [ci.item.text for ci in request.context if ci.item.kind == ItemKind.USER]
    return f"echo: {users[-1]} (message {len(users)})"


def _echo_agent(recorder: Recorder) -> Agent:
    return Agent("echo", provider=FunctionModel(_echo, name="echo"), recorder=recorder)


@pytest.fixture
def running(tmp_path: Path) -> Iterator[InProcessHost]:
    store = Store.open(tmp_path / "host.duckdb")
    try:
        with InProcessHost(store, _echo_agent, port=0) as host:
            yield host
    finally:
        store.close()


def _log(screen: Any) -> str:
    return "\n".join(line.text for line in screen.query_one(RichLog).lines)


async def test_chat_with_a_session_and_watch_its_run_appear(running: InProcessHost, settle: Any) -> None:
    client = running.client()
    app = ExplorerApp(StoreSource(running.store, live=True), host=client, start="host", poll_interval=None)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, HostScreen)
        await pilot.press(*"hello host", "enter")
        await settle(pilot, rounds=8)
        assert "agent: echo: hello host (message 1)" in _log(screen)
        session = screen.session
        assert session is not None and session.startswith("chat-")
        sessions = screen.query_one(SessionsTable)
        assert session in [s["session_id"] for s in sessions.sessions]
        runs = screen.query_one(RunsTable)
        assert [r.input for r in runs.runs.values()] == ["hello host"]
        await pilot.press(*"and again", "enter")
        await settle(pilot, rounds=8)
        assert "echo: and again (message 2)" in _log(screen), "the session remembers the first turn"
        assert len(runs.runs) == 2
        await pilot.press("ctrl+o")
        await settle(pilot)
        assert getattr(app.screen, "run_id", None) == screen.last_run
    client.close()


async def _pick(pilot: Any, settle: Any, screen: HostScreen, session_id: str) -> None:
    """Move the sessions table's cursor (j/k) until ``session_id`` is the session shown."""
    table = screen.query_one(SessionsTable)
    order = [s["session_id"] for s in table.sessions]
    assert session_id in order, order
    for _ in range(2 * len(order) + 2):
        if screen.session == session_id:
            return
        here = order.index(screen.session) if screen.session in order else -1
        await pilot.press("j" if here < order.index(session_id) else "k")
        await settle(pilot)
    raise AssertionError(f"could not pick {session_id}: at {screen.session}, sessions {order}")


async def test_picking_another_session_shows_its_own_transcript_and_earlier_turns(
    running: InProcessHost, settle: Any
) -> None:
    client = running.client()
    client.send("hello from alice", session_id="alice")  # turns made before the explorer opened
    client.send("hello from bob", session_id="bob")
    running.store.flush()
    app = ExplorerApp(StoreSource(running.store, live=True), host=client, start="host", poll_interval=None)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, HostScreen)
        sessions = screen.query_one(SessionsTable)
        sessions.focus()
        await _pick(pilot, settle, screen, "alice")
        assert "you: hello from alice" in _log(screen) and "echo: hello from alice (message 1)" in _log(screen)
        assert "bob" not in _log(screen)  # the earlier turns of the session picked, and only those
        screen.query_one("#host-input").focus()
        await pilot.press(*"second for alice", "enter")
        await settle(pilot, rounds=8)
        assert "echo: second for alice (message 2)" in _log(screen)
        sessions.focus()
        await _pick(pilot, settle, screen, "bob")
        shown = _log(screen)
        assert "hello from bob" in shown and "alice" not in shown  # the transcript switched with the session
        screen.query_one("#host-input").focus()
        await pilot.press(*"for bob", "enter")
        await settle(pilot, rounds=8)
        assert "echo: for bob (message 2)" in _log(screen)
        assert "for bob" not in "\n".join(line.plain for line in screen.transcripts[SessionRef("alice")])
        sessions.focus()
        await _pick(pilot, settle, screen, "alice")
        assert "echo: second for alice (message 2)" in _log(screen) and "bob" not in _log(screen)
    client.close()


async def test_attach_reads_runs_and_why_through_the_read_api(running: InProcessHost, settle: Any) -> None:
    client = running.client()
    client.send("first", session_id="s1")
    client.close()
    app = attach(running.url, poll_interval=None)
    assert isinstance(app.source, HostSource)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, HostScreen)
        await pilot.press("escape")
        table = app.screen.query_one(RunsTable)
        await settle(pilot)
        [run] = table.runs.values()
        assert run.input == "first" and run.session_id == "s1"
        await pilot.press("w")
        await settle(pilot)
        why = app.screen
        assert isinstance(why, WhyScreen) and why.evidence is not None
        assert why.evidence.root.text == "echo: first (message 1)"
    app.host.close()  # type: ignore[union-attr]


async def test_attach_opens_a_run_a_stage_at_a_time_through_the_read_api(
    running: InProcessHost, settle: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("explorer._prefetch.WHOLE_RUN_STAGES", 0)  # read it as a long run is read
    client = running.client()
    run_id = client.send("first", session_id="s1")["run_id"]
    last = client.send("second", session_id="s1")["run_id"]
    client.close()
    running.store.flush()
    whole = running.store.load_run(last)
    app = attach(running.url, poll_interval=None)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        app.open_run(whole.run.id)
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen) and screen.data is not None
        assert screen.data.stages == whole.stages and screen.data.read < {s.id for s in whole.stages}
        assert "echo: second (message 2)" in str(screen.query_one("#stage-info-body").render())
        inference = whole.inferences()[-1]
        screen.select_stage(inference.id)
        await settle(pilot)
        view = screen.query_one(SnapshotView)
        assert not view.waiting and view.table.row_count == len(whole.inputs[inference.id])
        await pilot.press("left_square_bracket")  # the session's previous run
        await settle(pilot)
        assert isinstance(app.screen, RunScreen) and app.screen.run_id == run_id
    app.host.close()  # type: ignore[union-attr]


def _durable_sessions(store: Store) -> Any:
    """Durable sessions of an echo agent recording into ``store`` (as footprint serve --durable serves them)."""
    from agent.durable import AgentProviders, DurableAgent, InMemoryPersistence
    from hosting import DurableHost

    recorder = Recorder(store)
    model = FunctionModel(lambda request: f"durable echo: {request.last_user_text()}", name="echo")
    providers = AgentProviders().add("echo", model, "echo")
    return DurableHost(lambda session_id, persistence: DurableAgent(
        session_id, providers=providers, provider="echo", persistence=persistence, recorder=recorder,
        name="durable-echo"), InMemoryPersistence())


async def test_a_durable_session_is_a_row_of_its_own_and_its_chat_goes_to_its_send_queue(
    tmp_path: Path, settle: Any
) -> None:
    """A host serving both kinds may hold a standing and a durable session of the same id: two
    conversations, listed apart, each talked to through its own route."""
    store = Store.open(tmp_path / "host.duckdb")
    durable = _durable_sessions(store)
    try:
        with InProcessHost(store, _echo_agent, port=0, durable=durable) as running:
            client = running.client()
            client.send("standing hello", session_id="same")
            reply = await asyncio.to_thread(client.durable_send, "same", "durable hello")
            assert reply["status"] == "answered" and reply["answer"] == "durable echo: durable hello", reply
            store.flush()
            app = ExplorerApp(StoreSource(store, live=True), host=client, start="host", poll_interval=None)
            async with app.run_test(size=(100, 30)) as pilot:
                await settle(pilot)
                screen = app.screen
                assert isinstance(screen, HostScreen)
                table = screen.query_one(SessionsTable)
                kinds = [(s["session_id"], s["durable"]) for s in table.sessions]
                assert kinds == [("same", False), ("same", True)], kinds
                cells = [[str(c) for c in table.get_row_at(row)] for row in range(table.row_count)]
                assert [row[1] for row in cells] == ["standing", "durable"]  # the kind, visibly
                assert cells[1][3] != "-", "a durable session's last use: its last recorded run"
                table.focus()
                await pilot.press("down")
                await settle(pilot)
                assert screen.picked == SessionRef("same", durable=True)
                assert "durable same" in str(screen.query_one("#host-session-title").render())
                screen.query_one("#host-input").focus()
                await pilot.press(*"second", "enter")
                await settle(pilot, rounds=8)
                assert "agent: durable echo: second" in _log(screen)
                history = [ci.item.text for ci in durable.sessions["same"].history]
                assert history[-2:] == ["second", "durable echo: second"], history
                # the standing session of the same id never heard it: this is its second message
                assert client.send("again", session_id="same")["answer"] == "echo: again (message 2)"
                said = {ref: "\n".join(line.plain for line in lines) for ref, lines in screen.transcripts.items()}
                assert "durable echo: second" in said[SessionRef("same", durable=True)]
                assert "durable echo: second" not in said[SessionRef("same")]  # the reply landed in its own
            client.close()
    finally:
        store.close()


def test_sending_to_a_durable_session_of_a_host_that_serves_none_says_so(running: InProcessHost) -> None:
    from hosting import HostClientError

    with running.client() as client:
        assert client.durable_sessions() == []
        with pytest.raises(HostClientError, match="does the host serve durable sessions"):
            client.durable_send("chat-1", "hello")


def test_attach_names_a_host_that_is_not_there() -> None:
    from hosting import HostClientError

    with pytest.raises(HostClientError, match="cannot reach the footprint host"):
        attach("http://127.0.0.1:9")


@pytest.mark.parametrize(("token", "advice"), [("wrong", "check --token"), (None, "it wants one: pass --token")])
def test_explore_with_a_refused_token_fails_before_the_app_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], token: str | None,
    advice: str,
) -> None:
    from explorer.cli import main

    opened: list[ExplorerApp] = []
    monkeypatch.delenv("FOOTPRINT_TOKEN", raising=False)
    monkeypatch.setattr("explorer._commands.has_terminal", lambda: True)
    monkeypatch.setattr(ExplorerApp, "run", lambda self, *a, **k: opened.append(self))
    store = Store.open(tmp_path / "host.duckdb")
    try:
        with InProcessHost(store, _echo_agent, port=0, token="right") as host:
            with pytest.raises(SystemExit) as exited:
                main(["explore", "--host", host.url, *(["--token", token] if token else [])])
    finally:
        store.close()
    out, err = capsys.readouterr()
    assert exited.value.code == 1 and not opened and out == ""
    assert err.startswith(f"footprint: error: {host.url}: ") and advice in err, err
    assert "Traceback" not in err and "right" not in err


def test_up_titles_the_app_with_the_host_url_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With --port 0 the title is where the port shows: it leads, so 80 columns do not cut it off."""
    from explorer._host import up

    titles: list[str] = []
    monkeypatch.setattr(ExplorerApp, "run", lambda self, *a, **k: titles.append(self.sub_title))
    up(tmp_path / "up.duckdb", _echo_agent, port=0)
    assert len(titles) == 1 and titles[0].startswith("host http://127.0.0.1:"), titles
    port = titles[0].split(" ")[1].rsplit(":", 1)[1]
    assert port.isdigit() and int(port) > 0 and titles[0].endswith(str(tmp_path / "up.duckdb"))


def test_up_takes_the_agent_spec_serve_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from explorer.cli import cli

    monkeypatch.setattr("explorer._commands.has_terminal", lambda: True)
    for spec, says in (("nonsense", "'nonsense' is not demo, echo or MODULE:CALLABLE"),
                       ("no_such_module_xyz:build", "cannot load 'no_such_module_xyz:build'")):
        result = CliRunner().invoke(cli, ["up", "--agent", spec, "--port", "0"])
        assert result.exit_code == 2 and says in result.output, result.output


class FakeHost:
    """A host link with fixed sessions and a canned reply, for a stable snapshot."""

    base_url = "http://127.0.0.1:8080"

    def sessions(self) -> list[dict[str, Any]]:
        return [
            {"session_id": "trip-7f3a", "active": True, "running": False, "last_activity": 1741943160.0,
             "status": "answered"},
            {"session_id": "support-0042", "active": False, "running": False, "last_activity": 1741943820.0,
             "status": "answered"},
        ]

    def durable_sessions(self) -> list[dict[str, Any]]:
        return [{"session_id": "trip-7f3a", "busy": False, "steering": 1, "send": 2, "pending_calls": 0}]

    def send(self, message: str, session_id: str | None = None, decision: str | None = None) -> dict[str, Any]:
        return {"status": "answered", "session_id": session_id, "run_id": "r-000003",
                "answer": "How about Café Einstein near your home in Berlin, tomorrow at 10:00?"}


def test_host_panel(snap_compare: Any, sample_path: Path, open_app: Callable[..., ExplorerApp]) -> None:
    """The host panel: live sessions, the selected session's runs, and a chat."""
    app = open_app(sample_path, read_only=True, host=FakeHost(), start="host")

    async def run_before(pilot: Any) -> None:
        for _ in range(3):
            await pilot.app.workers.wait_for_complete()
            await pilot.pause()
        await pilot.press(*"Suggest a café near my home", "enter")
        for _ in range(4):
            await pilot.app.workers.wait_for_complete()
            await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


class PausingHost(FakeHost):
    """A host whose session pauses for a decision, then answers; it keeps what it was sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str | None, str | None]] = []

    def send(self, message: str, session_id: str | None = None, decision: str | None = None) -> dict[str, Any]:
        self.sent.append((message, session_id, decision))
        if decision is None:
            return {"status": "awaiting", "session_id": session_id, "run_id": "r-000004",
                    "question": "Refund order 1234 for $42.00?"}
        return {"status": "answered", "session_id": session_id, "run_id": "r-000004", "answer": "Refunded."}


async def test_a_paused_turn_takes_the_next_line_as_its_decision(
    open_app: Callable[..., ExplorerApp], sample_path: Path, settle: Any
) -> None:
    host = PausingHost()
    app = open_app(sample_path, read_only=True, host=host, start="host")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, HostScreen) and screen.session == "trip-7f3a"
        await pilot.press(*"refund it", "enter")
        await settle(pilot)
        assert screen.awaiting == SessionRef("trip-7f3a") and "Refund order 1234" in _log(screen)
        await pilot.press(*"yes", "enter")
        await settle(pilot)
        assert host.sent == [("refund it", "trip-7f3a", None), ("", "trip-7f3a", "yes")]
        assert screen.awaiting is None and "agent: Refunded." in _log(screen)


class EmptyHost(FakeHost):
    """A host with no sessions yet: the panel opens with none picked."""

    def sessions(self) -> list[dict[str, Any]]:
        return []

    def durable_sessions(self) -> list[dict[str, Any]]:
        return []


async def test_the_panel_s_hints_fit_an_80_column_terminal(
    sample_path: Path, open_app: Callable[..., ExplorerApp]
) -> None:
    """Next to the sessions table an 80-column terminal leaves the chat ~35 cells: its hints fit whole."""
    app = open_app(sample_path, read_only=True, host=EmptyHost(), start="host")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, HostScreen) and screen.session is None
        title = screen.query_one("#host-session-title", Static)
        shown = str(title.render())
        assert "new session" in shown and cell_len(shown) <= title.content_region.width, shown
        field = screen.query_one("#host-input", Input)
        assert cell_len(field.placeholder) <= field.content_region.width, field.placeholder

"""Terminal codes in recorded texts never reach the terminal: every screen shows them as ``\\x1b``.

A model's answer, a tool's result, a user's message, an agent's or a session's name, a stage's name:
anything recorded may hold ESC, CSI, OSC, BEL or a C1 control, and a terminal acts on them (an OSC 0
retitled the window, an OSC 52 wrote the clipboard, ``ESC [ 2 J`` cleared the screen, ``ESC [ 8 m``
hid what followed). The explorer shows each as ``footprint show`` prints it (``tracer``'s
``for_terminal``). These tests record a session whose every text carries them, walk every screen
over it, and look at what the screen would send: its composed lines, segment by segment.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent import Agent, ConversationMemory, Fact, InMemoryFacts, Tool
from agent.providers import FunctionModel, ModelRequest, calls
from explorer import ExplorerApp
from explorer.components.evidence_tree import EvidenceTree
from explorer.components.flowchart import Flowchart
from explorer.components.runs_table import RunsTable
from explorer.components.sessions_table import SessionsTable
from explorer.screens.host import HostScreen
from explorer.screens.item import ItemScreen
from explorer.screens.run import RunScreen
from explorer.screens.why import WhyScreen
from tracer import Item, Recorder, Store

#: what an attacker (or an unlucky model) puts in a text: OSC 0 (the window's title), OSC 52 (the
#: clipboard), SGR 8 (conceal), ED 2 (clear the screen), cursor moves, a C1 CSI and DCS ... ST, BEL,
#: backspace, DEL, a carriage return
PAYLOAD = ("\x1b]0;PWNED\x07 \x1b]52;c;" + base64.b64encode(b"rm -rf ~").decode() + "\x07 \x1b[8mHIDDEN\x1b[0m "
           "\x1b[2J\x1b[H \x1b[1A\x1b[2K \x9b31m \x90dcs\x9c \x07bell \x08bs \x7fdel \r cr")
#: every character a terminal acts on rather than shows (a line's end never reaches a screen line)
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
SESSION = f"s{PAYLOAD}"
#: the payload as the screens show it: its first code, escaped
SHOWN = "\\x1b]0;PWNED\\x07"


def _model() -> Callable[[ModelRequest], Any]:
    """Each turn: a tool call, then an answer (the memory window may leave the result out of the context)."""
    inferences = itertools.count()

    def answer(request: ModelRequest) -> Any:
        if next(inferences) % 2 == 0:
            return calls(("look", {"q": PAYLOAD}))
        return f"answer {PAYLOAD} and some more words to say"

    return answer


async def _look(arguments: dict[str, Any]) -> str:
    return f"result {PAYLOAD}"


def _record(path: Path) -> None:
    """A session of three turns (a tool call each, a memory fact, a window that leaves turns out),
    then a run recorded stage by stage: stage names and kinds, attributes, outputs, errors."""
    with Store.open(path) as store:
        recorder = Recorder(store)
        tool = Tool("look", f"Look {PAYLOAD}.", {"type": "object", "properties": {"q": {"type": "string"}}}, _look)
        facts = InMemoryFacts({"u": [Fact(f"profile.k{PAYLOAD}", f"fact {PAYLOAD}", 1741942800.0)]})
        agent = Agent(f"agent{PAYLOAD}", provider=FunctionModel(_model()), tools=[tool], recorder=recorder,
                      session_id=SESSION, persona=f"persona {PAYLOAD}", memory=ConversationMemory(max_messages=3),
                      facts=facts, user_id="u")
        for turn in range(3):
            asyncio.run(agent.run(f"question {turn} {PAYLOAD}"))
        run = recorder.start_run(agent=f"hand{PAYLOAD}", input=f"input {PAYLOAD}", session_id=SESSION)
        first = run.stage("input", f"input {PAYLOAD}")
        said = first.output(Item.of_text("user", f"input {PAYLOAD}"))
        first.close()
        odd = run.stage(f"kind{PAYLOAD}", f"stage {PAYLOAD}", after=[first],
                        attributes={f"key{PAYLOAD}": f"value {PAYLOAD}", "note": [PAYLOAD]})
        odd.inputs([said], dropped=[(said, f"window{PAYLOAD}")])
        odd.output(Item.of_text(f"out{PAYLOAD}", f"output {PAYLOAD}"))
        odd.close("error", error=f"error {PAYLOAD}")
        run.end("failed", error=f"failed {PAYLOAD}")


def _controls(app: ExplorerApp) -> list[str]:
    """The segments of the screen's composed lines (what goes to the terminal) holding a control character."""
    strips = app.screen._compositor.render_strips()
    return [repr(segment.text) for strip in strips for segment in strip if CONTROL.search(segment.text)]


def _text(app: ExplorerApp) -> str:
    return "\n".join("".join(segment.text for segment in strip) for strip in app.screen._compositor.render_strips())


class _Watch:
    """Looks at the screen after each step; remembers every control character it saw, and where."""

    def __init__(self, app: ExplorerApp) -> None:
        self.app = app
        self.seen: list[str] = []
        self.shown = 0  # how many looks saw the payload (escaped): the texts were on screen at all

    async def look(self, pilot: Any, settle: Any, where: str) -> None:
        await settle(pilot, 2)
        self.seen += [f"{where} ({type(self.app.screen).__name__}): {s}" for s in _controls(self.app)]
        self.shown += SHOWN in _text(self.app)


async def test_no_recorded_control_character_reaches_any_screen(
    open_app: Callable[..., ExplorerApp], tmp_path: Path, settle: Any
) -> None:
    path = tmp_path / "codes.duckdb"
    await asyncio.to_thread(_record, path)
    app = open_app(path, read_only=True)
    async with app.run_test(size=(120, 40)) as pilot:
        watch = _Watch(app)
        await watch.look(pilot, settle, "runs")
        table = app.screen.query_one(RunsTable)
        assert table.row_count == 4
        await pilot.press("f")  # the session's filter: its id in the filters label
        await watch.look(pilot, settle, "runs, session filter")
        for row in range(table.row_count):
            table.move_cursor(row=row)
            await pilot.press("enter")
            await watch.look(pilot, settle, f"run {row}")
            assert isinstance(app.screen, RunScreen)
            chart = app.screen.query_one(Flowchart)
            stages = sorted(chart.stages.values(), key=lambda s: s.seq)
            for stage in stages:  # every stage's pane: the snapshot, the tool call, the others
                app.screen.select_stage(stage.id)
                await watch.look(pilot, settle, f"run {row}, stage {stage.kind!r}")
                if stage.kind == "inference":
                    await pilot.press("d")  # the diff to the previous inference (a notice on the first)
                    await watch.look(pilot, settle, f"run {row}, diff")
                    await pilot.press("d")
                    await pilot.press("enter")  # into the snapshot, then an item whole
                    await settle(pilot, 2)
                    for _ in range(3):
                        await pilot.press("down")
                    await pilot.press("enter")
                    await watch.look(pilot, settle, f"run {row}, item")
                    if isinstance(app.screen, ItemScreen):
                        await pilot.press("escape")
                        await settle(pilot, 2)
                    chart.focus()
            data = app.screen.data
            if data is not None and data.answer_hash() is not None:
                await pilot.press("w")
                await watch.look(pilot, settle, f"why {row}")
                assert isinstance(app.screen, WhyScreen)
                tree = app.screen.query_one(EvidenceTree)
                tree.root.expand_all()
                for _ in range(min(tree.last_line, 30)):  # each node's detail below the tree
                    await pilot.press("j")
                    await watch.look(pilot, settle, f"why {row}, node {tree.cursor_line}")
                await pilot.press("g")  # a memory item: no stage to go to, says the toast
                await watch.look(pilot, settle, f"why {row}, go")
                while not isinstance(app.screen, RunScreen):
                    await pilot.press("escape")
                    await settle(pilot, 2)
            await pilot.press("escape")
            await settle(pilot, 2)
        assert app.is_running
    assert watch.seen == [], "\n".join(watch.seen[:20])
    assert watch.shown > 20, "the recorded texts were on the screens looked at"


class _CodesHost:
    """A host whose sessions, states and replies carry terminal codes."""

    base_url = "http://127.0.0.1:8080"

    def sessions(self) -> list[dict[str, Any]]:
        return [{"session_id": SESSION, "active": False, "running": False, "last_activity": 1741943160.0,
                 "status": f"st{PAYLOAD}"}]

    def durable_sessions(self) -> list[dict[str, Any]]:
        return [{"session_id": f"d{PAYLOAD}", "busy": False, "steering": 1, "send": 0, "pending_calls": 0}]

    def send(self, message: str, session_id: str | None = None, decision: str | None = None) -> dict[str, Any]:
        return {"status": "awaiting", "session_id": session_id, "run_id": f"r{PAYLOAD}", "question": f"ask {PAYLOAD}"}

    def durable_send(self, session_id: str, text: str) -> dict[str, Any]:
        return {"status": f"failed{PAYLOAD}", "session_id": session_id, "run_id": None, "error": f"no {PAYLOAD}"}


async def test_no_recorded_control_character_reaches_the_host_panel(
    open_app: Callable[..., ExplorerApp], tmp_path: Path, settle: Any
) -> None:
    path = tmp_path / "codes.duckdb"
    await asyncio.to_thread(_record, path)
    app = open_app(path, read_only=True, host=_CodesHost(), start="host")
    async with app.run_test(size=(100, 30)) as pilot:
        watch = _Watch(app)
        await watch.look(pilot, settle, "host")  # the session's earlier turns, read from its runs
        screen = app.screen
        assert isinstance(screen, HostScreen) and screen.session == SESSION
        await pilot.press(*"hello", "enter")  # a reply asking a question, with codes
        await watch.look(pilot, settle, "host, standing reply")
        screen.query_one(SessionsTable).focus()
        await pilot.press("down")  # the durable session, and a failed reply from it
        await watch.look(pilot, settle, "host, durable session")
        screen.query_one("#host-input").focus()
        await pilot.press(*"hi", "enter")
        await watch.look(pilot, settle, "host, durable reply")
    assert watch.seen == [], "\n".join(watch.seen[:20])
    assert watch.shown >= 3


async def test_no_control_character_of_a_persona_reaches_the_sandbox(
    open_app: Callable[..., ExplorerApp], tmp_path: Path, settle: Any
) -> None:
    """A persona's name and text are the sandbox's recorded texts: its list, its detail, the chat with it,
    the field picker and the question before deleting it."""
    app = open_app(tmp_path / "personas.duckdb")
    assert app.personas is not None
    app.personas.create(f"Bob{PAYLOAD[:40]}", f"You are Bob. {PAYLOAD}")  # (a name is 64 characters at most)
    async with app.run_test(size=(100, 30)) as pilot:
        watch = _Watch(app)
        await pilot.press("p")
        await watch.look(pilot, settle, "sandbox")
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press(*"hello", "enter")  # the reply is written under the persona's name
        await watch.look(pilot, settle, "chat")
        await pilot.press("ctrl+d")
        await settle(pilot)
        for key in ("e", "d"):  # the field picker, then the question before deleting
            await pilot.press(key)
            await watch.look(pilot, settle, f"sandbox {key}")
            await pilot.press("escape")
            await settle(pilot)
    assert watch.seen == [], "\n".join(watch.seen[:20])
    assert watch.shown >= 4

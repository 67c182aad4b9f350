"""Names and texts that look like Rich markup are shown as they are, on every screen: an agent, a
session, a tool, a memory key or a persona called ``[/b]`` stopped the explorer with a MarkupError."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent import Agent, ConversationMemory, Tool
from agent.providers import FunctionModel, ModelRequest, calls
from explorer import ExplorerApp
from explorer.components.runs_table import RunsTable
from tracer import Recorder, Store

MARKUP = "[/b] x[i]y [bold red]z[/] [link=http://e]l[/link]"


def _model(request: ModelRequest) -> Any:
    if request.context[-1].item.kind != "tool_result":
        return calls(("look", {"q": MARKUP}))
    return f"answer {MARKUP} and then some more words to say"


async def _look(arguments: dict[str, Any]) -> str:
    return f"found {MARKUP}"


def _record(path: Path) -> None:
    with Store.open(path) as store:
        tool = Tool("look", f"Look {MARKUP}.", {"type": "object", "properties": {"q": {"type": "string"}}},
                    _look)
        agent = Agent(f"agent {MARKUP}", provider=FunctionModel(_model), tools=[tool], recorder=Recorder(store),
                      session_id=f"s{MARKUP}", persona=f"persona {MARKUP}", memory=ConversationMemory())
        for turn in range(4):  # a session long enough for the why tree to scroll (its scrollbar takes 2 columns)
            asyncio.run(agent.run(f"question {turn} {MARKUP}"))


async def test_markup_in_names_and_texts_is_shown_as_text(open_app: Callable[..., ExplorerApp], tmp_path: Path,
                                                         settle: Any) -> None:
    path = tmp_path / "markup.duckdb"
    await asyncio.to_thread(_record, path)
    app = open_app(path, read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(RunsTable)
        row = [str(c) for c in table.get_row_at(0)]
        assert any(c.startswith("s[/b]") for c in row) and any(c.startswith("agent [/") for c in row), row
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("home")
        for _ in range(8):  # every stage of the run, its detail pane included
            await pilot.press("down")
            await settle(pilot, 2)
        await pilot.press("w")
        await settle(pilot)
        from explorer.components.evidence_tree import EvidenceTree

        tree = app.screen.query_one(EvidenceTree)
        top = tree.render_line(0).text.rstrip()
        assert top.startswith("▼ why: ") and top.endswith("…"), top  # the long answer is cut, and says so
        await pilot.press("n", "enter")
        await settle(pilot)
        assert app.is_running and app.return_code is None


async def test_a_persona_named_like_markup_is_listed_as_it_is(open_app: Callable[..., ExplorerApp], tmp_path: Path,
                                                             settle: Any) -> None:
    from explorer.screens.sandbox import SandboxScreen

    app = open_app(tmp_path / "personas.duckdb")
    assert app.personas is not None
    app.personas.create(f"Bob {MARKUP}", f"You are Bob. {MARKUP}")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("p")
        await settle(pilot)
        assert isinstance(app.screen, SandboxScreen)
        assert str(app.screen.query_one("#personas").get_row_at(0)[0]).startswith("Bob [/b]")  # type: ignore[attr-defined]


async def test_a_session_named_like_markup_is_kept_as_a_filter_and_shown_as_it_is(
    open_app: Callable[..., ExplorerApp], tmp_path: Path, settle: Any
) -> None:
    """`f` on a run of session ``bad [/b] sess`` stopped the app with a MarkupError (the filters label is a
    Static, which reads a str as markup), and a session ``chat-[x]`` was shown as ``session=chat-``."""
    from explorer.screens.runs import RunsScreen

    path = tmp_path / "sessions.duckdb"

    def record() -> None:
        with Store.open(path) as store:
            for session in ("bad [/b] sess", "chat-[x]", "ok-sess"):
                agent = Agent("[bold]agent", provider=FunctionModel(lambda _r: "answer [/red] x"),
                              recorder=Recorder(store), session_id=session)
                asyncio.run(agent.run("hello [/b] world"))

    await asyncio.to_thread(record)
    app = open_app(path, read_only=True)
    async with app.run_test(size=(100, 24)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunsScreen)
        table = screen.query_one(RunsTable)
        for session in ("chat-[x]", "bad [/b] sess"):
            table.move_cursor(row=next(i for i, r in enumerate(table.runs.values()) if r.session_id == session))
            await pilot.press("f")
            await settle(pilot)
            assert app.is_running and table.where.session_id == session
            assert f"session={session}" in str(screen.query_one("#runs-filters").render())
            assert [r.session_id for r in table.runs.values()] == [session]
            await pilot.press("f")  # f again: every session
            await settle(pilot)

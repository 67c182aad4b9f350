"""The tool registry: register, unregister, replace an executor, groups, filter, search, workspace;
and the execution context a tool receives when it declares it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent import Agent, Tool, ToolContext, ToolRegistry, tool
from agent.errors import ToolNotFoundError, UserError
from agent.providers import ScriptedModel, calls, tool_results
from tracer import Recorder, Store


def make(name: str, description: str = "does a thing", **meta: Any) -> Tool:
    return Tool(name, description, {"type": "object", "properties": {}}, lambda a: name, **meta)


def catalogue() -> ToolRegistry:
    return ToolRegistry([
        make("read_file", "Read a text file from the workspace.", category="file_read", tags=("open", "cat")),
        make("write_file", "Write a text file.", category="file_write"),
        make("list_emails", "List the newest emails in the inbox.", category="network_read", tags=("mail",)),
        make("send_email", "Send an email to someone.", category="network_write", tags=("mail", "message")),
        make("remember", "Store a fact about the user.", category="memory"),
    ])


def test_register_refuses_a_second_tool_of_a_name_unless_replacing() -> None:
    reg = catalogue()
    with pytest.raises(UserError, match="already registered"):
        reg.register(make("remember"))
    new = reg.register(make("remember", "new"), replace=True)
    assert reg.get("remember") is new and len(reg) == 5


def test_unregister_removes_the_tool_from_lookups_search_and_groups() -> None:
    reg = catalogue()
    reg.define_group("mail", ["list_emails", "send_email"])
    removed = reg.unregister("send_email")
    assert removed.name == "send_email" and "send_email" not in reg
    assert [t.name for t in reg.group("mail")] == ["list_emails"]
    assert all(t.name != "send_email" for t in reg.search("email"))
    with pytest.raises(ToolNotFoundError, match="no tool named 'send_email'"):
        reg.unregister("send_email")


async def test_replace_executor_keeps_the_definition_and_metadata() -> None:
    reg = catalogue()
    before = reg.get("read_file")
    after = reg.replace_executor("read_file", lambda args: "from the plugin")
    assert reg.get("read_file") is after
    assert (after.description, after.parameters, after.category, after.tags) == (
        before.description, before.parameters, before.category, before.tags)
    assert await after.run({}) == "from the plugin"
    assert await before.run({}) == "read_file"  # the old tool object is untouched


def test_groups_are_defined_sets_or_categories() -> None:
    reg = catalogue()
    assert [t.name for t in reg.group("network_read")] == ["list_emails"]
    reg.define_group("inbox", ["send_email", "list_emails"])
    assert [t.name for t in reg.group("inbox")] == ["list_emails", "send_email"]
    assert [t.name for t in reg.select(["remember"], ["inbox", "memory"])] == [
        "remember", "list_emails", "send_email"]
    with pytest.raises(UserError, match=r"no tool group or category 'nope'; known: .*file_read.*inbox"):
        reg.group("nope")
    with pytest.raises(UserError, match="'ghost' is not in the registry"):
        reg.define_group("bad", ["ghost"])


def test_filter_keeps_only_the_named_tools_and_the_workspace(tmp_path: Path) -> None:
    reg = catalogue()
    reg.workspace = str(tmp_path)
    small = reg.filter(["remember", "read_file"])
    assert small.names() == ["read_file", "remember"] and small.workspace == str(tmp_path)
    with pytest.raises(UserError, match="'nope' is not in the registry"):
        reg.filter(["nope"])


def test_search_ranks_name_then_tags_then_description() -> None:
    reg = catalogue()
    assert [t.name for t in reg.search("email")][:2] == ["list_emails", "send_email"]
    assert reg.search("mail")[0].name in {"list_emails", "send_email"}  # a tag
    assert [t.name for t in reg.search("cat")] == ["read_file"]  # a hidden tag
    assert reg.search("read_file")[0].name == "read_file"
    assert [t.name for t in reg.search("fact about the user")] == ["remember"]
    assert reg.search("zebra") == []
    assert [t.name for t in reg.search("*", limit=2)] == ["list_emails", "read_file"]
    assert reg.categories() == {"file_read": 1, "file_write": 1, "memory": 1, "network_read": 1,
                                "network_write": 1}


@settings(max_examples=100, deadline=None)
@given(st.lists(st.from_regex(r"[a-z]{1,8}(_[a-z]{1,8})?", fullmatch=True), min_size=1, max_size=30, unique=True),
       st.text(max_size=30))
def test_search_returns_only_registered_tools_without_repeats(names: list[str], query: str) -> None:
    reg = ToolRegistry(make(n, f"tool {n}") for n in names)
    found = [t.name for t in reg.search(query, limit=100)]
    assert len(found) == len(set(found)) and set(found) <= set(names)
    for n in names:  # every tool is found by its own name, first
        assert reg.search(n, limit=100)[0].name == n


def test_workspace_is_absolute_and_reaches_the_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    reg = ToolRegistry([make("a")], workspace="data")
    assert reg.workspace == str(tmp_path / "data")
    agent = Agent("x", provider=ScriptedModel(["ok"]), tool_names=["a"], registry=reg)
    assert agent.workspace == str(tmp_path / "data")


def test_metadata_is_checked() -> None:
    with pytest.raises(UserError, match="max_results must be >= 1"):
        make("x", max_results=0)


async def test_a_tool_that_declares_the_context_receives_it_and_records_on_its_stage(tmp_path: Path) -> None:
    seen: list[ToolContext] = []

    @tool(category="memory", tags=["who"])
    async def whoami(prefix: str, context: ToolContext) -> str:
        """Say who asks."""
        seen.append(context)
        context.record(decided="hello")
        return f"{prefix} {context.user_id}"

    assert whoami.takes_context and "context" not in whoami.parameters["properties"]
    assert (whoami.category, whoami.tags) == ("memory", ("who",))
    store = Store.open(tmp_path / "s.duckdb")
    model = ScriptedModel([calls(("whoami", {"prefix": "hi"}, "c1")), "done"])
    agent = Agent("greeter", provider=model, tools=[whoami], user_id="ann", session_id="s1",
                  workspace=str(tmp_path), recorder=Recorder(store))
    result = await agent.run("who am I?")
    assert tool_results(model.requests[1])[0]["content"] == "hi ann"
    ctx = seen[0]
    assert (ctx.agent, ctx.run_id, ctx.session_id, ctx.user_id, ctx.workspace, ctx.call_id, ctx.confirmed) == (
        "greeter", result.run_id, "s1", "ann", str(tmp_path), "c1", False)
    store.flush()
    stage = next(s for s in store.load_run(result.run_id).stages if s.kind == "tool")
    assert stage.attributes["decided"] == "hello"


async def test_a_plain_tool_gets_no_context_and_run_without_one_gives_an_empty_one() -> None:
    @tool
    def plain(x: int) -> int:
        """Double."""
        return 2 * x

    @tool
    def ctx_user(context: ToolContext) -> str:
        """Who."""
        context.record(ignored=True)  # no stage: recording is a no-op
        return str(context.user_id)

    assert not plain.takes_context and await plain.run({"x": 2}) == 4
    assert await ctx_user.run({}) == "None"

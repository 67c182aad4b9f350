"""Meta-tools end to end: a scripted model searches, asks for help, makes a wrong use_tool call,
reads the help in the error and corrects itself; limits, permissions and the prompt section."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent import Agent, ToolContext, tool
from agent.providers import ModelRequest, ScriptedModel, calls, tool_results
from agent.tools import ToolRegistry, apply_tool_limits, cap_result, permission_checker, tool_help
from tracer import ItemKind, Recorder, Store


@tool(category="network_read", tags=("mail", "inbox"), max_results=50)
def list_emails(folder: str, limit: int = 20) -> list[dict[str, Any]]:
    """List the newest emails in a folder.

    Args:
        folder: inbox, sent or archive
        limit: how many emails
    """
    return [{"id": i, "folder": folder} for i in range(limit + 10)]  # a tool that ignores its limit


@tool(category="file_write")
def write_note(title: str, body: str) -> str:
    """Write a note."""
    return "written"


def catalogue(n: int = 100) -> list[Any]:
    extra = []
    for i in range(n - 2):
        def fn(query: str, page: int = 1) -> str:
            return "x"
        extra.append(tool(fn, name=f"tool_{i:03d}", description=f"Look up record kind {i} in the archive "
                          f"system by a free-text query.", tags=(f"kind{i}",)))
    return [list_emails, write_note, *extra]


def test_tool_help_lists_every_parameter_with_an_example() -> None:
    text = tool_help(list_emails)
    assert text.splitlines()[0] == "list_emails: List the newest emails in a folder."
    assert "- folder (string, required): inbox, sent or archive" in text
    assert "- limit (integer, optional, default 20, at most 50): how many emails" in text
    assert text.endswith('Call it: use_tool("list_emails", {"folder": "..."})')


def test_apply_tool_limits_caps_limit_arguments_and_list_results() -> None:
    assert apply_tool_limits(list_emails, {"folder": "inbox", "limit": 500}) == (
        {"folder": "inbox", "limit": 50}, ["limit 500 -> 50"])
    assert apply_tool_limits(list_emails, {"folder": "inbox", "limit": 5})[1] == []
    assert apply_tool_limits(write_note, {"title": "a", "body": "b"}) == ({"title": "a", "body": "b"}, [])
    assert cap_result(list_emails, list(range(60)))[0] == list(range(50))
    assert cap_result(list_emails, "not a list") == ("not a list", [])


async def test_search_help_wrong_call_then_corrected_call(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.duckdb")
    model = ScriptedModel([
        calls(("search_tools", {"query": "emails"}, "c1")),
        calls(("get_tool_help", {"tool_name": "list_emails"}, "c2")),
        calls(("use_tool", {"tool_name": "list_emails", "arguments": {"limit": 500}}, "c3")),  # folder missing
        calls(("use_tool", {"tool_name": "list_emails", "arguments": {"folder": "inbox", "limit": 500}}, "c4")),
        "You have 50 emails.",
    ])
    agent = Agent("mail", provider=model, tools=catalogue(), meta_tools=True, recorder=Recorder(store))
    result = await agent.run("How many emails do I have?")
    assert result.answer == "You have 50 emails."

    # only the three meta-tools are offered, and the prompt describes the three steps
    first = model.requests[0]
    offered = [ci.item.body["name"] for ci in first.context if ci.item.kind == ItemKind.TOOL_DEFINITION]
    assert offered == ["search_tools", "get_tool_help", "use_tool"]
    system = "\n".join(ci.item.text for ci in first.context if ci.item.kind == ItemKind.PROMPT_SECTION)
    assert "You can reach 100 tools" in system and '1. search_tools("keyword")' in system
    assert "tool_042" not in system

    found = tool_results(model.requests[1])[0]["content"]
    assert found.splitlines()[0] == "- list_emails [network_read]: List the newest emails in a folder."
    assert "- folder (string, required)" in tool_results(model.requests[2])[-1]["content"]
    wrong = tool_results(model.requests[3])[-1]
    assert wrong["is_error"] and wrong["content"].startswith("Error: list_emails needs the argument(s) folder.")
    assert "- folder (string, required): inbox, sent or archive" in wrong["content"]  # the full help
    right = json.loads(tool_results(model.requests[4])[-1]["content"])
    assert len(right) == 50 and right[0] == {"id": 0, "folder": "inbox"}

    store.flush()
    stages = [s for s in store.load_run(result.run_id).stages if s.kind == "tool"]
    assert [s.name for s in stages] == ["search_tools", "get_tool_help", "use_tool", "use_tool"]
    assert stages[0].attributes["search_found"][0] == "list_emails"
    assert stages[2].attributes["reached_tool"] == "list_emails" and stages[2].status == "error"
    last = stages[3].attributes
    assert last["reached_tool"] == "list_emails"
    assert last["reached_arguments"] == {"folder": "inbox", "limit": 500}
    assert last["limits_applied"] == ["limit 500 -> 50", "result 60 items -> 50"]


async def test_use_tool_errors_say_what_to_do() -> None:
    def failing(note: str) -> str:
        raise RuntimeError("disk full")

    boom = tool(failing, name="save_note", description="Save a note.")
    model = ScriptedModel([
        calls(("use_tool", {"tool_name": "list_email", "arguments": {}}, "c1"),
              ("use_tool", {"tool_name": "list_emails", "arguments": {"folder": 3}}, "c2"),
              ("use_tool", {"tool_name": "list_emails", "arguments": "{not json"}, "c3"),
              ("use_tool", {"tool_name": "save_note", "arguments": {"note": "x"}}, "c4"),
              ("use_tool", {"tool_name": "use_tool", "arguments": {}}, "c5"),
              ("use_tool", {"tool_name": "list_emails", "arguments": json.dumps({"folder": "sent", "limit": 1})},
               "c6")),
        "ok",
    ])
    await Agent("m", provider=model, tools=[list_emails, boom], meta_tools=True).run("go")
    out = [r["content"] for r in tool_results(model.requests[1])]
    assert out[0].startswith("Error: there is no tool named 'list_email'; similar tools: list_emails.")
    assert "folder: 3 is not of type 'string'" in out[1] and "Call it: use_tool" in out[1]
    assert "not valid JSON" in out[2] and "Parameters:" in out[2]
    assert out[3].startswith("Error: save_note failed: RuntimeError: disk full") and "- note (string" in out[3]
    assert "use_tool is a meta-tool" in out[4]
    assert len(json.loads(out[5])) == 11  # arguments sent as a JSON string work too


async def test_use_tool_applies_the_permission_checker_to_the_tool_it_reaches(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.duckdb")
    model = ScriptedModel([
        calls(("search_tools", {"query": "note"}, "c0"),
              ("use_tool", {"tool_name": "write_note", "arguments": {"title": "a", "body": "b"}}, "c1")),
        "I may not write notes.",
    ])
    agent = Agent("m", provider=model, tools=[list_emails, write_note], meta_tools=True, user_id="ann",
                  permissions=permission_checker(), recorder=Recorder(store))
    result = await agent.run("write a note")
    search, use = (r["content"] for r in tool_results(model.requests[1]))
    assert "write_note" not in search  # a tool the user may not use is not offered by search
    assert use == "Error: permission denied for write_note (rule: level): write_note needs level write; user ann has read"
    store.flush()
    stage = [s for s in store.load_run(result.run_id).stages if s.kind == "tool"][1]
    assert stage.attributes["reached_tool"] == "write_note"
    assert stage.attributes["permission"]["tool"] == "write_note"
    assert stage.attributes["permission"]["rule"] == "level"


def test_meta_tools_cut_the_prompt_by_more_than_ten_times_at_100_tools() -> None:
    from agent import estimate_item_tokens

    def tokens(agent: Agent) -> int:
        request: ModelRequest | None = None

        def capture(req: ModelRequest) -> str:
            nonlocal request
            request = req
            return "ok"
        import asyncio

        from agent.providers import FunctionModel
        agent.provider = FunctionModel(capture)
        asyncio.run(agent.run("hi"))
        assert request is not None
        return sum(estimate_item_tokens(ci) for ci in request.context
                   if ci.item.kind in (ItemKind.TOOL_DEFINITION, ItemKind.PROMPT_SECTION))

    full = tokens(Agent("a", provider=ScriptedModel(["x"]), tools=catalogue()))
    meta = tokens(Agent("a", provider=ScriptedModel(["x"]), tools=catalogue(), meta_tools=True))
    assert full >= 10 * meta, (full, meta)


async def test_a_registry_catalogue_can_be_searched_directly_by_a_tool_with_the_context() -> None:
    seen: list[list[str]] = []

    @tool
    def peek(context: ToolContext) -> str:
        """Peek at the catalogue."""
        assert isinstance(context.tools, ToolRegistry)
        seen.append(context.tools.names())
        return "ok"

    model = ScriptedModel([calls(("peek", {}, "c1")), "done"])
    await Agent("a", provider=model, tools=[peek, write_note]).run("go")
    assert seen == [["peek", "write_note"]]


def test_replacing_an_agents_tools_keeps_the_catalogue_and_the_offer_in_step() -> None:
    agent = Agent("a", provider=ScriptedModel(["ok"]), tools=[list_emails], meta_tools=True)
    assert list(agent.tools) == ["list_emails"] and [t.name for t in agent.offered] == [
        "search_tools", "get_tool_help", "use_tool"]
    agent.tools = {"write_note": write_note}  # a durable session swaps its tools between turns
    assert agent.catalog.names() == ["write_note"]
    plain = Agent("b", provider=ScriptedModel(["ok"]), tools=[list_emails])
    plain.tools = {"write_note": write_note}
    assert [t.name for t in plain.offered] == ["write_note"] and not plain.meta_tools
    import pytest

    from agent.errors import UserError
    with pytest.raises(UserError, match="no tool may be called use_tool when meta_tools=True"):
        Agent("c", provider=ScriptedModel(["ok"]), tools=[tool(lambda: 1, name="use_tool", description="x")],
              meta_tools=True)

"""The tool stage's detail shows what tool governance recorded: the decision and its rule, the tool
a meta-tool reached, and how a sandbox run ended."""

from __future__ import annotations

from typing import Any

from explorer.components.tool_call_view import governance_lines


def test_a_refused_call_shows_the_rule_in_red() -> None:
    lines = governance_lines({"permission": {"decision": "denied", "rule": "path", "tool": "read_file",
                                             "user": "ann", "reason": "../x is outside the allowed paths"}})
    assert lines == [("permission denied for read_file (rule path, user ann): ../x is outside the allowed paths",
                      "red")]


def test_a_meta_tool_call_shows_the_tool_it_reached_and_the_limits() -> None:
    lines = governance_lines({"permission": {"decision": "allowed", "rule": "allowed", "tool": "list_emails",
                                             "user": None}, "reached_tool": "list_emails",
                              "limits_applied": ["limit 500 -> 50"]})
    assert [text for text, _ in lines] == ["permission allowed for list_emails (rule allowed, user None)",
                                          "reached tool list_emails", "limits applied: limit 500 -> 50"]
    assert lines[0][1] == "green"


def test_a_sandbox_run_shows_its_exit_limits_and_error() -> None:
    lines = governance_lines({"sandbox": {"language": "javascript", "exit_code": -24, "duration_ms": 1200.5,
                                          "limits": {"memory_mb": 64, "cpu_seconds": 1, "wall_seconds": 20},
                                          "error": "the code used more than its CPU limit (1 s) and was stopped",
                                          "stderr": ""}})
    assert lines == [("sandbox javascript: exit -24, 1200.5 ms; limits 64 MB, 1 s CPU, 20 s wall", "red"),
                     ("the code used more than its CPU limit (1 s) and was stopped", "red")]
    assert governance_lines({"sandbox": {"refused": "eval() is not allowed"}}) == [
        ("sandbox refused the code: eval() is not allowed", "red")]
    assert governance_lines({}) == []


async def test_the_why_screen_shows_the_rule_that_refused_a_call(
    open_app: Any, tmp_path: Any, settle: Any
) -> None:
    from agent import Agent, tool
    from agent.providers import ScriptedModel, calls
    from agent.tools import permission_checker
    from explorer.components.evidence_tree import EvidenceTree
    from explorer.screens.why import WhyScreen
    from tracer import Recorder, Store

    @tool(category="file_write")
    def save(path: str) -> str:
        """Save."""
        return "saved"

    path = tmp_path / "governed.duckdb"
    store = Store.open(path)
    model = ScriptedModel([calls(("save", {"path": "a.txt"}, "c1")), "I may not save files."])
    result = await Agent("a", provider=model, tools=[save], user_id="ann", permissions=permission_checker(),
                         recorder=Recorder(store)).run("save it")
    store.close()
    app = open_app(path, read_only=True, run_id=result.run_id)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
        why = app.screen
        assert isinstance(why, WhyScreen)
        tree = why.query_one(EvidenceTree)
        tree.root.expand_all()
        await pilot.pause()
        found = []

        def walk(node: Any) -> None:
            if node.data is not None and node.data.item_kind == "tool_result":
                found.append(node)
            for child in node.children:
                walk(child)
        walk(tree.root)
        assert found
        tree.move_cursor(found[0])
        await pilot.pause()
        detail = str(why.query_one("#why-detail").render())
        assert "save denied by rule level: save needs level write; user ann has read" in detail

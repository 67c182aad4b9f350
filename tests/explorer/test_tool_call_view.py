"""The tool stage's detail shows what tool governance recorded: the decision and its rule, the tool
a meta-tool reached, and how a sandbox run ended."""

from __future__ import annotations

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

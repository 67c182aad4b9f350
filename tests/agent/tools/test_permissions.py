"""The permission checker: each step of the check sequence, the factories, rate limits on a fake
clock, path rules against traversal and symlinks, host rules against look-alike hosts."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent import Agent, Tool, ToolContext, tool
from agent.errors import UserError
from agent.providers import ScriptedModel, calls, tool_results
from agent.tools import (
    PermissionChecker,
    PermissionDeniedError,
    PermissionLevel,
    PermissionPolicy,
    ToolRule,
    UserPermissions,
    permission_checker,
    permissive_checker,
    restrictive_checker,
    with_permission_check,
)
from tracer import Recorder, Store


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make(name: str, category: str | None, **meta: Any) -> Tool:
    return Tool(name, f"{name} tool", {"type": "object", "properties": {}}, lambda a: "ran " + name,
                category=category, **meta)


READ = make("read_file", "file_read")
WRITE = make("write_file", "file_write")
FETCH = make("fetch_url", "network_read")
RUN = make("run_code", "code_execute")
SHUTDOWN = make("shutdown", "system")
MYSTERY = make("mystery", None)


def ctx(user: str | None = "ann", workspace: str | None = None, confirmed: bool = False) -> ToolContext:
    return ToolContext(user_id=user, workspace=workspace, confirmed=confirmed)


# ---------------------------------------------------------------------- the sequence, step by step


def test_step_2_an_unknown_tool_is_denied() -> None:
    d = permissive_checker().check(MYSTERY, ctx())
    assert (d.outcome, d.rule) == ("denied", "unknown_tool") and "no permission rule" in d.reason
    assert permissive_checker().check("nothing_known", ctx()).rule == "unknown_tool"


def test_step_1_a_policy_rule_wins_over_the_tools_category() -> None:
    checker = permission_checker(tools={"mystery": ToolRule("file_read")})
    assert checker.check(MYSTERY, ctx()).allowed  # the rule makes the uncategorised tool known
    checker.set_tool_rule("read_file", ToolRule("file_read", level=PermissionLevel.ADMIN))
    d = checker.check(READ, ctx())
    assert (d.rule, d.reason) == ("level", "read_file needs level admin; user ann has read")


def test_step_3_users_have_their_own_permissions_or_the_default() -> None:
    checker = permission_checker()
    checker.add_user_permissions("bob", level="write", categories={"file_read", "file_write"},
                                 allowed_paths=("/",))
    assert not checker.check(WRITE, ctx("ann")).allowed
    assert checker.check(WRITE, ctx("bob")).allowed
    assert checker.user_permissions(None) is checker.policy.default


def test_step_4_denied_tools_are_denied_even_for_an_admin() -> None:
    checker = permissive_checker()
    checker.update_policy(default=UserPermissions(level="admin", categories=set(["file_read"]),
                                                  denied_tools={"read_file"}, allowed_paths=("/",)))
    d = checker.check(READ, ctx())
    assert (d.outcome, d.rule) == ("denied", "denied_tools")


def test_step_5_allowed_tools_skip_level_and_category_but_not_the_rest(tmp_path: Path) -> None:
    checker = restrictive_checker()
    checker.add_user_permissions("ann", level="read", categories={"memory"}, allowed_tools={"run_code", "write_file"})
    d = checker.check(RUN, ctx())
    assert d.allowed and d.rule == "allowed_tools"
    d = checker.check(WRITE, ctx(workspace=str(tmp_path)), {"path": "/etc/passwd"})
    assert d.rule == "path"  # the path rule still applies


def test_step_6_the_level_must_reach_the_tools() -> None:
    checker = permission_checker()
    for t, level in ((WRITE, "write"), (RUN, "execute"), (SHUTDOWN, "admin")):
        d = checker.check(t, ctx())
        assert (d.outcome, d.rule) == ("denied", "level") and f"needs level {level}" in d.reason


def test_step_7_the_category_must_be_allowed() -> None:
    checker = permission_checker(default=UserPermissions(level="admin", categories={"memory"}))
    d = checker.check(FETCH, ctx())
    assert (d.rule, d.reason) == ("category", "fetch_url is a network_read tool; user ann may use memory")


def test_step_10_per_user_per_tool_rate_limit_on_a_sliding_window() -> None:
    clock = Clock()
    checker = PermissionChecker(PermissionPolicy(tools={"fetch_url": ToolRule("network_read", rate_limit=2)}),
                                clock=clock)
    for _ in range(2):
        d = checker.check(FETCH, ctx())
        assert d.allowed
        checker.record_usage(FETCH, ctx(), d)
        clock.now += 10
    d = checker.check(FETCH, ctx())
    assert (d.outcome, d.rule) == ("rate_limited", "rate_limit") and d.retry_after == pytest.approx(40)
    assert checker.check(FETCH, ctx("bob")).allowed  # another user has their own window
    clock.now += 39.9
    assert not checker.check(FETCH, ctx()).allowed
    clock.now += 0.2  # the first call left the window: one more fits
    assert checker.check(FETCH, ctx()).allowed


def test_step_10_the_global_limit_counts_every_tool_of_a_user() -> None:
    clock = Clock()
    checker = PermissionChecker(PermissionPolicy(global_rate_limit=3, default=UserPermissions(
        categories={"file_read", "network_read", "memory"}, allowed_paths=("/",))), clock=clock)
    for t in (READ, FETCH, READ):
        checker.record_usage(t, ctx(), checker.check(t, ctx()))
    d = checker.check(FETCH, ctx())
    assert (d.outcome, d.rule) == ("rate_limited", "global_rate_limit") and "3 tool calls a minute" in d.reason
    clock.now += 60.0
    assert checker.check(FETCH, ctx()).allowed


def test_a_refused_or_unconfirmed_call_is_not_counted() -> None:
    clock = Clock()
    checker = PermissionChecker(PermissionPolicy(global_rate_limit=1), clock=clock)
    checker.record_usage(WRITE, ctx(), checker.check(WRITE, ctx()))  # denied: level
    assert checker.windows.count("ann") == 0
    checker.record_usage(FETCH, ctx(), checker.check(FETCH, ctx()))
    assert checker.windows.count("ann") == 1


def test_the_default_limit_is_60_a_minute() -> None:
    clock = Clock()
    checker = PermissionChecker(clock=clock)
    for _ in range(60):
        checker.record_usage(FETCH, ctx(), checker.check(FETCH, ctx()))
        clock.now += 0.5
    assert checker.check(FETCH, ctx()).rule == "global_rate_limit"


def test_step_11_confirmation_is_asked_unless_a_person_confirmed() -> None:
    checker = permissive_checker()
    guarded = make("send_email", "network_write", requires_confirmation=True)
    d = checker.check(guarded, ctx())
    assert (d.outcome, d.rule) == ("needs_confirmation", "confirmation") and not d.allowed and d.requires_confirmation
    assert checker.check(guarded, ctx(confirmed=True)).allowed


# ---------------------------------------------------------------------- factories


def test_the_default_factory_is_read_only() -> None:
    checker = permission_checker()
    assert checker.check(FETCH, ctx()).allowed
    assert all(checker.check(t, ctx()).rule == "level" for t in (WRITE, RUN, SHUTDOWN))
    assert checker.policy.global_rate_limit == 60


def test_the_restrictive_factory_allows_file_reads_and_memory_only(tmp_path: Path) -> None:
    checker = restrictive_checker()
    assert checker.check(READ, ctx(workspace=str(tmp_path)), {"path": "notes.txt"}).allowed
    assert checker.check(make("remember", "memory"), ctx()).allowed
    assert checker.check(FETCH, ctx()).rule == "category"
    assert checker.check(WRITE, ctx()).rule == "level"


def test_the_permissive_factory_allows_everything_known() -> None:
    checker = permissive_checker()
    for t in (READ, WRITE, FETCH, RUN, SHUTDOWN):
        assert checker.check(t, ctx(), {"path": "/etc/hosts", "url": "https://anything.example"}).allowed


def test_bad_policy_values_are_named() -> None:
    with pytest.raises(UserError, match="unknown permission level 'root'"):
        UserPermissions(level="root")
    with pytest.raises(UserError, match="unknown tool categories \\['files'\\]"):
        UserPermissions(categories={"files"})
    with pytest.raises(UserError, match="unknown tool category 'net'"):
        ToolRule("net")
    with pytest.raises(UserError, match="the fields are tools, users, default, global_rate_limit"):
        permission_checker().update_policy(nope=1)


# ---------------------------------------------------------------------- path rules


@pytest.fixture()
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "notes.txt").write_text("hi")
    (tmp_path / "ws2").mkdir()
    (tmp_path / "secret.txt").write_text("secret")
    os.symlink(tmp_path / "secret.txt", ws / "link_out")
    os.symlink(tmp_path, ws / "dir_out")
    os.symlink(ws / "notes.txt", ws / "link_in")
    return ws


@pytest.mark.parametrize(("path", "allowed"), [
    ("notes.txt", True),
    ("sub/../notes.txt", True),
    ("link_in", True),
    ("new/file.txt", True),
    ("../secret.txt", False),
    ("sub/../../secret.txt", False),
    ("link_out", False),  # a symlink pointing outside
    ("dir_out/secret.txt", False),  # through a symlinked directory
    ("../ws2/x", False),  # a sibling whose name starts like the workspace's
    ("/etc/passwd", False),
    ("notes.txt\x00.png", False),
])
def test_paths_resolve_inside_the_workspace_or_are_denied(workspace: Path, path: str, allowed: bool) -> None:
    d = permission_checker().check(READ, ctx(workspace=str(workspace)), {"path": path})
    assert d.allowed is allowed, d.reason
    if not allowed:
        assert d.rule == "path"


def test_every_path_argument_is_checked_including_lists(workspace: Path) -> None:
    checker = permission_checker()
    assert checker.check(READ, ctx(workspace=str(workspace)), {"paths": ["notes.txt", "../secret.txt"]}).rule == "path"
    d = checker.check(READ, ctx(workspace=str(workspace)), {"destination": "link_out"})
    assert "resolves to" in d.reason and "secret.txt" in d.reason


@pytest.mark.parametrize("arguments", [
    {"target": "../secret.txt"},  # a name the rule did not know
    {"target_path": "/etc/passwd"}, {"outputFile": "/etc/passwd"}, {"source-dir": "dir_out"},
    {"spec": {"path": "/etc/shadow"}},  # inside an object argument
    {"jobs": [{"file": "notes.txt"}, {"file": "link_out"}]},  # inside a list of objects
    {"path": "~/.ssh/id_rsa"},  # the tool may expand ~: not guessed at
    {"path": "file:///etc/passwd"}, {"path": "FILE:../secret.txt"},  # a file URL is the path it names
])
def test_a_path_in_an_argument_of_another_name_or_deeper_is_checked(workspace: Path, arguments: dict[str, Any]) -> None:
    d = permission_checker().check(READ, ctx(workspace=str(workspace)), arguments)
    assert not d.allowed and d.rule == "path", d.reason


@pytest.mark.parametrize("arguments", [
    {"target": "notes.txt"}, {"spec": {"path": "sub/x"}}, {"jobs": [{"file": "notes.txt"}]},
    {"query": "/etc/passwd"},  # not a path argument: a search text may quote one
    {"path": "file:notes.txt"},
])
def test_paths_inside_the_workspace_pass_whatever_they_are_called(workspace: Path, arguments: dict[str, Any]) -> None:
    d = permission_checker().check(READ, ctx(workspace=str(workspace)), arguments)
    assert d.allowed, d.reason


@pytest.mark.parametrize("arguments", [
    {"webhook_url": "https://evil.example.net/x"}, {"baseUrl": "https://evil.example.net"},
    {"request": {"url": "https://evil.example.net"}},
])
def test_a_host_in_an_argument_of_another_name_or_deeper_is_checked(arguments: dict[str, Any]) -> None:
    checker = permission_checker()
    checker.add_user_permissions("ann", categories={"network_read"}, allowed_hosts=("api.example.com",))
    d = checker.check(FETCH, ctx(), arguments)
    assert not d.allowed and d.rule == "host", d.reason


def test_a_file_tool_without_workspace_or_allowed_paths_reaches_nothing() -> None:
    d = permission_checker().check(READ, ctx(workspace=None), {"path": "x"})
    assert d.rule == "path" and "no workspace or allowed paths" in d.reason
    assert permission_checker().check(READ, ctx(workspace=None), {}).allowed  # no path argument: nothing to check


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["..", ".", "sub", "notes.txt", "link_out", "dir_out", "x", "", "ws"]),
                min_size=1, max_size=6), st.booleans())
def test_an_allowed_path_always_resolves_inside_the_workspace(parts: list[str], absolute: bool) -> None:
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ws = root / "ws"
        ws.mkdir()
        (ws / "sub").mkdir()
        os.symlink(root, ws / "dir_out")
        os.symlink(root / "outside.txt", ws / "link_out")
        path = os.path.join(str(ws) if absolute else "", *parts)
        d = permission_checker().check(READ, ctx(workspace=str(ws)), {"path": path})
        real = os.path.realpath(os.path.join(ws, path))
        inside = real == os.path.realpath(ws) or real.startswith(os.path.realpath(ws) + os.sep)
        assert d.allowed is inside


# ---------------------------------------------------------------------- host rules


HOSTS = ("example.com", "*.api.example.org")


@pytest.mark.parametrize(("value", "allowed"), [
    ("https://example.com/x", True),
    ("https://EXAMPLE.com./x", True),
    ("example.com", True),
    ("example.com:8080/path", True),
    ("https://v1.api.example.org/q", True),
    ("https://api.example.org/q", False),  # the wildcard is for subdomains only
    ("https://example.com.evil.net/", False),
    ("https://evilexample.com/", False),
    ("https://sub.example.com/", False),  # no wildcard for example.com
    ("https://exаmple.com/", False),  # a Cyrillic 'а'
    ("https://example.com@evil.net/", False),  # user info
    ("https://evil.net\\@example.com/", False),  # a backslash parsers disagree on
    ("https://evil.net#@example.com", False),
    ("https://example.com\n.evil.net", False),
    ("http://127.0.0.1/", False),
    ("http://[::1]/", False),
    ("", False),
])
def test_hosts_must_match_exactly_or_as_a_subdomain(value: str, allowed: bool) -> None:
    checker = permission_checker(default=UserPermissions(allowed_hosts=HOSTS))
    d = checker.check(FETCH, ctx(), {"url": value})
    assert d.allowed is allowed, d.reason
    if not allowed:
        assert d.rule == "host"


def test_without_allowed_hosts_any_host_may_be_called_and_every_url_argument_counts() -> None:
    assert permission_checker().check(FETCH, ctx(), {"url": "https://anywhere.example"}).allowed
    checker = permission_checker(default=UserPermissions(allowed_hosts=HOSTS))
    assert checker.check(FETCH, ctx(), {"urls": ["https://example.com", "https://evil.net"]}).rule == "host"


# ---------------------------------------------------------------------- in an agent, recorded


async def test_a_denial_is_an_error_the_model_sees_naming_the_rule_and_is_recorded(tmp_path: Path) -> None:
    @tool(category="file_write")
    def save(path: str, text: str) -> str:
        """Save a file."""
        return "saved"

    store = Store.open(tmp_path / "s.duckdb")
    model = ScriptedModel([calls(("save", {"path": "a.txt", "text": "x"}, "c1")), "I could not save it."])
    agent = Agent("a", provider=model, tools=[save], user_id="ann", workspace=str(tmp_path),
                  permissions=permission_checker(), recorder=Recorder(store))
    result = await agent.run("save it")
    content = tool_results(model.requests[1])[0]["content"]
    assert content == "Error: permission denied for save (rule: level): save needs level write; user ann has read"
    store.flush()
    stage = next(s for s in store.load_run(result.run_id).stages if s.kind == "tool")
    assert stage.attributes["permission"] == {"decision": "denied", "rule": "level", "tool": "save", "user": "ann",
                                              "reason": "save needs level write; user ann has read"}
    assert stage.attributes["error_type"] == "PermissionDeniedError"


async def test_confirmation_pauses_the_run_awaiting_and_a_yes_runs_the_call(tmp_path: Path) -> None:
    sent: list[str] = []

    @tool(category="network_write", requires_confirmation=True)
    def send(to: str) -> str:
        """Send a message."""
        sent.append(to)
        return "sent"

    store = Store.open(tmp_path / "s.duckdb")
    model = ScriptedModel([calls(("send", {"to": "bob"}, "c1")), "Sent."])
    agent = Agent("a", provider=model, tools=[send], user_id="ann", permissions=permissive_checker(),
                  recorder=Recorder(store))
    paused = await agent.run("message bob")
    assert paused.status == "awaiting" and "Allow send" in (paused.question or "") and sent == []
    resumed = await agent.resume(paused.pause, "yes")  # type: ignore[arg-type]
    assert resumed.status == "answered" and sent == ["bob"]
    store.flush()
    tool_stages = [s for s in store.load_run(paused.run_id).stages if s.kind == "tool"]
    assert [s.attributes["permission"]["decision"] for s in tool_stages] == ["needs_confirmation", "allowed"]


async def test_rate_limited_calls_are_refused_in_a_run_and_count_nothing() -> None:
    clock = Clock()
    checker = PermissionChecker(PermissionPolicy(global_rate_limit=2), clock=clock)

    @tool(category="memory")
    def recall(key: str) -> str:
        """Recall."""
        return key

    model = ScriptedModel([calls(*[("recall", {"key": str(i)}, f"c{i}") for i in range(3)]), "ok"])
    agent = Agent("a", provider=model, tools=[recall], user_id="ann", permissions=checker)
    await agent.run("go")
    results = [r["content"] for r in tool_results(model.requests[1])]
    assert results[:2] == ["0", "1"]
    assert results[2].startswith("Error: permission denied for recall (rule: global_rate_limit)")


async def test_with_permission_check_wraps_a_tool_for_agents_without_a_checker(tmp_path: Path) -> None:
    @tool(category="file_read")
    def peek(path: str, context: ToolContext) -> str:
        """Peek at a file."""
        return f"{path} for {context.user_id}"

    wrapped = with_permission_check(peek, permission_checker())
    ok = await wrapped.run({"path": "a"}, ToolContext(user_id="ann", workspace=str(tmp_path)))
    assert ok == "a for ann"
    with pytest.raises(PermissionDeniedError, match="rule: path"):
        await wrapped.run({"path": "/etc/passwd"}, ToolContext(user_id="ann", workspace=str(tmp_path)))
    model = ScriptedModel([calls(("peek", {"path": "../x"}, "c1")), "ok"])
    await Agent("a", provider=model, tools=[wrapped], user_id="ann", workspace=str(tmp_path)).run("go")
    assert "rule: path" in tool_results(model.requests[1])[0]["content"]


async def test_why_shows_the_refused_call_and_the_rule_that_refused_it(tmp_path: Path) -> None:
    from tracer import why
    from tracer._render import why_tree

    @tool(category="file_write")
    def save(path: str) -> str:
        """Save."""
        return "saved"

    store = Store.open(tmp_path / "s.duckdb")
    model = ScriptedModel([calls(("save", {"path": "a.txt"}, "c1")), "I was not allowed to save."])
    agent = Agent("a", provider=model, tools=[save], user_id="ann", permissions=permission_checker(),
                  recorder=Recorder(store))
    result = await agent.run("save it")
    store.flush()
    evidence = why(store, result.run_id)
    notes = [n.note for _, n in evidence.root.walk() if n.node == "stage" and n.note]
    assert notes == ["save denied by rule level: save needs level write; user ann has read"]
    text = "\n".join(why_tree(evidence, result.run_id))
    assert "[save denied by rule level: save needs level write; user ann has read]" in text


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["..", ".", "", "sub", "deep", "f.txt", "ln_up", "ln_sub", "ln_file", "ln_loop",
                                 "missing"]), min_size=1, max_size=7), st.booleans())
def test_resolve_path_agrees_with_realpath(parts: list[str], absolute: bool) -> None:
    import tempfile

    from agent.tools._rules import resolve_path
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.realpath(tmp)
        os.makedirs(os.path.join(root, "sub", "deep"))
        Path(root, "sub", "f.txt").write_text("x")
        os.symlink("..", os.path.join(root, "sub", "ln_up"))
        os.symlink(os.path.join(root, "sub", "deep"), os.path.join(root, "sub", "ln_sub"))
        os.symlink("f.txt", os.path.join(root, "sub", "ln_file"))
        os.symlink("ln_loop", os.path.join(root, "sub", "ln_loop"))
        base = os.path.join(root, "sub")
        value = os.path.join(base if absolute else "", *parts)
        assert resolve_path(value, base) == os.path.realpath(os.path.join(base, value))


LEVELS = ["none", "read", "write", "execute", "admin"]
CATEGORY_NAMES = ["file_read", "file_write", "network_read", "network_write", "memory", "code_execute", "system",
                  "custom"]


@settings(max_examples=300, deadline=None)
@given(level=st.sampled_from(LEVELS), categories=st.sets(st.sampled_from(CATEGORY_NAMES)),
       tool_category=st.sampled_from([*CATEGORY_NAMES, None]), allowed=st.booleans(), denied=st.booleans(),
       confirm=st.booleans(), confirmed=st.booleans())
def test_generated_policies_keep_the_sequences_promises(
    level: str, categories: set[str], tool_category: str | None, allowed: bool, denied: bool, confirm: bool,
    confirmed: bool,
) -> None:
    t = make("t", tool_category, requires_confirmation=confirm)
    user = UserPermissions(level=level, categories=categories, allowed_tools={"t"} if allowed else set(),
                           denied_tools={"t"} if denied else set(), allowed_paths=("/",))
    d = permission_checker(default=user, global_rate_limit=None).check(t, ctx(confirmed=confirmed))
    if tool_category is None:
        assert d.rule == "unknown_tool"
        return
    if denied:
        assert (d.outcome, d.rule) == ("denied", "denied_tools")
        return
    if allowed:
        assert d.rule not in ("level", "category")
    else:
        needs = PermissionLevel.of(
            {"file_read": "read", "network_read": "read", "memory": "read", "file_write": "write",
             "network_write": "write", "custom": "write", "code_execute": "execute", "system": "admin"}[tool_category])
        expected = "level" if PermissionLevel.of(level) < needs else (
            "category" if tool_category not in categories else None)
        if expected is not None:
            assert d.rule == expected
            return
    assert d.outcome == ("needs_confirmation" if confirm and not confirmed else "allowed")
    # more privilege never takes a permission away
    more = UserPermissions(level="admin", categories=set(CATEGORY_NAMES) | categories,
                           allowed_tools=user.allowed_tools, allowed_paths=("/",))
    assert permission_checker(default=more, global_rate_limit=None).check(t, ctx(confirmed=confirmed)).outcome == (
        d.outcome)

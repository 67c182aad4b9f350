"""MCPConnection: real MCP servers (the official SDK's MCPServer, started by each test over stdio with
this interpreter) offered to a recorded Agent driven by a ScriptedModel; no network.

Generated cases: tool names (hypothesis) always become OpenAI-valid, distinct names; result blocks
(hypothesis) always become one text holding every text block; generated nested schemas travel
through a real server unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("mcp")

from mcp_types import (
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from agent import Agent
from agent.errors import ToolError, UserError
from agent.providers import ScriptedModel, calls, tool_results
from agent.tools import MCPConnection
from agent.tools._mcp_text import result_text, tool_name
from tracer import Recorder, Store

SECRET = "sk-proj-" + "Q" * 40

SERVER = '''
import os, sys, time
from typing import Annotated
from pydantic import BaseModel
from mcp.server.mcpserver import MCPServer

app = MCPServer("demo")

class Address(BaseModel):
    street: str
    city: str

class Person(BaseModel):
    name: str
    address: Address
    tags: list[str] = []

@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    print("stderr noise " + os.environ.get("DEMO_TOKEN", "none"), file=sys.stderr, flush=True)
    return a + b

@app.tool(name="files.read")
def read(path: str) -> str:
    """A dotted name, as many servers use."""
    return "contents of " + path

@app.tool()
def describe(person: Person) -> str:
    """A nested schema."""
    return f"{person.name} lives at {person.address.street}, {person.address.city} ({len(person.tags)} tags)"

@app.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("the disk is full")

@app.tool()
def crash() -> str:
    """Dies mid-call."""
    print("dying " + os.environ.get("DEMO_TOKEN", "none"), file=sys.stderr, flush=True)
    os._exit(3)

@app.tool()
def slow(seconds: float) -> str:
    """Sleeps."""
    time.sleep(seconds)
    return "woke"

@app.tool()
def token() -> str:
    """Says whether the secret reached it."""
    return "has token" if os.environ.get("DEMO_TOKEN") else "no token"

app.run()
'''


@pytest.fixture
def server_file(tmp_path: Path) -> Path:
    path = tmp_path / "server.py"
    path.write_text(SERVER)
    return path


def _connect(server_file: Path, **kwargs: object) -> MCPConnection:
    return MCPConnection.stdio("demo", sys.executable, [str(server_file)],
                               env={"DEMO_TOKEN": SECRET}, **kwargs)  # type: ignore[arg-type]


async def test_lists_tools_with_schemas_and_sanitized_names(server_file: Path) -> None:
    async with _connect(server_file, prefix="demo_") as conn:
        names = {t.name: t for t in conn.tools}
        assert set(names) == {"demo_add", "demo_files_read", "demo_describe", "demo_fail", "demo_crash",
                              "demo_slow", "demo_token"}
        add = names["demo_add"]
        assert add.description == "Add two integers."
        assert add.parameters["properties"]["a"]["type"] == "integer"
        assert add.parameters["required"] == ["a", "b"]
        assert "mcp" in add.tags and "demo" in add.tags
        assert SECRET not in repr(conn)
        assert await conn.call("add", {"a": 2, "b": 40}) == "42"


async def test_include_and_exclude(server_file: Path) -> None:
    async with _connect(server_file, include=["add", "files.read"], exclude=["files.read"]) as conn:
        assert [t.name for t in conn.tools] == ["add"]
    with pytest.raises(UserError, match=r"include names \['nope'\]"):
        async with _connect(server_file, include=["nope"]):
            pass


async def test_a_recorded_agent_calls_tools_and_sees_errors_and_a_crash(server_file: Path, tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.duckdb")
    model = ScriptedModel([
        calls(("add", {"a": 1, "b": 2}), ("files_read", {"path": "/etc/motd"})),
        calls(("describe", {"person": {"name": "Ada", "address": {"street": "1 Main St", "city": "Oslo"},
                                       "tags": ["x", "y"]}})),
        calls(("describe", {"person": {"name": "Ada"}})),  # missing the nested address: the schema says so
        calls(("fail", {})),
        calls(("token", {})),
        calls(("crash", {})),
        calls(("add", {"a": 1, "b": 1})),  # after the crash: a clear error, not a hang
        "done",
    ])
    async with _connect(server_file) as conn:
        agent = Agent("mcp", provider=model, tools=conn.tools, recorder=Recorder(store))
        result = await agent.run("go")
    assert result.status == "answered", result.error
    shown = [r for req in model.requests[1:] for r in tool_results(req)[-1:]]
    first = tool_results(model.requests[1])
    assert [(r["content"], r["is_error"]) for r in first] == [("3", False), ("contents of /etc/motd", False)]
    assert shown[1] == {**shown[1], "content": "Ada lives at 1 Main St, Oslo (2 tags)", "is_error": False}
    assert shown[2]["is_error"] and "address" in shown[2]["content"]
    assert shown[3]["is_error"] and shown[3]["content"].startswith("Error: ")
    assert shown[4]["content"] == "has token"
    assert shown[5]["is_error"] and "MCP server demo closed the connection during crash" in shown[5]["content"]
    assert shown[6]["is_error"] and "MCP server demo is gone" in shown[6]["content"]
    replies = json.dumps([tool_results(r) for r in model.requests])
    assert "stderr noise" not in replies and "dying" not in replies and SECRET not in replies
    assert "dying" in conn.stderr_tail()  # kept for the developer, not the model

    store.flush()
    run = store.load_run(result.run_id)
    stages = [s for s in run.stages if s.kind == "tool"]
    assert stages[0].attributes["mcp_server"] == "demo"
    assert {s.attributes.get("mcp_tool") for s in stages} >= {"add", "files.read", "describe", "crash"}
    store.close()
    dump = subprocess.run(["strings", str(tmp_path / "s.duckdb")], capture_output=True, text=True).stdout
    assert SECRET not in dump


async def test_a_slow_call_times_out_as_a_tool_error(server_file: Path) -> None:
    model = ScriptedModel([calls(("slow", {"seconds": 30})), calls(("add", {"a": 1, "b": 1})), "done"])
    async with _connect(server_file, timeout=1.5) as conn:
        result = await Agent("slow", provider=model, tools=conn.tools).run("go")
    assert result.status == "answered"
    [timed_out] = tool_results(model.requests[1])
    assert timed_out["is_error"] and "did not finish within 1.5 s" in timed_out["content"]
    assert tool_results(model.requests[2])[-1]["content"] == "2"  # the server still answers


async def test_calls_after_the_block_ends_fail_clearly(server_file: Path) -> None:
    async with _connect(server_file) as conn:
        tools = conn.tools
    model = ScriptedModel([calls(("add", {"a": 1, "b": 1})), "done"])
    result = await Agent("late", provider=model, tools=tools).run("go")
    [late] = tool_results(model.requests[1])
    assert result.status == "answered" and late["is_error"] and "not connected" in late["content"]


async def test_a_call_running_when_the_block_ends_says_so(server_file: Path) -> None:
    # it was told the server "may have crashed" (and a warning logged): closing looked like a crash
    async with _connect(server_file) as conn:
        running = asyncio.create_task(conn.call("slow", {"seconds": 30}))
        await asyncio.sleep(0.5)
    with pytest.raises(ToolError, match=r"MCP server demo: its connection was closed during slow \(its `async with` "
                                        r"block ended\)"):
        await running


async def test_a_server_that_fails_to_start_names_itself_and_its_stderr(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import sys\nprint('cannot open config', file=sys.stderr)\nsys.exit(2)\n")
    with pytest.raises(UserError, match=r"MCP server broken (failed to start|did not answer)") as caught:
        async with MCPConnection.stdio("broken", sys.executable, [str(bad)], timeout=10):
            pass
    assert "cannot open config" in str(caught.value)
    with pytest.raises(UserError, match="MCP server missing failed to start"):
        async with MCPConnection.stdio("missing", str(tmp_path / "no-such-command")):
            pass


def _schema_server(tmp_path: Path, schemas: list[dict[str, object]]) -> Path:
    path = tmp_path / "schemas.py"
    path.write_text(textwrap.dedent(f'''
        import json
        import anyio
        import mcp_types as types
        from mcp.server.lowlevel import Server
        from mcp.server.stdio import stdio_server
        SCHEMAS = json.loads({json.dumps(json.dumps(schemas))})
        async def list_tools(ctx, params):
            return types.ListToolsResult(tools=[types.Tool(name=f"t{{i}}", input_schema=s)
                                                for i, s in enumerate(SCHEMAS)])
        async def call_tool(ctx, params):
            text = json.dumps(params.arguments, sort_keys=True)
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)])
        server = Server("schemas", on_list_tools=list_tools, on_call_tool=call_tool)
        async def main():
            async with stdio_server() as (r, w):
                await server.run(r, w, server.create_initialization_options())
        anyio.run(main)
    '''))
    return path


async def test_the_dialect_a_schema_declares_is_not_sent_to_the_model(tmp_path: Path) -> None:
    # the TypeScript SDK's servers (server-filesystem, -memory, -everything) put "$schema" (draft-07)
    # at the top of every tool's parameters; it says nothing of the arguments, and some
    # OpenAI-compatible gateways refuse a function's parameters holding it
    declared = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                "properties": {"path": {"type": "string"}}, "required": ["path"]}
    path = _schema_server(tmp_path, [declared])
    async with MCPConnection.stdio("files", sys.executable, [str(path)]) as conn:
        [tool] = conn.tools
        assert tool.parameters == {k: v for k, v in declared.items() if k != "$schema"}
        assert await conn.call("t0", {"path": "a"}) == '{"path": "a"}'


AS_2025_SERVER = """
# A 2025-era server, as the TypeScript SDK's are: the 2026 probe (server/discover) is answered
# "method not found", so the client falls back to the initialize handshake (fd 0 becomes a pipe
# fed by a thread that answers the probe and passes the rest on)
import json, os, sys, threading
_client_in, _client_out = os.dup(0), os.fdopen(os.dup(1), "w", encoding="utf-8")
_inner, _outer = os.pipe()
os.dup2(_inner, 0)
os.close(_inner)

def _forward():
    with open(_client_in, encoding="utf-8") as requests, open(_outer, "w", encoding="utf-8") as server:
        for line in requests:
            message = json.loads(line)
            if message.get("method") == "server/discover":
                error = {"code": -32601, "message": "Method not found"}
                _client_out.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}) + "\\n")
                _client_out.flush()
            else:
                server.write(line)
                server.flush()

threading.Thread(target=_forward, daemon=True).start()
"""

TASK_SERVER = AS_2025_SERVER + """
import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

def tool(name, support):
    execution = None if support is None else types.ToolExecution(task_support=support)
    return types.Tool(name=name, input_schema={"type": "object"}, execution=execution)

async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[tool("plain", None), tool("either", "optional"),
                                        tool("research", "required")])

async def call_tool(ctx, params):
    if params.name == "research":  # what a server that needs task augmentation answers
        raise MCPError(-32601, "Tool research requires task augmentation (taskSupport: 'required')")
    return types.CallToolResult(content=[types.TextContent(type="text", text=params.name + " ran")])

server = Server("tasks", on_list_tools=list_tools, on_call_tool=call_tool)

async def main():
    async with stdio_server() as (r, w):
        await server.run(r, w, server.create_initialization_options())

anyio.run(main)
"""


async def test_a_tool_that_must_run_as_a_task_is_not_offered(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # server-everything's simulate-research-query declares taskSupport 'required'; the SDK's client
    # cannot make task-augmented calls, so the model was offered a tool every call of which failed
    path = tmp_path / "tasks.py"
    path.write_text(TASK_SERVER)
    async with MCPConnection.stdio("tasks", sys.executable, [str(path)]) as conn:
        assert [t.name for t in conn.tools] == ["plain", "either"]
        assert await conn.call("either", {}) == "either ran"
    assert "MCP server tasks: left out its tool 'research'" in caplog.text
    with pytest.raises(UserError, match=r"MCP server tasks: include names 'research', which only runs as a task"):
        async with MCPConnection.stdio("tasks", sys.executable, [str(path)], include=["plain", "research"]):
            pass


ASKING_SERVER = AS_2025_SERVER + """
import mcp_types as types
from pydantic import BaseModel
from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("asks")

class Name(BaseModel):
    name: str

@app.tool()
async def ask(ctx: Context) -> str:
    \"\"\"Asks the client back before it answers.\"\"\"
    await ctx.info("starting")
    await ctx.report_progress(1, 4, "asking")
    asks = {
        "sampling": lambda: ctx.session.create_message(max_tokens=5, messages=[
            types.SamplingMessage(role="user", content=types.TextContent(type="text", text="hi"))]),
        "elicitation": lambda: ctx.elicit("your name?", Name),
        "roots": lambda: ctx.session.list_roots(),
    }
    answers = []
    for what, ask in asks.items():
        try:
            answers.append(f"{what}: {await ask()}")
        except Exception as exc:
            answers.append(f"{what}: {type(exc).__name__}: {exc}")
    await ctx.report_progress(4, 4, "done")
    return "\\n".join(answers)

app.run()
"""


async def test_requests_a_server_sends_back_are_declined_without_a_hang(tmp_path: Path) -> None:
    path = tmp_path / "asks.py"
    path.write_text(ASKING_SERVER)
    model = ScriptedModel([calls(("ask", {})), calls(("ask", {})), "done"])
    async with asyncio.timeout(30), MCPConnection.stdio("asks", sys.executable, [str(path)], timeout=10) as conn:
        result = await Agent("asks", provider=model, tools=conn.tools).run("go")
    assert result.status == "answered", result.error
    for request in model.requests[1:]:
        answer = tool_results(request)[-1]
        assert not answer["is_error"]
        assert answer["content"].splitlines() == [
            "sampling: MCPError: Sampling not supported", "elicitation: MCPError: Elicitation not supported",
            "roots: MCPError: List roots not supported"]


leaf = st.sampled_from([{"type": "string"}, {"type": "integer"}, {"type": "boolean"},
                        {"type": "array", "items": {"type": "number"}}])
schemas = st.recursive(leaf, lambda inner: st.builds(
    lambda props: {"type": "object", "properties": props, "required": sorted(props)[:1]},
    st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), inner, min_size=1, max_size=3)), max_leaves=8)


@settings(max_examples=1, deadline=None, database=None)
@given(st.lists(schemas.filter(lambda s: s.get("type") == "object"), min_size=5, max_size=8))
def test_generated_nested_schemas_arrive_unchanged(tmp_path_factory: pytest.TempPathFactory,
                                                   generated: list[dict[str, object]]) -> None:
    import asyncio

    path = _schema_server(tmp_path_factory.mktemp("schemas"), generated)

    async def check() -> None:
        async with MCPConnection.stdio("schemas", sys.executable, [str(path)]) as conn:
            assert [t.parameters for t in conn.tools] == generated
            assert all(t.description == t.name for t in conn.tools)
            assert await conn.call("t0", {"k": [1]}) == '{"k": [1]}'

    asyncio.run(check())


@given(st.lists(st.text(min_size=1, max_size=130), min_size=1, max_size=20, unique=True), st.sampled_from(["", "p_"]))
def test_generated_names_become_valid_and_distinct_or_identical_when_valid(names: list[str], prefix: str) -> None:
    made = [tool_name(n, prefix) for n in names]
    for original, name in zip(names, made, strict=True):
        assert 1 <= len(name) <= 64 and all(c.isascii() and (c.isalnum() or c in "_-") for c in name)
        if len(prefix + original) <= 64 and all(c.isascii() and (c.isalnum() or c in "_-") for c in original):
            assert name == prefix + original
    long = [n for n, m in zip(names, made, strict=True) if len(prefix + n) > 64]
    assert len({tool_name(n, prefix) for n in long}) == len(long)  # the hash keeps long names apart


blocks = st.one_of(
    st.builds(lambda t: TextContent(type="text", text=t), st.text(max_size=50)),
    st.builds(lambda n: ImageContent(type="image", data="QUJD" * n, mime_type="image/png"), st.integers(0, 50)),
    st.builds(lambda u: ResourceLink(type="resource_link", name="doc", uri=f"file:///{u}"), st.text("abc", max_size=5)),
    st.builds(lambda t: EmbeddedResource(type="resource", resource=TextResourceContents(uri="file:///x", text=t)),
              st.text(max_size=30)),
    st.just(EmbeddedResource(type="resource", resource=BlobResourceContents(uri="file:///b", blob="AAAA"))),
)


@given(st.lists(blocks, max_size=6))
def test_generated_results_keep_every_text_and_describe_the_rest(content: list[object]) -> None:
    text = result_text(CallToolResult(content=content))  # type: ignore[arg-type]
    for block in content:
        if isinstance(block, TextContent):
            assert block.text in text
        elif isinstance(block, ImageContent):
            assert f"[image: image/png, {len(block.data) * 3 // 4:,} bytes]" in text
        elif isinstance(block, EmbeddedResource) and isinstance(block.resource, TextResourceContents):
            assert f"[resource file:///x]\n{block.resource.text}" in text
        elif isinstance(block, EmbeddedResource):
            assert "[resource file:///b: 3 bytes]" in text
    assert result_text(CallToolResult(content=[], structured_content={"n": 1})) == '{"n": 1}'


def test_importing_agent_does_not_import_mcp_and_a_missing_sdk_is_a_clear_error() -> None:
    code = ("import sys, agent, agent.tools\nassert 'mcp' not in sys.modules\n"
            "sys.modules['mcp'] = None\n"
            "from agent.tools import MCPConnection\n"
            "try:\n    MCPConnection.stdio('x', 'true')\nexcept Exception as e:\n    print(type(e).__name__, e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parents[3])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "UserError MCP tools need the MCP SDK: pip install 'footprint[mcp]'"


HTTP_SERVER = '''
import sys
import uvicorn
from mcp.server.mcpserver import MCPServer

app = MCPServer("web")

@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b

inner = app.streamable_http_app()
expected = b"Bearer " + sys.argv[2].encode()

async def guarded(scope, receive, send):
    if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
        await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"unauthorized"})
        return
    await inner(scope, receive, send)

uvicorn.run(guarded, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
'''


@contextlib.contextmanager
def _http_server(path: Path, *args: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The MCP HTTP server ``path`` started on a free loopback port (its port is its first
    argument): its URL and process."""
    import socket
    import time

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(path), str(port), *args], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the MCP HTTP server did not start: {proc.stderr.read()!r}") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    """A streamable-HTTP MCP server on a free loopback port that wants ``Bearer SECRET``; its URL."""
    path = tmp_path / "web.py"
    path.write_text(HTTP_SERVER)
    with _http_server(path, SECRET) as (url, _):
        yield url


async def test_an_http_server_with_a_bearer_token_serves_a_recorded_agent(http_server: str, tmp_path: Path) -> None:
    store = Store.open(tmp_path / "h.duckdb")
    model = ScriptedModel([calls(("web_add", {"a": 20, "b": 22})), "done"])
    async with MCPConnection.http("web", http_server, headers={"Authorization": f"Bearer {SECRET}"},
                                  prefix="web_") as conn:
        assert [t.name for t in conn.tools] == ["web_add"]
        assert SECRET not in repr(conn)
        result = await Agent("web", provider=model, tools=conn.tools, recorder=Recorder(store)).run("go")
    assert result.status == "answered", result.error
    assert tool_results(model.requests[1]) == [{**tool_results(model.requests[1])[0], "content": "42"}]
    store.flush()
    [stage] = [s for s in store.load_run(result.run_id).stages if s.kind == "tool"]
    assert stage.attributes["mcp_server"] == "web" and stage.attributes["mcp_tool"] == "add"
    store.close()
    dump = subprocess.run(["strings", str(tmp_path / "h.duckdb")], capture_output=True, text=True).stdout
    assert SECRET not in dump


async def test_an_http_server_that_refuses_the_token_is_a_clear_error(http_server: str) -> None:
    with pytest.raises(UserError, match=r"MCP server web (failed to start|did not answer)") as caught:
        async with MCPConnection.http("web", http_server, headers={"Authorization": "Bearer wrong"}, timeout=10):
            pass
    assert "HTTP 401 Unauthorized from http://127.0.0.1:" in str(caught.value)
    assert "TaskGroup" not in str(caught.value)  # the cause, not the SDK's task group
    assert SECRET not in str(caught.value)


async def test_an_http_server_that_goes_away_fails_the_call_not_the_task_that_opened_it(tmp_path: Path) -> None:
    # The SDK runs its HTTP requests in a task group entered by whoever opened the connection: a
    # request to a server that had gone (ConnectError) cancelled that task, so the agent's run
    # ended in CancelledError instead of showing the model an error
    path = tmp_path / "web.py"
    path.write_text(HTTP_SERVER)
    model = ScriptedModel([calls(("add", {"a": 1, "b": 2})), calls(("add", {"a": 2, "b": 2})),
                           calls(("add", {"a": 3, "b": 3})), "done"])
    with _http_server(path, SECRET) as (url, proc):
        async with asyncio.timeout(60), MCPConnection.http(
                "web", url, headers={"Authorization": f"Bearer {SECRET}"}, timeout=10) as conn:
            assert await conn.call("add", {"a": 1, "b": 1}) == "2"
            proc.kill()
            proc.wait(10)
            result = await Agent("web", provider=model, tools=conn.tools).run("go")
            await asyncio.sleep(0.2)  # the task that opened the connection is not cancelled either
    assert result.status == "answered", result.error
    gone = [tool_results(r)[-1] for r in model.requests[1:]]
    assert all(r["is_error"] and "MCP server web" in r["content"] for r in gone), gone
    assert "MCP server web is gone" in gone[-1]["content"]
    assert SECRET not in json.dumps(gone)


async def test_a_tool_whose_schema_no_model_takes_is_left_out_and_the_others_serve(tmp_path: Path) -> None:
    """One tool with a schema footprint refuses (a draft-07 tuple `items: [...]`, a type that is no
    type) failed the whole connection: every other tool of the server was lost with it."""
    good = {"type": "object", "properties": {"q": {"type": "string"}}}
    tuple_items = {"type": "object", "properties": {"pair": {"type": "array", "items": [{"type": "string"}]}}}
    no_type = {"type": "object", "properties": {"x": {"type": "nonsense"}}}
    path = _schema_server(tmp_path, [good, tuple_items, no_type])
    async with MCPConnection.stdio("mixed", sys.executable, [str(path)]) as conn:
        assert [t.name for t in conn.tools] == ["t0"]
        assert sorted(conn.left_out) == ["t1", "t2"]
        assert all(why.startswith("tool ") for why in conn.left_out.values()), conn.left_out
        assert await conn.call("t0", {"q": "x"}) == '{"q": "x"}'
    with pytest.raises(UserError, match=r"MCP server mixed: tool 't2'"):
        async with MCPConnection.stdio("mixed", sys.executable, [str(path)], include=["t0", "t2"]):
            pass

"""Tools from MCP (Model Context Protocol) servers.

:class:`MCPConnection` connects to one MCP server — a command started over stdio, or a streamable
HTTP URL — lists its tools and offers each as a footprint :class:`Tool` whose ``execute`` calls the
server's ``tools/call``. The official SDK (``pip install footprint[mcp]``) is imported only when a
connection opens, so ``import agent`` never loads it.

What the model sees of a call: the result's text blocks joined; images, audio and resources
described in a line each; a result the server marks ``isError`` as an error result. A server that
dies, times out or answers nonsense fails that call with an error naming the server, never the run;
its stderr is kept on the connection (:meth:`MCPConnection.stderr_tail`), never sent to the model.
Each call records ``mcp_server`` and ``mcp_tool`` on its tool stage. Neither the server's ``env``
nor the HTTP ``headers`` are recorded anywhere: they live only on the connection object.

The SDK's client lives in a task of the connection's own (:meth:`MCPConnection._serve`): the SDK's
task groups cancel the task that entered them when a transport task fails, and that must never be
the agent's run. A tool that runs only as a task (``taskSupport: "required"``) is left out: the
SDK's client makes plain calls only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
from collections.abc import Coroutine, Iterable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

from tracer import RedactionPolicy

from ..errors import ToolError, ToolReportedError, ToolTimeoutError, UserError
from ._context import ToolContext
from ._mcp_text import result_text, tool_name
from ._tool import Tool, message_of

if TYPE_CHECKING:
    from mcp import Client
    from mcp_types import Tool as MCPToolDefinition

_log = logging.getLogger("footprint.agent.mcp")
_T = TypeVar("_T")
_CREDENTIALS = RedactionPolicy()
#: how much of the server's stderr a connection keeps (for :meth:`MCPConnection.stderr_tail`)
STDERR_TAIL_CHARS = 4000


def _import_mcp() -> Any:
    try:
        import mcp
    except ImportError as exc:
        raise UserError("MCP tools need the MCP SDK: pip install 'footprint[mcp]'") from exc
    return mcp


def _cause(exc: BaseException) -> BaseException:
    """The first exception at the bottom of the SDK's task groups: ``unhandled errors in a
    TaskGroup`` says nothing; a 401 or a refused connection does."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class MCPConnection:
    """One MCP server and its tools, as an async context manager::

        async with MCPConnection.stdio("files", "npx", ["-y", "@scope/files-server"]) as files:
            agent = Agent("a", provider=model, tools=files.tools)
            await agent.run("...")

    ``name`` names the server in errors and on each call's tool stage. ``prefix`` goes before each
    tool's name (``files_`` keeps two servers' ``read`` apart); ``include`` keeps only the named
    MCP tools, ``exclude`` drops the named ones (a name in either that the server does not offer is
    a :class:`UserError`). ``timeout``: seconds one call may take (the connection's start too).
    Tools are usable only inside the ``async with`` block, on the event loop that entered it.
    """

    def __init__(self, name: str, transport: Any, *, prefix: str = "", include: Iterable[str] | None = None,
                 exclude: Iterable[str] = (), timeout: float = 30.0, stderr: IO[str] | None = None) -> None:
        if not name or not isinstance(name, str):
            raise UserError(f"an MCP connection needs a name, got {name!r}")
        if timeout <= 0:
            raise UserError(f"MCP server {name}: timeout must be > 0 seconds, got {timeout!r}")
        self.name = name
        self.prefix = prefix
        self.include = None if include is None else list(include)
        self.exclude = list(exclude)
        self.timeout = timeout
        self._transport = transport
        self._stderr = stderr
        self._client: Client | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: asyncio.Task[None] | None = None  # holds the SDK's client open (see _serve)
        self._closing = asyncio.Event()
        self._lost: BaseException | None = None  # why the runner ended before it was asked to
        self._lost_during: str | None = None  # the call that found the connection lost
        self._refusal: str | None = None  # an HTTP server's last error status, for the messages
        #: the server's tools as footprint tools (filled when the connection opens)
        self.tools: list[Tool] = []
        #: the server's tools left out, each with why (a schema no model takes, a task-only tool)
        self.left_out: dict[str, str] = {}

    @classmethod
    def stdio(cls, name: str, command: str, args: Sequence[str] = (), *, env: dict[str, str] | None = None,
              cwd: str | Path | None = None, prefix: str = "", include: Iterable[str] | None = None,
              exclude: Iterable[str] = (), timeout: float = 30.0) -> MCPConnection:
        """A server started as ``command args`` and spoken to over its stdin and stdout.

        ``env`` is added to a small safe environment (the SDK's: ``PATH``, ``HOME`` ...; not this
        process's keys); it is never recorded. The server's stderr is kept, not printed.
        """
        mcp = _import_mcp()
        from mcp.client.stdio import stdio_client

        params = mcp.StdioServerParameters(command=command, args=list(args), env=env, cwd=cwd)
        stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        return cls(name, stdio_client(params, errlog=stderr), prefix=prefix, include=include,
                   exclude=exclude, timeout=timeout, stderr=stderr)

    @classmethod
    def http(cls, name: str, url: str, *, headers: dict[str, str] | None = None, prefix: str = "",
             include: Iterable[str] | None = None, exclude: Iterable[str] = (),
             timeout: float = 30.0) -> MCPConnection:
        """A server at a streamable-HTTP ``url``; ``headers`` (an ``Authorization`` token, say) go
        with every request and are never recorded."""
        _import_mcp()
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        client = create_mcp_http_client(headers=dict(headers or {}))
        connection = cls(name, streamable_http_client(url, http_client=client), prefix=prefix,
                         include=include, exclude=exclude, timeout=timeout)

        async def note_refusal(response: Any) -> None:  # the SDK's error drops the status
            if response.status_code >= 400:
                connection._refusal = f"HTTP {response.status_code} {response.reason_phrase} from {url}"

        client.event_hooks["response"].append(note_refusal)
        return connection

    def __repr__(self) -> str:  # no env, no headers
        return f"MCPConnection({self.name!r}, {len(self.tools)} tools{', open' if self._client else ''})"

    def stderr_tail(self) -> str:
        """The last :data:`STDERR_TAIL_CHARS` characters the (stdio) server wrote to stderr."""
        if self._stderr is None or self._stderr.closed:
            return ""
        with contextlib.suppress(OSError, ValueError):
            self._stderr.flush()
            end = self._stderr.seek(0, 2)
            self._stderr.seek(max(0, end - STDERR_TAIL_CHARS * 4))
            return self._stderr.read()[-STDERR_TAIL_CHARS:]
        return ""

    async def __aenter__(self) -> MCPConnection:
        mcp = _import_mcp()
        if self._client is not None:
            raise UserError(f"MCP server {self.name}: the connection is already open")
        client = mcp.Client(self._transport, read_timeout_seconds=self.timeout)
        loop = asyncio.get_running_loop()
        opened: asyncio.Future[None] = loop.create_future()
        self._closing, self._lost, self._lost_during = asyncio.Event(), None, None
        runner = asyncio.create_task(self._serve(client, opened), name=f"MCP server {self.name}")
        try:
            async with asyncio.timeout(self.timeout):
                await opened
        except BaseException as exc:
            await _stopped(runner, cancel=True)
            if isinstance(exc, Exception):
                raise UserError(self._start_failure(exc)) from None
            raise
        self._client, self._loop, self._runner = client, loop, runner
        try:
            self.left_out = {}
            self.tools = await self._list_tools()
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def _serve(self, client: Client, opened: asyncio.Future[None]) -> None:
        """Hold the SDK's client open until the connection closes (the runner task's body). An
        HTTP request to a server that has gone fails the SDK's task group, which cancels this task,
        not the caller's; calls waiting then fail (:meth:`_while_connected`)."""
        try:
            async with client:
                if not opened.done():
                    opened.set_result(None)
                await self._closing.wait()
        except Exception as exc:
            if not opened.done():
                opened.set_exception(exc)
            elif not self._closing.is_set():
                self._lost = _cause(exc)
                _log.warning("MCP server %s: the connection was lost: %s", self.name,
                             _CREDENTIALS.text(f"{type(self._lost).__name__}: {message_of(self._lost)}"))
        finally:
            if not opened.done():  # (cancelled before it opened: __aenter__ must not wait on)
                opened.set_exception(ConnectionError("the connection's task ended before it opened"))

    async def __aexit__(self, *exc_info: object) -> None:
        runner, self._runner, self._client = self._runner, None, None
        if runner is not None:
            self._closing.set()
            await _stopped(runner)
        if self._stderr is not None:
            tail = self.stderr_tail()
            if tail.strip():
                _log.debug("MCP server %s stderr (tail): %s", self.name, _CREDENTIALS.text(tail))

    def _start_failure(self, exc: BaseException) -> str:
        exc = _cause(exc)
        what = f"did not answer within {self.timeout:g} s" if isinstance(exc, TimeoutError) else (
            f"failed to start: {type(exc).__name__}: {message_of(exc)}")
        if self._refusal:
            what += f" ({_CREDENTIALS.text(self._refusal)})"
        tail = _CREDENTIALS.text(self.stderr_tail().strip()[-1500:])
        return f"MCP server {self.name} {what}" + (f"\nits stderr ended with:\n{tail}" if tail else "")

    async def _list_tools(self) -> list[Tool]:
        assert self._client is not None
        listed: list[MCPToolDefinition] = []
        cursor: str | None = None
        for _ in range(1000):  # a server whose cursor never ends must not hang the start
            try:
                page = await self._client.list_tools(cursor=cursor)
            except Exception as exc:
                raise UserError(f"MCP server {self.name}: listing its tools failed: {message_of(exc)}") from None
            listed.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        offered = {t.name for t in listed}
        for option, names in (("include", self.include or ()), ("exclude", self.exclude)):
            unknown = sorted(set(names) - offered)
            if unknown:
                raise UserError(f"MCP server {self.name}: {option} names {unknown}, which it does not offer "
                                f"(it offers {sorted(offered)})")
        chosen = [t for t in listed if (self.include is None or t.name in self.include)
                  and t.name not in self.exclude]
        # A tool that runs only as a task (taskSupport "required") refuses a plain tools/call, and
        # the SDK's client makes no other: offered, every call of it would fail.
        tasks_only = [t for t in chosen if t.execution is not None and t.execution.task_support == "required"]
        for definition in tasks_only:
            if self.include is not None:
                raise UserError(f"MCP server {self.name}: include names {definition.name!r}, which only runs "
                                f"as a task (taskSupport 'required'); footprint calls MCP tools plainly")
            self._leave_out(definition.name, "it only runs as a task (taskSupport 'required'); footprint "
                                             "calls MCP tools plainly")
        chosen = [t for t in chosen if t not in tasks_only]
        tools: list[Tool] = []
        by_name: dict[str, str] = {}
        for definition in chosen:
            made = tool_name(definition.name, self.prefix)
            if made in by_name:
                raise UserError(f"MCP server {self.name}: its tools {by_name[made]!r} and {definition.name!r} "
                                f"both become {made!r}; exclude one of them")
            try:
                tools.append(self._tool(made, definition))
            except UserError as exc:  # its schema is not one a model can be given: the others still serve
                if self.include is not None:
                    raise
                self._leave_out(definition.name, str(exc).removeprefix(f"MCP server {self.name}: "))
                continue
            by_name[made] = definition.name
        return tools

    def _leave_out(self, mcp_name: str, why: str) -> None:
        self.left_out[mcp_name] = why
        _log.warning("MCP server %s: left out its tool %r: %s", self.name, mcp_name, why)

    def _tool(self, made: str, definition: MCPToolDefinition) -> Tool:
        mcp_name = definition.name
        schema = dict(definition.input_schema or {})
        schema.setdefault("type", "object")
        # the dialect (the TypeScript SDK's servers declare draft-07) says nothing of the arguments,
        # and some OpenAI-compatible gateways refuse parameters that hold it
        schema.pop("$schema", None)
        description = definition.description or definition.title or mcp_name

        async def execute(arguments: dict[str, Any], context: ToolContext) -> str:
            context.record(mcp_server=self.name, mcp_tool=mcp_name)
            return await self.call(mcp_name, arguments)

        try:
            return Tool(made, description, schema, execute, timeout=None, takes_context=True,
                        tags=("mcp", self.name))
        except UserError as exc:
            raise UserError(f"MCP server {self.name}: tool {mcp_name!r}: {exc}") from None

    async def call(self, mcp_name: str, arguments: dict[str, Any]) -> str:
        """Call the server's tool ``mcp_name``; the result's text, or a :class:`ToolError` saying why not."""
        client = self._client
        if client is None:
            raise ToolError(f"MCP server {self.name} is not connected (its `async with` block has ended)")
        if self._lost_during is not None or self._runner is None or self._runner.done():
            raise self._gone(mcp_name, during=False)
        if asyncio.get_running_loop() is not self._loop:
            raise ToolError(f"MCP server {self.name} was connected on another event loop; run the agent "
                            f"inside the `async with` block that opened it")
        from mcp import MCPError

        self._refusal = None
        try:
            result = await self._while_connected(
                client.call_tool(mcp_name, arguments, read_timeout_seconds=self.timeout))
        except _ConnectionLost:
            raise self._gone(mcp_name) from None
        except MCPError as exc:
            text = message_of(exc)
            if "timed out" in text:
                raise ToolTimeoutError(f"MCP server {self.name}: {mcp_name} did not finish within "
                                       f"{self.timeout:g} s") from None
            if "Connection closed" in text:
                raise self._gone(mcp_name) from None
            refusal = f" ({_CREDENTIALS.text(self._refusal)})" if self._refusal else ""
            raise ToolError(f"MCP server {self.name}: {mcp_name} failed: {text}{refusal}") from None
        except Exception as exc:  # an answer the SDK could not read, a transport error ...
            cause = _cause(exc)
            raise ToolError(f"MCP server {self.name}: {mcp_name} failed: {type(cause).__name__}: "
                            f"{message_of(cause)}") from None
        text = result_text(result)
        if result.is_error:
            raise ToolReportedError(f"Error: {text}" if text else f"Error: {mcp_name} failed (no message)")
        return text

    async def _while_connected(self, call: Coroutine[Any, Any, _T]) -> _T:
        """``call``'s result, or :class:`_ConnectionLost` as soon as the connection's runner ends
        (the SDK may leave a call to a lost server waiting until its timeout)."""
        assert self._runner is not None
        task = asyncio.ensure_future(call)
        try:
            await asyncio.wait((task, self._runner), return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not task.done():
                task.cancel()
                task.add_done_callback(_retrieved)
        if task.done():
            return task.result()
        raise _ConnectionLost

    def _gone(self, mcp_name: str, *, during: bool = True) -> ToolError:
        """The error of a call the lost connection failed (``during`` it) or refused; once one
        has failed, every later call is refused. It says why when the SDK has said (an HTTP
        request's error may come after the first call has failed)."""
        if self._closing.is_set():
            return ToolError(f"MCP server {self.name}: its connection was closed during {mcp_name} "
                             f"(its `async with` block ended)")
        lost = self._lost
        why = f": {_CREDENTIALS.text(f'{type(lost).__name__}: {message_of(lost)}')}" if lost else ""
        if not during:
            when = f" during {self._lost_during}" if self._lost_during else ""
            return ToolError(f"MCP server {self.name} is gone (the connection closed{when}{why}); restart it "
                             f"to call its tools again")
        self._lost_during = mcp_name
        _log.warning("MCP server %s closed the connection during %s", self.name, mcp_name)
        return ToolError(f"MCP server {self.name} closed the connection during {mcp_name} "
                         f"(it may have crashed){why}")


class _ConnectionLost(Exception):
    """The connection's runner ended while a call waited."""


def _retrieved(task: asyncio.Future[Any]) -> None:
    """Mark a dropped call's outcome as seen (asyncio logs an exception no one retrieved)."""
    if not task.cancelled():
        task.exception()


async def _stopped(runner: asyncio.Task[None], *, cancel: bool = False) -> None:
    """``runner`` ended, cancelled first when ``cancel`` (it has not opened). A closing runner is
    never cancelled: the SDK's stdio shutdown (stdin closed, then terminate, then kill: seconds)
    is shielded from anyio's cancellation, not a task's, and cut short leaves the server running."""
    if cancel:
        runner.cancel()
    await asyncio.wait((runner,))
    _retrieved(runner)

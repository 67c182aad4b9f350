"""Generated malformed server behaviour, through a whole Agent run (OpenAIProvider, the real SDK, the
loopback server, a Recorder on a temp store): whatever the server sends, the run ends with a clear
status, nothing escapes ``run()``, retries are bounded, the API key reaches neither the store nor
the logs, every request sent back pairs each tool call with one result, and the store says what
happened.

What is generated is what OpenAI-compatible servers (vLLM, Ollama, LM Studio, OpenRouter, llama.cpp
and the proxies before them) are seen to send: arguments that are not JSON, cut short, not an object
or an object; empty, unknown and repeated names and ids; content null, as parts, of another type;
refusals; odd finish reasons and counts; unknown fields; 200s that are errors, HTML or not JSON;
429/5xx with and without Retry-After; streams split mid-UTF-8 and mid-JSON, without [DONE], without
a finish reason, with error events, cut mid-chunk. (A slow server is covered by
``test_openai_retries.py``: its timeout takes real time.)
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from agent import Agent, tool
from agent.providers import OpenAIProvider
from tests.agent.providers.conftest import OpenAIServer, Reply
from tests.agent.providers.openaikit import Sleeps, chunk, completion
from tracer import Recorder, Store

KEY = "token-HYPO-7f3a9c2e51"  # not shaped like sk-...: only the provider itself knows to mask it
MAX_TURNS, MAX_RETRIES = 3, 2


@tool
async def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: sunny"


# -- what a server sends ----------------------------------------------------------------------

texts = st.text(max_size=12)
counts = st.one_of(st.integers(-3, 50), st.just(10**30), st.sampled_from(["12", "many", ""]), st.none(),
                   st.floats(allow_nan=True, allow_infinity=True), st.booleans())
ids = st.one_of(st.sampled_from(["c1", "c2", "", "call_1_0"]), st.none(), st.integers(0, 2))
names = st.one_of(st.sampled_from(["get_weather", "get_weather", "", "no_such_tool"]), st.none(), st.integers(0, 9),
                  st.just(["get_weather"]))
arguments = st.one_of(
    st.sampled_from(['{"city": "Oslo"}', '{"city": "Os', '{"ci', "[1, 2]", '"Oslo"', "null", "{city: Oslo}", "",
                     '{"city": 5}', '{"town": "Oslo"}', '{"city": "Oslo"} trailing']),
    st.none(), st.just({"city": "Oslo"}), st.just(["Oslo"]), st.integers(), texts,
)
functions = st.fixed_dictionaries({}, optional={"name": names, "arguments": arguments})
calls = st.one_of(
    st.fixed_dictionaries({"type": st.just("function")}, optional={"id": ids, "function": functions}),
    st.sampled_from(["hello", None, 5]),
)
parts = st.lists(st.one_of(st.fixed_dictionaries({"type": st.just("text"), "text": texts}),
                           st.just({"type": "image_url", "image_url": {"url": "x"}}), st.just("bare")), max_size=3)
contents = st.one_of(st.none(), texts, st.just("Sunny."), parts, st.integers(), st.just({"text": "x"}))
finishes = st.one_of(st.sampled_from(["stop", "tool_calls", "length", "content_filter", "eos"]), st.none(),
                     st.integers(0, 5))
usage_bodies = st.fixed_dictionaries({"prompt_tokens": counts}, optional={
    "completion_tokens": counts, "prompt_tokens_details": st.one_of(st.none(), st.fixed_dictionaries({"cached_tokens": counts}))})
usages = st.one_of(st.none(), st.just("lots"), usage_bodies)
server_errors = st.fixed_dictionaries({"message": st.sampled_from(["Upstream overloaded", f"bad key {KEY}", ""])},
                                      optional={"code": st.one_of(st.sampled_from([429, 500, 502, 401, 400]), texts)})
messages = st.fixed_dictionaries({"role": st.just("assistant")}, optional={
    "content": contents,
    "tool_calls": st.one_of(st.lists(calls, max_size=3), st.just({"id": "x"}), st.just("oops"), st.none()),
    "refusal": st.one_of(st.none(), st.just("I can't help with that."), st.just("")),
    "reasoning_content": texts, "x_unknown": st.integers(),
})
choices = st.fixed_dictionaries({"index": st.just(0)}, optional={"message": messages, "finish_reason": finishes,
                                                                 "logprobs": st.none()})
bodies = st.fixed_dictionaries(
    {"id": st.one_of(st.just("chatcmpl-1"), st.integers(), st.none()), "object": st.just("chat.completion"),
     "choices": st.one_of(st.lists(choices, min_size=1, max_size=2), st.just([]), st.just("x"), st.none())},
    optional={"usage": usages, "model": st.one_of(texts, st.integers(), st.none()), "error": server_errors,
              "system_fingerprint": texts, "x_unknown": st.dictionaries(texts, st.integers(), max_size=2)},
)

retry_afters = st.one_of(st.none(), st.sampled_from(["0", "1", "120", "soon", "Wed, 21 Oct 2015 07:28:00 GMT", "-1"]))


@st.composite
def http_errors(draw: st.DrawFn) -> Reply:
    status = draw(st.sampled_from([429, 500, 502, 503, 401, 400, 404, 422]))
    headers: dict[str, str] = {}
    retry_after = draw(retry_afters)
    if retry_after is not None:
        headers["retry-after"] = retry_after
    if draw(st.booleans()):
        headers["retry-after-ms"] = draw(st.sampled_from(["5", "x", "99999999"]))
    body = draw(st.sampled_from([
        json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}", "type": "invalid_request_error"}}),
        json.dumps({"error": "rate limited"}), json.dumps({"detail": [{"msg": "field required"}]}),
        "<html><body>502 Bad Gateway</body></html>", "", "not json",
    ]))
    return Reply(status, body.encode(), content_type=draw(st.sampled_from(["application/json", "text/html"])),
                 headers=headers)


@st.composite
def whole_bodies(draw: st.DrawFn) -> Reply:
    """One non-streamed 200 reply: a completion of generated shape, or a body that is not one."""
    kind = draw(st.sampled_from(["calls"] * 4 + ["message"] * 3 + ["envelope"] * 3
                                + ["list", "null", "html", "not json", "cut", "reset"]))
    if kind == "calls":  # a well-formed envelope around generated calls: the loop runs them, or says why not
        body = completion(draw(st.one_of(st.none(), texts)), finish=draw(st.sampled_from(["tool_calls", "length"])))
        body["choices"][0]["message"]["tool_calls"] = draw(st.lists(calls, min_size=1, max_size=3))
        return OpenAIServer.json(body)
    if kind == "message":
        body = completion()
        body["choices"][0].update(message=draw(messages), finish_reason=draw(finishes))
        return OpenAIServer.json(body)
    if kind == "envelope":
        return OpenAIServer.json(draw(bodies))
    if kind == "list":
        return OpenAIServer.json([1, 2])
    if kind == "null":
        return OpenAIServer.json(None)
    if kind == "html":
        return OpenAIServer.raw("<!DOCTYPE html><html>Welcome to nginx!</html>", content_type="text/html")
    if kind == "not json":
        return OpenAIServer.raw("Internal Server Error")
    whole = json.dumps(completion("Sunny.")).encode()
    at = draw(st.integers(1, len(whole) - 1))
    if kind == "cut":  # HTTP/1.0 without a length: the connection closes, the body is cut short
        return Reply(200, events=(whole[:at],))
    return reset_after(whole[:at], "application/json")


def reset_after(data: bytes, content_type: str) -> Reply:
    """A chunked reply whose connection closes inside a chunk (a reset mid-response)."""
    return Reply(200, content_type=content_type, headers={"transfer-encoding": "chunked"},
                 events=(f"{len(data) + 50:x}\r\n".encode() + data,))


fragments = st.fixed_dictionaries({}, optional={
    "index": st.one_of(st.integers(0, 1), st.none(), st.just("0")), "id": ids, "type": st.just("function"),
    "function": st.fixed_dictionaries({}, optional={"name": names, "arguments": st.one_of(
        st.sampled_from(['{"city": ', '"Oslo"}', "{", "}", "", '{"city": "Oslo"}']), st.none(), st.just({"a": 1}))})})
deltas = st.fixed_dictionaries({}, optional={
    "role": st.just("assistant"), "content": st.one_of(st.none(), texts, st.just("héllo wörld ✓"), parts, st.integers()),
    "tool_calls": st.one_of(st.lists(fragments, max_size=2), st.just({"index": 0}), st.none()),
    "refusal": st.one_of(st.none(), st.just("I can't.")),
})


@st.composite
def streams(draw: st.DrawFn) -> Reply:
    """One streamed reply: generated chunks, maybe a finish, usage, an error event or garbage, maybe
    [DONE]; its bytes split anywhere (mid-UTF-8, mid-JSON), or cut by a reset."""
    events: list[str] = [json.dumps(chunk(d)) for d in draw(st.lists(deltas, max_size=4))]
    if draw(st.integers(0, 3)):
        events.append(json.dumps({**chunk(), "choices": [{"index": 0, "delta": {}, "finish_reason": draw(finishes)}]}))
    if draw(st.booleans()):
        events.append(json.dumps(chunk(usage=draw(usage_bodies))))
    extra = draw(st.sampled_from([None, None, "error", "garbage", "list", "choices"]))
    if extra == "error":
        events.insert(draw(st.integers(0, len(events))), json.dumps({"error": draw(server_errors)}))
    elif extra == "garbage":
        events.insert(draw(st.integers(0, len(events))), "{not json")
    elif extra == "list":
        events.append("[1, 2]")
    elif extra == "choices":
        events.append(json.dumps({"id": "x", "choices": "abc"}))
    data = "".join(f"data: {e}\n\n" for e in events) + ("data: [DONE]\n\n" if draw(st.booleans()) else "")
    raw = data.encode()
    if raw and draw(st.integers(0, 9)) == 0:
        return reset_after(raw[: draw(st.integers(0, len(raw) - 1))], "text/event-stream")
    cuts = sorted(set(draw(st.lists(st.integers(0, len(raw)), max_size=6))))
    pieces = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True) if b > a]
    return Reply(200, content_type="text/event-stream", events=tuple(pieces))


GOOD = {False: OpenAIServer.json(completion("Done.")),
        True: OpenAIServer.sse([chunk({"role": "assistant", "content": "Done."}), chunk(finish="stop")])}


@st.composite
def scripts(draw: st.DrawFn) -> tuple[bool, list[Reply]]:
    """Whether the agent streams, and the replies the server gives, in order: one to four malformed
    ones, then (mostly) a good answer the run can end with."""
    stream = draw(st.booleans())
    malformed = st.one_of(streams() if stream else whole_bodies(), http_errors())
    replies = draw(st.lists(malformed, min_size=1, max_size=4))
    if draw(st.integers(0, 4)):
        replies.append(GOOD[stream])
    return stream, replies


# -- the run ----------------------------------------------------------------------------------


class Logged(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture(scope="module")
def server(module_openai_server: OpenAIServer) -> OpenAIServer:
    return module_openai_server


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    opened = Store.open(Path(tmp_path_factory.mktemp("malformed")) / "s.duckdb")
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def logged() -> Iterator[Logged]:
    handler = Logged()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


#: One TLS context for every client: building one reads the CA bundle (~40 ms), and the loopback
#: server speaks plain HTTP anyway.
_TLS = ssl.create_default_context()


async def run_against(server: OpenAIServer, store: Store, stream: bool) -> tuple[Any, Sleeps]:
    sleeps = Sleeps()
    client = openai.AsyncOpenAI(api_key=KEY, base_url=server.base_url, max_retries=0, timeout=10,
                                http_client=openai.DefaultAsyncHttpxClient(verify=_TLS))
    provider = OpenAIProvider("m", client=client, max_retries=MAX_RETRIES, sleep=sleeps, jitter=lambda cap: cap)
    agent = Agent("a", provider=provider, tools=[get_weather], recorder=Recorder(store), max_turns=MAX_TURNS,
                  stream_inference=stream)
    try:
        return await agent.run("Weather in Oslo?"), sleeps
    finally:
        await client.close()


def assert_pairs_every_call_with_one_result(body: Any) -> None:
    """A request the agent sent: each assistant message's calls have distinct, non-empty ids, and
    the tool messages after it answer exactly those."""
    messages = body["messages"]
    for i, message in enumerate(messages):
        if message["role"] != "assistant" or not message.get("tool_calls"):
            continue
        sent = [call["id"] for call in message["tool_calls"]]
        assert all(isinstance(s, str) and s for s in sent) and len(set(sent)) == len(sent), sent
        answers = [m["tool_call_id"] for m in messages[i + 1: i + 1 + len(sent)] if m["role"] == "tool"]
        assert sorted(answers) == sorted(sent), (sent, answers)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                    HealthCheck.too_slow])
@given(scripts())
def test_whatever_the_server_sends_the_run_ends_clearly(
    server: OpenAIServer, store: Store, logged: Logged, script: tuple[bool, list[Reply]]
) -> None:
    stream, replies = script
    with server._lock:
        server.replies.clear()
    before = len(server.received)
    server.script(*replies)

    result, sleeps = asyncio.run(run_against(server, store, stream))  # raises nothing

    event(f"{result.stop_reason} after {len(server.received) - before} request(s)")
    assert result.status in ("answered", "failed")
    assert result.stop_reason in ("answered", "provider_error", "max_turns"), result.error
    if result.status == "failed":
        assert result.error and (result.stop_reason == "max_turns" or result.error.startswith("Provider")), result.error
    else:
        assert result.answer  # an empty response is an error, never an empty answer
    assert KEY not in (result.error or "") and KEY not in result.answer
    requests = server.received[before:]
    assert len(requests) <= MAX_TURNS * (MAX_RETRIES + 1)
    assert len(sleeps) <= MAX_TURNS * MAX_RETRIES and all(0 <= s <= 60 for s in sleeps)
    for request in requests:
        assert_pairs_every_call_with_one_result(request.body)

    store.flush()
    data = store.load_run(result.run_id)
    assert (data.run.status, data.run.error or None) == (result.status, result.error or None)
    inferences = sorted((s for s in data.stages if s.kind == "inference"), key=lambda s: s.seq)
    assert 1 <= len(inferences) <= MAX_TURNS
    if result.stop_reason == "provider_error":  # the failed call is on its stage, the error on the run's
        assert inferences[-1].status == "error"
        assert any(s.kind == "error" for s in data.stages)
    if result.status == "answered":
        assert data.run.output == result.answer
        assert isinstance(inferences[-1].attributes.get("finish_reason"), str)


def test_the_key_reached_neither_the_store_nor_the_logs(server: OpenAIServer, store: Store, logged: Logged) -> None:
    """The key every run sent, and that some errors quoted back, is in no stored value and no log
    line — of these runs, and of the generated ones before them (module order)."""
    quoted = f"Incorrect API key provided: {KEY}"
    for stream, reply in [(False, OpenAIServer.error(401, quoted)), (False, OpenAIServer.json({"error": {"message": quoted}})),
                          (True, OpenAIServer.sse([{"error": {"message": quoted}}]))]:
        with server._lock:
            server.replies.clear()
        server.script(*[reply] * (MAX_RETRIES + 1))  # a 200 error without a code is retried as a server's
        result, _ = asyncio.run(run_against(server, store, stream))
        assert result.status == "failed" and "[REDACTED]" in (result.error or "")
    store.flush()
    tables = [name for (name,) in store.query(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' AND table_type = 'BASE TABLE'")]
    assert "fp_run" in tables
    assert store.query("SELECT count(*) FROM fp_run")[0][0] > 0
    for table in tables:
        rows = store.query(f"SELECT * FROM {table}")
        assert KEY not in repr(rows), table
    assert not [line for line in logged.lines if KEY in line]

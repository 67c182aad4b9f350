"""Streamed tool calls, generated: whatever convention a server streams its calls' fragments in,
they assemble to the calls it meant.

The conventions servers really use: an ``index`` per call (OpenAI, vLLM), ``index`` 0 for every
call with a new id for each (Ollama behind LiteLLM, Gemini's OpenAI endpoint, some SGLang builds),
no index at all; and the id on each call's first fragment only, or repeated in every fragment
(some repeat the name too). Calls of several ids at index 0 became one call with their arguments
run together; a call with no index and its id repeated split in two. Each example streams through
the real SDK from the loopback server.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from typing import Any

import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.providers import OpenAIProvider, ResponseDone, ToolCall
from tests.agent.providers.conftest import OpenAIServer, make_request
from tests.agent.providers.openaikit import WEATHER_TOOL, chunk

INDEXES = ("per call", "always 0", "none")
IDS = ("first fragment", "every fragment")
_TLS = ssl.create_default_context()  # one for every example: building one reads the CA bundle


@pytest.fixture(scope="module")
def server(module_openai_server: OpenAIServer) -> OpenAIServer:
    return module_openai_server


values = st.one_of(st.integers(-5, 500), st.text(max_size=8), st.booleans(), st.none())
arguments = st.dictionaries(st.text(min_size=1, max_size=6), values, max_size=4).map(json.dumps)
call_lists = st.lists(
    st.tuples(st.uuids().map(lambda u: f"call_{u.hex[:10]}"), st.sampled_from(["get_weather", "get_time", "search"]),
              arguments),
    min_size=1, max_size=4, unique_by=lambda call: call[0],
)


@st.composite
def streams(draw: st.DrawFn) -> tuple[str, str, list[ToolCall], list[list[dict[str, Any]]]]:
    """A convention, the calls, and the chunks' ``tool_calls`` lists that stream them."""
    index_mode, id_mode = draw(st.sampled_from(INDEXES)), draw(st.sampled_from(IDS))
    calls = [ToolCall(*call) for call in draw(call_lists)]
    # a fragment can only be told apart from another call's by its index or its id
    interleave = index_mode == "per call" or id_mode == "every fragment"
    # with neither index nor id on a fragment, only a name says a call starts: it is sent once
    repeat_name = draw(st.booleans()) and not (index_mode == "none" and id_mode == "first fragment")
    pieces: list[list[dict[str, Any]]] = []
    for call in calls:
        cuts = sorted(draw(st.lists(st.integers(0, len(call.arguments)), max_size=5)))
        texts = [call.arguments[a:b] for a, b in zip([0, *cuts], [*cuts, len(call.arguments)], strict=True)]
        fragments = []
        for position, text in enumerate(texts):
            fragment: dict[str, Any] = {"function": {"arguments": text}}
            if position == 0 or repeat_name:
                fragment["function"]["name"] = call.name
            if position == 0 or id_mode == "every fragment":
                fragment.update(id=call.id, type="function")
            fragments.append(fragment)
        pieces.append(fragments)
    # the fragments of different calls mixed (each call's in its order) when they can be told apart
    order = [n for n, fragments in enumerate(pieces) for _ in fragments]
    if interleave:
        order = draw(st.permutations(order))
    started = list(dict.fromkeys(order))  # the calls in the order they start
    sequence, taken = [], [0] * len(pieces)
    for n in order:
        fragment = pieces[n][taken[n]]
        taken[n] += 1
        if index_mode != "none":  # a server numbers its calls in the order it starts them
            fragment["index"] = started.index(n) if index_mode == "per call" else 0
        sequence.append(fragment)
    calls = [calls[n] for n in started]
    # one chunk may carry several fragments
    chunks: list[list[dict[str, Any]]] = []
    while sequence:
        size = draw(st.integers(1, 3))
        chunks.append(sequence[:size])
        sequence = sequence[size:]
    return index_mode, id_mode, calls, chunks


async def assembled(server: OpenAIServer, chunks: list[list[dict[str, Any]]]) -> tuple[ToolCall, ...]:
    server.script(server.sse([chunk({"role": "assistant", "content": None}),
                              *[chunk({"tool_calls": calls}) for calls in chunks], chunk(finish="tool_calls")]))
    client = openai.AsyncOpenAI(api_key="k", base_url=server.base_url, max_retries=0, timeout=10,
                                http_client=openai.DefaultAsyncHttpxClient(verify=_TLS))
    provider = OpenAIProvider("m", client=client, max_retries=0)
    try:
        events = [event async for event in provider.stream(make_request("go", tools=[WEATHER_TOOL]))]
    finally:
        await client.close()
    done = events[-1]
    assert isinstance(done, ResponseDone)
    return done.response.tool_calls


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(streams())
def test_every_convention_assembles_the_calls_it_streams(
    server: OpenAIServer, stream: tuple[str, str, list[ToolCall], list[list[dict[str, Any]]]]
) -> None:
    index_mode, id_mode, calls, chunks = stream
    with server._lock:
        server.replies.clear()

    got = asyncio.run(assembled(server, chunks))

    assert list(got) == calls, (index_mode, id_mode, chunks)


def test_the_conventions_servers_were_seen_to_use(server: OpenAIServer) -> None:
    """The two that were mis-assembled, written out."""
    one, two = ToolCall("a1", "get_weather", '{"city": "Oslo"}'), ToolCall("b2", "get_time", '{"tz": "CET"}')
    index_zero = [[{"index": 0, "id": "a1", "function": {"name": "get_weather", "arguments": '{"city": '}}],
                  [{"index": 0, "function": {"arguments": '"Oslo"}'}}],
                  [{"index": 0, "id": "b2", "function": {"name": "get_time", "arguments": ""}}],
                  [{"index": 0, "function": {"arguments": '{"tz": "CET"}'}}]]
    no_index = [[{"id": "a1", "function": {"name": "get_weather", "arguments": '{"city": '}}],
                [{"id": "a1", "function": {"arguments": '"Oslo"}'}}]]
    assert asyncio.run(assembled(server, index_zero)) == (one, two)
    assert asyncio.run(assembled(server, no_index)) == (one,)

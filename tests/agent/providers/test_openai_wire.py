"""Reading what OpenAI-compatible servers really send back (agent.providers._openai_wire), through
the real SDK against the loopback server: content as parts, counts as strings, ids as numbers, a
refusal, an empty answer, a 200 that is only an error, a key quoted back."""

from __future__ import annotations

from typing import Any

import pytest

from agent.errors import ProviderAuthError, ProviderResponseError, ProviderServerError
from agent.providers import OpenAIProvider, ResponseDone, ToolCall, Usage
from tests.agent.providers.openaikit import WEATHER_TOOL, MakeRequest, Sleeps, chunk, collect, completion


def with_message(**message: Any) -> dict[str, Any]:
    body = completion(None)
    body["choices"][0]["message"] = {"role": "assistant", **message}
    return body


# -- complete ----------------------------------------------------------------------------------


async def test_content_as_a_list_of_parts_is_its_text(
    provider: OpenAIProvider, openai_server: Any, request_of: MakeRequest
) -> None:
    """Content sent as parts ([{"type": "text", ...}]) raised AttributeError out of agent.run()."""
    parts = [{"type": "text", "text": "Sun"}, {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "ny."}]
    openai_server.script(openai_server.json(with_message(content=parts)))
    response = await provider.complete(request_of("hi"))
    assert response.text == "Sunny."


@pytest.mark.parametrize(("content", "kind"), [(5, "a number"), ({"text": "x"}, "an object"), (True, "a boolean")])
async def test_content_that_is_not_text_is_a_response_error_naming_the_field(
    provider: OpenAIProvider, openai_server: Any, request_of: MakeRequest, content: Any, kind: str
) -> None:
    """A number as content raised TypeError deep in the recorder."""
    openai_server.script(openai_server.json(with_message(content=content)))
    with pytest.raises(ProviderResponseError, match=rf"choices\[0\]\.message\.content is {kind}, not text"):
        await provider.complete(request_of("hi"))


async def test_counts_ids_and_names_of_the_wrong_type_are_read_or_dropped(
    provider: OpenAIProvider, openai_server: Any, request_of: MakeRequest
) -> None:
    """A count as a string raised ValueError (an internal error); a model name as a number raised
    AttributeError out of agent.run(); counts past 64 bits broke the store's writer."""
    body = completion(None, tool_calls=[("c1", "get_weather", "{}")], finish="tool_calls")
    body.update(model=7, id=12, usage={"prompt_tokens": "40", "completion_tokens": "many",
                                       "prompt_tokens_details": {"cached_tokens": 1e30}})
    call = body["choices"][0]["message"]["tool_calls"][0]
    call["id"], call["function"]["name"] = 3, ["get_weather"]
    body["choices"][0]["finish_reason"] = 1
    openai_server.script(openai_server.json(body))

    response = await provider.complete(request_of("hi", tools=[WEATHER_TOOL]))

    assert (response.model, response.response_id, response.finish_reason) == ("7", "12", "1")
    assert response.usage == Usage(input_tokens=40, output_tokens=0, cached_tokens=0)
    assert response.tool_calls == (ToolCall("3", "", "{}"),)  # no tool is named "": the loop says so


@pytest.mark.parametrize(("tool_calls", "kind"), [({"id": "c1"}, "an object"), ("oops", "a string")])
async def test_tool_calls_that_are_not_a_list_are_a_response_error(
    provider: OpenAIProvider, openai_server: Any, request_of: MakeRequest, tool_calls: Any, kind: str
) -> None:
    """A string of tool calls became one nameless call per character, each run and answered."""
    openai_server.script(openai_server.json(with_message(content=None, tool_calls=tool_calls)))
    with pytest.raises(ProviderResponseError, match=f"tool_calls is {kind}, not a list"):
        await provider.complete(request_of("hi"))


async def test_a_refusal_is_the_answer_and_the_finish_reason_says_so(
    provider: OpenAIProvider, openai_server: Any, request_of: MakeRequest
) -> None:
    """``message.refusal`` with content null was answered with ""."""
    openai_server.script(openai_server.json(with_message(content=None, refusal="I can't help with that.")))
    response = await provider.complete(request_of("hi"))
    assert (response.text, response.finish_reason) == ("I can't help with that.", "refusal")


@pytest.mark.parametrize(("finish", "hint"), [("stop", ""), ("length", "raise max_tokens")])
async def test_a_response_with_nothing_in_it_is_a_response_error(
    provider: OpenAIProvider, openai_server: Any, request_of: MakeRequest, finish: str, hint: str
) -> None:
    """Content null with no tool calls was answered with "" (a reasoning model that spent its
    max_tokens thinking does this)."""
    openai_server.script(openai_server.json(completion(None, finish=finish)))
    with pytest.raises(ProviderResponseError, match=f"neither text nor tool calls .finish_reason '{finish}'.*{hint}"):
        await provider.complete(request_of("hi"))


async def test_a_200_that_is_only_an_error_says_the_servers_message_and_is_retried(
    provider: OpenAIProvider, openai_server: Any, sleeps: Sleeps, request_of: MakeRequest
) -> None:
    """OpenRouter answers an upstream failure with 200 and {"error": ...}: it was reported as a repr
    of an empty ChatCompletion, and not retried."""
    failure = openai_server.json({"error": {"message": "Upstream overloaded", "code": 502}})
    openai_server.script(failure, openai_server.json(completion("ok")))
    assert (await provider.complete(request_of("hi"))).text == "ok"
    assert sleeps == [0.5]

    openai_server.script(*[failure] * 4)
    with pytest.raises(ProviderServerError, match=r"reported an error \(code 502\): Upstream overloaded$"):
        await provider.complete(request_of("hi"))


async def test_a_key_the_server_quotes_back_is_masked(openai_server: Any, request_of: MakeRequest) -> None:
    """A key not shaped like sk-... (vLLM's --api-key, say) quoted in a 401 reached the run's error,
    and so the store."""
    provider = OpenAIProvider("m", api_key="token-abc123xyz", base_url=openai_server.base_url)
    openai_server.script(openai_server.error(401, "Incorrect API key provided: token-abc123xyz."))
    with pytest.raises(ProviderAuthError) as caught:
        await provider.complete(request_of("hi"))
    assert "token-abc123xyz" not in str(caught.value) and "provided: [REDACTED]." in str(caught.value)
    await provider.aclose()


# -- stream ------------------------------------------------------------------------------------


async def test_a_stream_of_parts_refusals_and_odd_indexes_is_assembled(
    provider: OpenAIProvider, openai_server: Any, request_of: MakeRequest
) -> None:
    """Content parts in a delta raised TypeError (an internal error); a count as a string raised
    ValueError; a refusal streamed was answered with ""."""
    openai_server.script(openai_server.sse([
        chunk({"content": [{"type": "text", "text": "par"}]}), chunk({"content": "ts"}), chunk(finish="stop"),
        chunk(usage={"prompt_tokens": "9", "completion_tokens": None}),
    ]), openai_server.sse([chunk({"refusal": "I can"}), chunk({"refusal": "'t."}), chunk(finish="stop")]))

    first, second = await collect(provider, request_of("hi")), await collect(provider, request_of("hi"))

    assert isinstance(first[-1], ResponseDone) and isinstance(second[-1], ResponseDone)
    assert (first[-1].response.text, first[-1].response.usage) == ("parts", Usage(9, 0))
    assert (second[-1].response.text, second[-1].response.finish_reason) == ("I can't.", "refusal")


async def test_stream_call_fragments_without_an_index_continue_the_call_they_follow(
    provider: OpenAIProvider, openai_server: Any, request_of: MakeRequest
) -> None:
    """Fragments with no index each became a call of their own (the second a nameless call with half
    the arguments); an index sent as a string did the same."""
    openai_server.script(openai_server.sse([
        chunk({"tool_calls": [{"id": "c1", "function": {"name": "get_weather", "arguments": '{"ci'}}]}),
        chunk({"tool_calls": [{"function": {"arguments": 'ty": "Oslo"}'}}]}),
        chunk({"tool_calls": [{"index": "1", "id": "c2", "function": {"name": "get_weather", "arguments": "{"}}]}),
        chunk({"tool_calls": [{"index": "1", "function": {"arguments": "}"}}]}),
        chunk(finish="tool_calls"),
    ]))
    [done] = await collect(provider, request_of("hi", tools=[WEATHER_TOOL]))
    assert isinstance(done, ResponseDone)
    assert done.response.tool_calls == (ToolCall("c1", "get_weather", '{"city": "Oslo"}'),
                                        ToolCall("c2", "get_weather", "{}"))


async def test_a_stream_with_nothing_in_it_is_a_response_error(
    provider: OpenAIProvider, openai_server: Any, request_of: MakeRequest
) -> None:
    openai_server.script(openai_server.sse([chunk({"role": "assistant"}), chunk(finish="stop")]))
    with pytest.raises(ProviderResponseError, match="neither text nor tool calls"):
        await collect(provider, request_of("hi"))


async def test_stream_tool_calls_that_are_not_a_list_are_a_response_error(
    provider: OpenAIProvider, openai_server: Any, request_of: MakeRequest
) -> None:
    openai_server.script(openai_server.sse([chunk({"tool_calls": {"index": 0}}), chunk(finish="tool_calls")]))
    with pytest.raises(ProviderResponseError, match=r"delta\.tool_calls is an object, not a list"):
        await collect(provider, request_of("hi"))

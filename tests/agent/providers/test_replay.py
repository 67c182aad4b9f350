"""ReplayProvider: record a provider's exchanges to a cassette, replay them with no model call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent import Agent, Fact, InMemoryFacts, tool
from agent.errors import RealModelBlockedError, ReplayMismatchError, UserError
from agent.providers import (
    FunctionModel,
    ModelRequest,
    ModelResponse,
    Provider,
    ReplayProvider,
    ScriptedModel,
    Usage,
    calls,
    cassette_path,
    check_real_model_allowed,
    tool_results,
)


@tool
async def weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: sunny"


def weather_model() -> ScriptedModel:
    return ScriptedModel([
        calls(("weather", {"city": "Oslo"}, "call_a")),
        ModelResponse("Sunny in Oslo.", usage=Usage(120, 8), model="gpt-4o-mini", response_id="resp-2"),
    ])


def agent_on(provider: Provider, city: str = "Oslo") -> Agent:
    facts = InMemoryFacts({"u": [Fact("profile.city", f"The user lives in {city}.")]})
    return Agent("assistant", provider=provider, tools=[weather], facts=facts, user_id="u",
                 conversation_id="conv-1")


async def test_record_then_replay_with_no_model_call(tmp_path: Path) -> None:
    real = weather_model()
    recorder = ReplayProvider("weather", provider=real, mode="record", root=tmp_path)
    recorded = await agent_on(recorder).run("Weather at home?")
    assert recorded.answer == "Sunny in Oslo." and real.calls_made == 2

    document = json.loads((tmp_path / "weather.json").read_text())
    assert document["format"] == "footprint.cassette/1"
    first, second = document["exchanges"]
    assert first["turn"] == 1 and first["key"] == real.requests[0].key
    assert first["response"]["tool_calls"] == [{"id": "call_a", "name": "weather", "arguments": '{"city": "Oslo"}'}]
    assert second["response"]["usage"] == {"input_tokens": 120, "output_tokens": 8, "cached_tokens": 0}
    # the request summary is readable: a changed prompt shows up in a diff of the cassette
    assert {"kind": "memory", "origin": "memory:profile.city", "text": "The user lives in Oslo."}.items() <= \
        first["request"][2].items()
    assert [e["kind"] for e in first["request"]][-3:] == ["user", "tool_definition", "settings"]

    replay = ReplayProvider("weather", root=tmp_path)
    assert replay.mode == "replay" and replay.real is False
    replayed = await agent_on(replay).run("Weather at home?")
    assert replayed.answer == "Sunny in Oslo." and replayed.tool_calls == 1
    assert replay.calls == 2 and real.calls_made == 2  # nothing reached the wrapped model
    assert replayed.usage == recorded.usage


async def test_replay_presents_the_recorded_provider_and_model(tmp_path: Path) -> None:
    class NamedModel(ScriptedModel):  # like OpenAIProvider: a name and a model the settings item names
        name = "openai"
        model = "gpt-4o-mini"

    recorder = ReplayProvider("named", provider=NamedModel(["hello"]), mode="record", root=tmp_path)
    await Agent("a", provider=recorder, conversation_id="c").run("hi")
    replay = ReplayProvider("named", root=tmp_path)
    assert (replay.name, replay.model) == ("openai", "gpt-4o-mini")
    assert (await Agent("a", provider=replay, conversation_id="c").run("hi")).answer == "hello"


async def test_a_request_not_in_the_cassette_fails_naming_the_stage_and_the_difference(tmp_path: Path) -> None:
    await agent_on(ReplayProvider("weather", provider=weather_model(), mode="record", root=tmp_path)).run(
        "Weather at home?")
    replay = ReplayProvider("weather", root=tmp_path)
    agent = agent_on(replay, city="Bergen")  # the memory fact changed since the recording
    with pytest.raises(ReplayMismatchError) as caught:
        await agent.run("Weather at home?")
    error = caught.value
    assert error.stage == "model call 1"
    message = str(error)
    assert "model call 1 (turn 1) sent a request that is not in cassette" in message
    assert "the nearest recorded request is turn 1" in message
    assert ("changed  #2 memory [memory:profile.city]: 'The user lives in Oslo.' -> 'The user lives in Bergen.'"
            in error.difference)
    assert "record the cassette again" in message
    assert not agent.busy


async def test_the_mismatch_lists_added_and_removed_items(tmp_path: Path) -> None:
    await agent_on(ReplayProvider("weather", provider=weather_model(), mode="record", root=tmp_path)).run(
        "Weather at home?")
    agent = Agent("assistant", provider=ReplayProvider("weather", root=tmp_path), tools=[],
                  conversation_id="conv-1")  # no memory fact, no tool
    with pytest.raises(ReplayMismatchError) as caught:
        await agent.run("Weather at home?")
    difference = caught.value.difference
    assert "removed  #2 memory [memory:profile.city]: 'The user lives in Oslo.'" in difference
    assert "removed" in difference and "tool_definition [config:tool:weather]" in difference


async def test_the_failed_run_is_recorded_before_the_mismatch_is_raised(tmp_path: Path) -> None:
    from tracer import Recorder, Store

    await agent_on(ReplayProvider("weather", provider=weather_model(), mode="record", root=tmp_path)).run(
        "Weather at home?")
    store = Store.open(tmp_path / "s.duckdb")
    agent = agent_on(ReplayProvider("weather", root=tmp_path), city="Bergen")
    agent.recorder = Recorder(store)
    with pytest.raises(ReplayMismatchError):
        await agent.run("Weather at home?")
    store.flush()
    run = store.list_runs()[0]
    assert run.status == "failed" and run.attributes["stop_reason"] == "replay_mismatch"
    assert "not in cassette" in (run.error or "")
    store.close()


async def test_a_key_recorded_twice_is_served_in_order(tmp_path: Path) -> None:
    answers = iter(["first", "second"])
    model = FunctionModel(lambda request: next(answers))
    recorder = ReplayProvider("twice", provider=model, mode="record", root=tmp_path)
    request = ModelRequest.of([])
    assert (await recorder.complete(request)).text == "first"
    assert (await recorder.complete(request)).text == "second"
    replay = ReplayProvider("twice", root=tmp_path)
    assert [(await replay.complete(request)).text for _ in range(3)] == ["first", "second", "second"]


async def test_stream_records_and_replays(tmp_path: Path) -> None:
    recorder = ReplayProvider("streamed", provider=ScriptedModel(["streamed text"]), mode="record", root=tmp_path)
    events = [e async for e in recorder.stream(ModelRequest.of([]))]
    assert events[-1].response.text == "streamed text"  # type: ignore[union-attr]
    replay = ReplayProvider("streamed", root=tmp_path)
    replayed = [e async for e in replay.stream(ModelRequest.of([]))]
    assert replayed[0].text == "streamed text"  # type: ignore[union-attr]


def test_modes_and_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cassette_path("weather") == Path("fixtures/cassettes/weather.json")
    assert cassette_path("weather", tmp_path) == tmp_path / "weather.json"
    assert cassette_path(tmp_path / "sub" / "x.json") == tmp_path / "sub" / "x.json"
    with pytest.raises(UserError, match="no cassette at"):
        ReplayProvider("missing", root=tmp_path)
    with pytest.raises(UserError, match="needs the provider to record from"):
        ReplayProvider("missing", mode="record", root=tmp_path)
    with pytest.raises(UserError, match="mode must be"):
        ReplayProvider("missing", mode="sometimes", root=tmp_path)  # type: ignore[arg-type]
    auto = ReplayProvider("fresh", provider=ScriptedModel([]), mode="auto", root=tmp_path)
    assert auto.mode == "record" and (tmp_path / "fresh.json").exists()
    assert ReplayProvider("fresh", provider=ScriptedModel([]), mode="auto", root=tmp_path).mode == "replay"
    monkeypatch.setenv("FOOTPRINT_RECORD", "1")
    assert ReplayProvider("fresh", provider=ScriptedModel([]), mode="auto", root=tmp_path).mode == "record"


def test_a_broken_cassette_is_named(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(UserError, match="cannot read cassette"):
        ReplayProvider("bad", root=tmp_path)
    (tmp_path / "other.json").write_text('{"format": "vcr"}')
    with pytest.raises(UserError, match="not a footprint cassette"):
        ReplayProvider("other", root=tmp_path)
    (tmp_path / "torn.json").write_text('{"format": "footprint.cassette/1", "exchanges": [{"turn": 1}]}')
    with pytest.raises(UserError, match=r"exchange 1 of .* is malformed"):
        ReplayProvider("torn", root=tmp_path)


async def test_an_empty_cassette_says_to_record(tmp_path: Path) -> None:
    ReplayProvider("empty", provider=ScriptedModel([]), mode="record", root=tmp_path)
    with pytest.raises(ReplayMismatchError, match="the cassette is empty"):
        await ReplayProvider("empty", root=tmp_path).complete(ModelRequest.of([]))


@pytest.mark.footprint_expects_blocked  # sees the refusal itself
async def test_recording_a_real_provider_is_blocked_under_pytest(tmp_path: Path) -> None:
    class RealModel(Provider):
        name = "real"
        real = True

        async def complete(self, request: ModelRequest) -> ModelResponse:
            check_real_model_allowed(self.name)
            return ModelResponse("never")

    recorder = ReplayProvider("real", provider=RealModel(), mode="record", root=tmp_path)
    with pytest.raises(RealModelBlockedError):
        await recorder.complete(ModelRequest.of([]))
    assert tool_results(ModelRequest.of([])) == []

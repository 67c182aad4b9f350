"""footprint's pytest plugin, exercised in pytester sessions the way a user's test suite uses it."""

from __future__ import annotations

import json
from importlib.metadata import entry_points
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

AGENT_TEST = '''
import asyncio
from agent import Agent, tool

@tool()
async def lookup(city: str) -> str:
    """Weather for a city.

    Args:
        city: the city
    """
    return f"sunny in {city}"

def run_agent(provider, recorder, message="weather in Paris?"):
    agent = Agent("weather", provider=provider, tools=[lookup], recorder=recorder, session_id="s")
    return asyncio.run(agent.run(message))
'''


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """An inline pytest session (the textual snapshot plugin cannot nest, so it stays out)."""
    return pytester.runpytest(
        "-p", "no:cacheprovider", "-p", "no:textual-snapshot", "-o", "asyncio_default_fixture_loop_scope=function",
        *args,
    )


def test_the_plugin_is_registered_by_its_entry_point() -> None:
    plugins = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert plugins.get("footprint") == "agent.pytest_plugin"


def test_store_recorder_and_test_model_fixtures(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(AGENT_TEST + '''
from agent.providers import calls

def test_records(footprint_store, footprint_recorder, footprint_scripted_model):
    model = footprint_scripted_model(calls(("lookup", {"city": "Paris"})), "It is sunny.")
    result = run_agent(model, footprint_recorder)
    assert result.answer == "It is sunny."
    data = footprint_store.load_run(result.run_id)  # sync durability: readable at once
    assert [s.kind for s in data.stages if s.kind in ("inference", "tool")] == ["inference", "tool", "inference"]

def test_function_model(footprint_function_model, footprint_recorder):
    model = footprint_function_model(lambda request: "you said: " + request.last_user_text())
    assert run_agent(model, footprint_recorder, "hi").answer == "you said: hi"
''')
    run(pytester).assert_outcomes(passed=2)


def test_real_model_requests_are_blocked_unless_recording(pytester: pytest.Pytester) -> None:
    pytester.makepyfile('''
import pytest
from agent.errors import RealModelBlockedError
from agent.providers import check_real_model_allowed

def test_blocked():
    with pytest.raises(RealModelBlockedError, match="openai"):
        check_real_model_allowed("openai")  # refused, and the refusal fails the test even when caught

@pytest.mark.footprint_record
def test_marked_to_record():
    check_real_model_allowed("openai")
''')
    blocked = run(pytester)
    blocked.assert_outcomes(passed=1, failed=1)
    assert "test_blocked made 1 real model request(s) (openai)" in blocked.stdout.str()
    result = run(pytester, "--footprint-record", "-k", "test_blocked")
    result.assert_outcomes(failed=1)  # recording lets real requests through
    assert "DID NOT RAISE" in result.stdout.str()


def test_record_once_then_replay_without_the_real_model(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(AGENT_TEST + '''
from agent.providers import ScriptedModel, calls

def real_model():
    real_model.built += 1
    return ScriptedModel([calls(("lookup", {"city": "Paris"})), "Sunny, 21 degrees."])
real_model.built = 0

def test_weather(footprint_replay, footprint_recorder):
    model = footprint_replay(provider=real_model)
    assert run_agent(model, footprint_recorder).answer == "Sunny, 21 degrees."
    print("BUILT", real_model.built)
''')
    recorded = run(pytester, "-s", "--footprint-record")
    recorded.assert_outcomes(passed=1)
    assert "BUILT 1" in recorded.stdout.str()
    cassette = pytester.path / "cassettes" / "test_weather.json"
    assert len(json.loads(cassette.read_text())["exchanges"]) == 2

    replayed = run(pytester, "-s")
    replayed.assert_outcomes(passed=1)
    assert "BUILT 0" in replayed.stdout.str()  # the real provider is never built in replay

    test_file = next(pytester.path.glob("test_*.py"))
    test_file.write_text(test_file.read_text().replace('"weather in Paris?"', '"weather in Rome?"'))
    changed = run(pytester)
    changed.assert_outcomes(failed=1)
    assert "ReplayMismatchError" in changed.stdout.str() and "Rome" in changed.stdout.str()


def test_footprint_snapshot_pins_a_run_and_shows_what_changed(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(AGENT_TEST + '''
from agent.providers import ScriptedModel, calls

ANSWER = "It is sunny in Paris."

def test_pinned(footprint_snapshot, footprint_store, footprint_recorder):
    model = ScriptedModel([calls(("lookup", {"city": "Paris"})), ANSWER])
    result = run_agent(model, footprint_recorder)
    assert footprint_snapshot == footprint_store.load_run(result.run_id)
''')
    run(pytester, "--snapshot-update").assert_outcomes(passed=1)
    (snapshot_file,) = (pytester.path / "__snapshots__").rglob("*.flow.txt")
    text = snapshot_file.read_text()
    assert "S2 inference 'turn 1' · ok  <- S1" in text and "S4 tool 'lookup' · ok  <- S3 (fork)  in S3" in text
    assert "#7 tool_result: [call#1] sunny in Paris" in text
    assert "r-0" not in text and "s-0" not in text  # ids are normalized

    run(pytester).assert_outcomes(passed=1)  # a second recording matches

    test_file = next(pytester.path.glob("test_*.py"))
    test_file.write_text(test_file.read_text().replace("It is sunny in Paris.", "It is raining in Paris."))
    changed = run(pytester)
    changed.assert_outcomes(failed=1)
    output = changed.stdout.str()
    assert "It is sunny in Paris." in output and "It is raining in Paris." in output


def test_replay_without_a_cassette_says_how_to_record(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile('''
def test_missing(footprint_replay):
    footprint_replay("nothing-here")
''')
    result = run(pytester)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "no replay cassette at" in out and "nothing-here.json" in out
    assert "pytest --footprint-record test_replay_without_a_cassette_says_how_to_record.py::test_missing" in out


def test_a_test_whose_agent_reached_a_real_model_fails_though_it_asserted_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(AGENT_TEST + '''
from agent.providers import OpenAIProvider

def test_forgot_to_assert(footprint_recorder, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    run_agent(OpenAIProvider("gpt-4o-mini"), footprint_recorder)  # the run fails; the test looks away

def test_fine(footprint_scripted_model, footprint_recorder):
    run_agent(footprint_scripted_model("ok"), footprint_recorder)
''')
    result = run(pytester)
    result.assert_outcomes(failed=1, passed=1)
    out = result.stdout.str()
    assert "test_forgot_to_assert made 1 real model request(s)" in out and "footprint_replay" in out


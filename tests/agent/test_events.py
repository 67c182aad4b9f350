"""What a run returns and what a paused run keeps."""

from __future__ import annotations

import json

import pytest

from agent import PauseState, RunResult
from agent.providers import Usage


def test_pause_state_round_trips_through_json() -> None:
    state = PauseState(
        run_id="r-1", conversation_id="c-1", question="Book it?",
        pending=[{"call": {"id": "c2", "name": "book", "arguments": "{}"}, "kind": "approval", "question": "Book it?"}],
        results={"c1": {"content": "found", "is_error": False}},
        calls=[{"id": "c1", "name": "find", "arguments": "{}"}, {"id": "c2", "name": "book", "arguments": "{}"}],
        turns=1, tool_calls=0, usage={"input_tokens": 5, "output_tokens": 1, "cached_tokens": 0}, next_seq=7,
        last_stage="s-9",
    )
    assert PauseState.from_dict(json.loads(json.dumps(state.to_dict()))) == state


def test_pause_state_names_what_is_missing() -> None:
    with pytest.raises(ValueError, match="lacks 'run_id'"):
        PauseState.from_dict({})


def test_run_result_ok() -> None:
    assert RunResult("hi", "answered", "r-1").ok
    assert not RunResult("", "awaiting", "r-1").ok
    assert RunResult("", "failed", "r-1").usage == Usage()

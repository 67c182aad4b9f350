"""A cassette never holds a secret, and a request whose secrets differ still replays.

Secrets of every kind the redaction policy knows are generated into a run's user message, a tool's
result (as sensitive keys and inside text), the model's tool-call arguments and its answer; the run
is recorded through ``ReplayProvider(mode="record")``. The store masked them; the cassette held them
verbatim. Then the same run with other secrets replays from the cassette, matched on the masked form.
"""

from __future__ import annotations

import asyncio
import json
import string
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent import Agent, tool
from agent.providers import FunctionModel, ModelRequest, ModelResponse, ReplayProvider, calls, tool_results
from tracer import RedactionPolicy

ALNUM = string.ascii_letters + string.digits


def chars(alphabet: str, size: int, most: int | None = None) -> st.SearchStrategy[str]:
    return st.text(alphabet, min_size=size, max_size=most or size)


#: each kind of secret the default policy knows: how text carries it, and the secret's alphabet
#: and length
KINDS: list[tuple[str, str, int, int]] = [
    ("sk-proj-{}", ALNUM, 20, 40),
    ("sk-{}", ALNUM, 24, 40),
    ("ghp_{}", ALNUM, 36, 36),
    ("github_pat_{}", ALNUM + "_", 30, 50),
    ("AKIA{}", string.ascii_uppercase + string.digits, 16, 16),
    ("AIza{}", ALNUM + "_-", 35, 35),
    ("xoxb-{}", ALNUM, 12, 30),
    ("eyJhbGciOiJIUzI1NiJ9.eyJ{}.c2ln", ALNUM, 10, 30),
    ("Authorization: Bearer {}", ALNUM + "._-", 20, 40),
    ("postgresql://app:{}@db.internal/prod", ALNUM, 12, 24),
    ("password={}", ALNUM, 12, 24),
    ("OPENAI_API_KEY={}", ALNUM, 12, 24),
    ("HF_TOKEN={}", ALNUM, 12, 24),
]
SLOTS = ("message", "note", "answer", "argument")  # where a secret of a kind goes
KEYS = ("password", "token", "client_secret")  # the sensitive keys the tool returns


@st.composite
def secrets(draw: st.DrawFn) -> tuple[dict[str, tuple[str, str]], dict[str, tuple[str, str]]]:
    """Two runs' secrets, each a (text carrying it, secret) per place: the same kinds in the same
    places, other values (the user's message, the tool's result, the call's arguments, the answer)."""
    runs: tuple[dict[str, tuple[str, str]], dict[str, tuple[str, str]]] = ({}, {})
    for slot in SLOTS:
        shape, alphabet, least, most = draw(st.sampled_from(KINDS))
        for found in runs:
            secret = draw(st.text(alphabet, min_size=least, max_size=most))
            found[slot] = (shape.format(secret), secret)
    for key in KEYS:
        for found in runs:
            secret = draw(st.text(ALNUM + "-_", min_size=12, max_size=30))
            found[key] = (secret, secret)
    return runs


def run_once(found: dict[str, tuple[str, str]], cassette: Path, *, record: bool) -> tuple[Any, str]:
    """Run an agent through a ReplayProvider recording (or replaying) ``cassette``; its result
    and the cassette's text."""

    @tool
    async def lookup(query: str, api_key: str) -> dict[str, Any]:
        """Look a thing up."""
        return {"query": query, **{key: found[key][0] for key in KEYS}, "note": f"rotate {found['note'][0]} soon"}

    def model(request: ModelRequest) -> ModelResponse | str:
        if not tool_results(request):
            return calls(("lookup", {"query": "db", "api_key": found["argument"][0]}))
        return f"Done; the new one is {found['answer'][0]}."

    real = FunctionModel(model) if record else None
    replay = ReplayProvider(cassette.stem, provider=real, mode="record" if record else "replay",
                            root=cassette.parent)
    agent = Agent("keeper", provider=replay, tools=[lookup], conversation_id="c")
    result = asyncio.run(agent.run(f"My key is {found['message'][0]}; store it."))
    return result, cassette.read_text(encoding="utf-8")


@settings(max_examples=60, deadline=None)
@given(secrets())
def test_a_cassette_holds_no_secret_and_replays_other_secrets(
    runs: tuple[dict[str, tuple[str, str]], dict[str, tuple[str, str]]]
) -> None:
    recorded, other = runs
    with tempfile.TemporaryDirectory() as folder:
        cassette = Path(folder) / "leaky.json"
        first, text = run_once(recorded, cassette, record=True)
        assert first.status == "answered"
        assert first.answer == f"Done; the new one is {recorded['answer'][0]}."  # the caller saw it as it came
        for _, secret in recorded.values():
            assert secret not in text, secret
        assert text.count("[REDACTED]") >= 7
        json.loads(text)  # still a cassette

        again, _ = run_once(other, cassette, record=False)  # other secrets, the same masked requests

        assert again.status == "answered", again.error
        assert "[REDACTED]" in again.answer and recorded["answer"][1] not in again.answer


def test_a_recorders_own_policy_masks_the_cassette_too(tmp_path: Path) -> None:
    policy = RedactionPolicy.with_extra(keys=("ssn",), patterns=(r"EMP-\d{6}",))
    real = FunctionModel(lambda request: "Employee EMP-123456 noted.")
    replay = ReplayProvider("own", provider=real, mode="record", root=tmp_path, redaction=policy)
    result = asyncio.run(Agent("hr", provider=replay).run('{"ssn": "078-05-1120"} for EMP-654321'))

    text = (tmp_path / "own.json").read_text()
    assert result.answer == "Employee EMP-123456 noted."
    assert "078-05-1120" not in text and "EMP-123456" not in text and "EMP-654321" not in text

    replayed = ReplayProvider("own", root=tmp_path, redaction=policy)
    again = asyncio.run(Agent("hr", provider=replayed).run('{"ssn": "219-09-9999"} for EMP-000001'))
    assert again.answer == "Employee [REDACTED] noted."

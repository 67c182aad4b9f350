"""Can blame's evidence be made to lie? Generated ledger sessions (``ledger.py``) at realistic size,
with several faults at once, faults acting only together, duplicates, look-alikes and windows that
drop hundreds of messages, checked against an exact oracle:

* the recorded context of every call is what the model was sent, and what the window left out of
  it is what the window really left out;
* every verdict of an item tested alone is the oracle's (the model applied to the recorded answering
  snapshot with that one edit): a convicted item really changes the answer, an item that cannot is
  never convicted, and each item that alone changes the answer is found;
* a second blame gives the same verdicts;
* ``footprint blame`` and ``footprint why`` on the store say the same, with exit code 0.

``FOOTPRINT_FUZZ=slow`` runs more and bigger sessions (minutes); the default stays within seconds.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from agent.evidence import BlameReport, Suspect, blame
from agent.evidence._recording import read_recording
from tests.agent.evidence.ledger import (
    PLACES,
    Session,
    answer_of,
    generate,
    ledger_provider,
    record,
    tools_for,
)
from tracer import Item, Recorder, Store

SLOW = os.environ.get("FOOTPRINT_FUZZ") == "slow"
EXAMPLES = int(os.environ.get("FOOTPRINT_FUZZ_EXAMPLES", 40 if SLOW else 3))
#: sizes: earlier runs of the session, innocent items of the system context
TURNS = st.integers(150, 600) if SLOW else st.integers(60, 220)
SYSTEM = st.integers(150, 400) if SLOW else st.integers(40, 200)


def _texts(items: list[Item]) -> list[str]:
    return [i.text for i in items]


def expected(report: BlameReport, suspect: Suspect, sent: list[Item], question: list[str]) -> str:
    """The oracle: the verdict the suspect's edit must get (the model applied to the edited snapshot)."""
    original = report.answer
    if suspect.action == "restore":
        edited = [*sent, Item.of_text("user", suspect.text)]
    else:  # remove, or a tool result that returned nothing: its text is gone, wherever it was sent
        edited = [i for i in sent if i.hash != suspect.item_hash]
    answer = answer_of(_texts(edited), question)
    return "holds" if answer == original else "flips"


def check_recording(store: Store, session: Session, sample: int = 6) -> None:
    """The recorded context of each call is what the model was sent, and its left-out list what the
    window left out: for the last runs and ``sample`` others spread over the session (reading every
    run back takes longer than the rest of the test)."""
    requests = session.provider.requests
    windows = session.memory.windows
    assert len(requests) == len(windows), (len(requests), len(windows))
    count = len(session.run_ids)
    chosen = sorted({*range(max(0, count - 3), count), *range(0, count, max(1, count // sample))})
    for index in chosen:
        run_id = session.run_ids[index]
        recording = read_recording(store.load_run(run_id), store)
        for n, inference in enumerate(recording.inferences, session.first_calls[index]):
            sent = [(e.item_hash, e.origin) for e in inference.entries]
            seen = [(ci.item.hash, ci.origin) for ci in requests[n].context]
            assert sent == seen, f"{session.ledger.describe()}: run {run_id} {inference.stage.name}: recorded context " \
                                 f"is not what the model was sent"
            left = [(e.item_hash, e.origin) for e in inference.window_left_out]
            dropped = [(ci.item.hash, ci.origin) for ci in windows[n][1]]
            assert left == dropped, f"{session.ledger.describe()}: run {run_id} {inference.stage.name}: recorded " \
                                    f"{len(left)} left out, the window left out {len(dropped)}"
        end = session.first_calls[index + 1] if index + 1 < count else len(requests)
        assert end - session.first_calls[index] == len(recording.inferences), run_id


def check_blame(store: Store, session: Session, report: BlameReport, *, monotone: bool) -> None:
    """Each verdict against the oracle (see the module docstring)."""
    data = store.load_run(session.run_id)
    recording = read_recording(data, store)
    last = recording.inferences[-1]
    sent = [data.items[e.item_hash] for e in last.entries]
    question = [k for k in session.ledger.keys]
    assert answer_of(_texts(sent), question) == report.answer, "the recorded answer is not the model's on its context"
    where = session.ledger.describe()
    wrong = []
    for suspect in [*report.tested, *report.left_out]:
        if suspect.action == "through":
            # sent only to an earlier run's model: what those runs wrote states nothing the answer reads
            assert suspect.verdict != "flips", f"{where}: convicted {suspect.name} {suspect.text!r} through an earlier run"
            continue
        want = expected(report, suspect, sent, question)
        if suspect.via == "alone" or (monotone and suspect.verdict == "holds"):
            if suspect.verdict != want:
                wrong.append(f"{suspect.verdict} ({suspect.via}, {suspect.action}) but the oracle says {want}: "
                             f"{suspect.kind} {suspect.name} {suspect.text[:90]!r}")
        else:
            assert suspect.verdict in ("holds", "flips"), (suspect.name, suspect.verdict, suspect.reason)
    assert not wrong, f"{where}:\n" + "\n".join(wrong)
    tested = {s.item_hash for s in [*report.tested, *report.left_out]}
    if monotone:  # every item that alone changes the answer is found
        missed = [s for s in report.tested if s.item_hash in tested and s.verdict != "flips"
                  and expected(report, s, sent, question) == "flips"]
        assert not missed, f"{where}: missed {[(m.name, m.text[:60]) for m in missed]}"


def verdicts(report: BlameReport) -> dict[str, tuple[str, str]]:
    return {s.item_hash: (s.verdict, s.via) for s in [*report.tested, *report.left_out]}


async def _scenario(store: Store, **spec: object) -> tuple[Session, BlameReport]:
    ledger = generate(**spec)  # type: ignore[arg-type]
    session = await record(ledger, Recorder(store))
    store.flush()
    check_recording(store, session)
    report = await blame(store, session.run_id, provider=ledger_provider(), tools=tools_for(ledger), repeats=1)
    return session, report


places = st.sampled_from(PLACES)


# no shrinking: a session is hundreds of runs, and the failing example is printed whole
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow],
          phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(seed=st.integers(0, 10**6), turns=TURNS, system=SYSTEM,
       window=st.one_of(st.none(), st.integers(20, 120)), pin=st.sampled_from([0, 0, 3]),
       keys=st.integers(1, 5), faults=st.lists(places, min_size=1, max_size=5),
       lockdown=st.one_of(st.none(), st.tuples(places, places)), duplicates=st.integers(0, 2),
       unasked=st.lists(places, max_size=3))
# the winning statements in this run's search results, which an earlier run's identical search had
# put in the history word for word: blanking only this run's copy held (the history copy still said
# it), so blame cleared the culprits and named nothing
@example(seed=0, turns=60, system=40, window=None, pin=0, keys=2, faults=["search"], lockdown=None, duplicates=0,
         unasked=[])
def test_blame_verdicts_are_the_oracles_on_long_sessions_with_several_faults(
    seed: int, turns: int, system: int, window: int | None, pin: int, keys: int, faults: list[str],
    lockdown: tuple[str, str] | None, duplicates: int, unasked: list[str],
) -> None:
    with tempfile.TemporaryDirectory() as folder, Store.open(Path(folder) / "ledger.duckdb") as store:
        session, report = asyncio.run(_scenario(
            store, seed=seed, turns=turns, window=window, pin=pin, keys=keys, faults=faults, lockdown=lockdown,
            duplicates=duplicates, system_items=system, unasked=unasked))
        check_blame(store, session, report, monotone=True)
        again = asyncio.run(blame(store, session.run_id, provider=ledger_provider(), tools=tools_for(session.ledger),
                                  repeats=1))
        assert verdicts(again) == verdicts(report), "blame gave other verdicts on a second run"


@pytest.mark.parametrize("seed", [3, 5])
def test_blame_with_a_fault_that_is_not_monotone(seed: int, tmp_path: Path) -> None:
    """TICK markers: the parity of their count is in the answer, so removing two of them changes nothing.
    Verdicts of items tested alone are still the oracle's; a tick cleared with a group (seed 5) is
    labelled so (docs/debugging.md: group testing assumes a monotone answer), and every suspect alone
    (``bisect_above``) finds every tick."""
    with Store.open(tmp_path / "ledger.duckdb") as store:
        session, report = asyncio.run(_scenario(store, seed=seed, turns=80, window=40, keys=2, faults=["fact"],
                                                ticks=4, system_items=60))
        check_blame(store, session, report, monotone=False)
        ticks = [s for s in report.tested if "TICK" in s.text]
        assert len(ticks) == 4
        assert all(s.verdict == "flips" or s.via.startswith("group of") for s in ticks)
        every = asyncio.run(blame(store, session.run_id, provider=ledger_provider(),
                                  tools=tools_for(session.ledger), repeats=1, bisect_above=10_000,
                                  include_left_out=False))
        check_blame(store, session, every, monotone=False)
        assert [s.verdict for s in every.tested if "TICK" in s.text] == ["flips"] * 4


def footprint(args: list[str]) -> subprocess.CompletedProcess[str]:
    """The installed ``footprint`` command, run from the repository (so MODULE:FUNC finds the tests' modules)."""
    root = Path(__file__).parents[3]
    env = {**os.environ, "PYTHONPATH": str(root)}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run([str(Path(sys.executable).parent / "footprint"), *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def test_blame_and_why_from_the_cli_on_a_long_session(tmp_path: Path) -> None:
    """``footprint blame`` (JSON and text) and ``footprint why`` on a generated session with a window that
    dropped hundreds of messages: exit code 0, the API's culprits, each culprit among why's suspects; a
    run prefix that is not unique and a provider that cannot be loaded: a clear error, no traceback."""
    db = tmp_path / "ledger.duckdb"
    with Store.open(db) as store:
        session, report = asyncio.run(_scenario(store, seed=11, turns=300, window=40, keys=3,
                                                faults=["note", "retrieved", "lookup"], lockdown=("persona", "search"),
                                                duplicates=1, system_items=120))
        check_blame(store, session, report, monotone=True)
        assert len(report.left_out) > 200 and len(report.culprits) >= 3
    provider = "tests.agent.evidence.ledger:ledger_provider"
    tools = "tests.agent.evidence.ledger:cli_tools"
    done = footprint(["blame", session.run_id, "--db", str(db), "--provider", provider, "--tools", tools,
                      "--repeat", "1", "--json"])
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["culprits"] == [c.item_hash for c in report.culprits]
    assert out["omissions"] == [o.item_hash for o in report.omissions]
    text = footprint(["blame", session.run_id, "--db", str(db), "--provider", provider, "--tools", tools,
                      "--repeat", "1"])
    assert text.returncode == 0, text.stderr
    assert "Culprits" in text.stdout and "Traceback" not in text.stderr
    for culprit in report.culprits:
        assert culprit.item_hash[:12] in text.stdout
    why = footprint(["why", session.run_id, "--db", str(db), "--all", "--json"])
    assert why.returncode == 0, why.stderr
    ranked = {s["item_hash"] for s in json.loads(why.stdout)["ranked"]}
    assert {c.item_hash for c in report.culprits} <= ranked
    prefix = footprint(["blame", session.run_id[:3], "--db", str(db), "--provider", provider])
    assert prefix.returncode != 0 and "Traceback" not in prefix.stderr and prefix.stderr.strip(), prefix.stderr
    wrong = footprint(["blame", session.run_id, "--db", str(db), "--provider", "no.such.module:f"])
    assert wrong.returncode == 2 and "cannot load no.such.module:f" in wrong.stderr and "Traceback" not in wrong.stderr

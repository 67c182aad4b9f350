"""The recording commands: runs, show, why, diff, sql (CliRunner), and their errors (a real process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.tracer.damage import damaged_copies
from tracer import ContextItem, EdgeKind, Item, Origin, Recorder, Store
from tracer import cli as tracer_cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Two runs of session maya (a parallel tool batch; history from run 1 in run 2) and one of bob."""
    path = tmp_path_factory.mktemp("cli") / "store.duckdb"
    with Store.open(path) as store:
        recorder = Recorder(store)
        system = ContextItem(Item.of_text("system", "You are a travel bot."), Origin("config", source="persona"))
        run1 = recorder.start_run(agent="travel", input="Weather at home?", session_id="maya", model="m1")
        with run1.stage("input", "user message") as s_in:
            question = s_in.output(Item.of_text("user", "Weather at home?"), origin_kind="user", source="input")
        with run1.stage("memory", "memory load", after=[s_in]) as s_mem:
            fact = ContextItem(Item("memory", {"text": "The user lives in Berlin.", "key": "profile.home_city"}),
                               s_mem.origin("memory", "profile.home_city"))
        with run1.stage("inference", "turn 1", after=[s_mem]) as s_inf:
            s_inf.inputs([system, fact, question])
            calls = [s_inf.output(Item("tool_call", {"id": f"c{n}", "name": "weather", "arguments": {"day": d}}))
                     for n, d in enumerate(["today", "tomorrow"])]
        batch = run1.stage("tool_batch", "2 tool call(s)", after=[s_inf])
        results = []
        tools = []
        for call in calls:
            with run1.stage("tool", "weather", after=[batch], edge=EdgeKind.FORK, parent=batch) as s_tool:
                s_tool.inputs([call])
                results.append(s_tool.output(Item("tool_result", {"call_id": call.item.body["id"],
                                                                  "content": "sunny"})))
            tools.append(s_tool)
        batch.close()
        with run1.stage("inference", "turn 2", after=tools, edge=EdgeKind.JOIN) as s_inf2:
            s_inf2.inputs([system, fact, question, *calls, *results])
            answer = s_inf2.output(Item.of_text("assistant", "Sunny in Berlin today and tomorrow."))
        with run1.stage("answer", after=[s_inf2]) as s_answer:
            s_answer.inputs([answer])
            s_answer.output(answer.item)
        run1.end("answered", output=answer.text, tokens_in=120, tokens_out=12)

        run2 = recorder.start_run(agent="travel", input="And Paris?", session_id="maya", model="m1")
        with run2.stage("input", "user message") as t_in:
            follow = t_in.output(Item.of_text("user", "And Paris?"), origin_kind="user", source="input")
        with run2.stage("inference", "turn 1", after=[t_in]) as t_inf:
            t_inf.inputs([system, answer, follow], dropped=[(question, "memory_window")])
            reply = t_inf.output(Item.of_text("assistant", "Berlin is sunny; I do not know Paris."))
        with run2.stage("answer", after=[t_inf]) as t_answer:
            t_answer.inputs([reply])
            t_answer.output(reply.item)
        run2.end("answered", output=reply.text)

        run3 = recorder.start_run(agent="support", input="help", session_id="bob")
        run3.end("failed", error="provider down")
    return str(path)


def _invoke(*args: str) -> Result:
    group = click.Group("footprint")
    tracer_cli.register(group)
    result = CliRunner().invoke(group, list(args), catch_exceptions=False)
    return result


def _run_ids(db: str) -> list[str]:
    return [r["id"] for r in json.loads(_invoke("runs", "--db", db, "--json").output)]


def test_runs_lists_and_filters(db: str) -> None:
    out = _invoke("runs", "--db", db).output
    assert out.splitlines()[0].split() == ["run", "started", "agent", "session", "status", "stages", "tokens", "input"]
    assert "And Paris?" in out and "support" in out
    maya = _invoke("runs", "--db", db, "--session", "maya").output
    assert "support" not in maya and maya.count("travel") == 2
    assert "provider" not in _invoke("runs", "--db", db, "--status", "answered").output
    assert "support" in _invoke("runs", "--db", db, "--agent", "support").output
    limited = _invoke("runs", "--db", db, "--limit", "1").output
    assert "(1 of 3 runs" in limited
    rows = json.loads(_invoke("runs", "--db", db, "--json").output)
    assert [r["session_id"] for r in rows] == ["bob", "maya", "maya"]
    assert rows[1]["stages"] == 3 and rows[2]["stages"] == 8
    assert "no runs" in _invoke("runs", "--db", db, "--session", "nobody").output


def test_runs_and_last_leave_re_runs_out_unless_asked(tmp_path: Path) -> None:
    path = tmp_path / "forks.duckdb"
    with Store.open(path) as store:
        recorder = Recorder(store)
        original = recorder.start_run(agent="travel", input="where to?")
        original.end("answered", output="Paris")
        for n in range(3):  # re-runs made after the person's run, as blame makes them
            recorder.start_run(agent="travel", input=f"where to? (re-run {n})", forked_from_run=original.id).end(
                "answered", output="Lisbon")
    out = _invoke("runs", "--db", str(path)).output
    assert "(re-run" not in out and "where to?" in out
    assert "3 re-run(s) of replay, counterfactual and blame hidden: --forks shows them" in out
    shown = _invoke("runs", "--db", str(path), "--forks").output
    assert shown.count("(re-run") == 3 and "hidden" not in shown
    assert json.loads(_invoke("show", "last", "--db", str(path), "--json").output)["run"]["id"] == original.id
    only = _invoke("runs", "--db", str(path), "--session", "nobody").output
    assert "no runs in" in only and "hidden" not in only


def test_show_renders_the_flowchart(db: str) -> None:
    first = _run_ids(db)[2]
    out = _invoke("show", first[:-4], "--db", db).output
    assert f"run      {first}" in out and "status answered" in out
    lines = out.splitlines()
    kinds = [line.split()[1] for line in lines if line[:1].isdigit()]
    assert kinds == ["input", "memory", "inference", "tool_batch", "├─", "└─", "inference", "answer"]
    fork = next(i for i, line in enumerate(lines) if "┌ fork: 2 in parallel" in line)
    assert "├─ tool" in lines[fork + 1] and "└─ tool" in lines[fork + 2] and "└ join" in lines[fork + 3]
    assert "context 3 items" in next(line for line in lines if "turn 1" in line)
    assert "context 7 items" in next(line for line in lines if "turn 2" in line)
    assert "-> sunny" in lines[fork + 1]
    data = json.loads(_invoke("show", "last", "--db", db, "--json").output)
    assert data["run"]["status"] == "failed"


def test_why_prints_the_evidence_tree(db: str) -> None:
    first = _run_ids(db)[2]
    out = _invoke("why", _run_ids(db)[1], "--db", db, "--order", "context").output
    lines = out.splitlines()
    assert lines[1].strip().startswith('assistant  "Berlin is sunny; I do not know Paris."  <- inference (this run')
    memory = next(line for line in lines if "The user lives in Berlin." in line)
    assert memory.strip().startswith('memory  "The user lives in Berlin."  <- memory profile.home_city (run ')
    assert first[:16] in memory and "stage memory load)" in memory
    assert any("shown above]" in line for line in lines)
    dropped = lines[lines.index("not in context (available but not sent):") + 1]
    assert 'user  "Weather at home?"' in dropped and "dropped by memory_window" in dropped
    assert "walked 2 runs of the session" in out


def test_why_json_and_depth(db: str) -> None:
    second = _run_ids(db)[1]
    data = json.loads(_invoke("why", second, "--db", db, "--json").output)
    texts = data["texts"]  # each item's text once, under its hash: no node or entry carries one
    assert texts[data["root"]["item_hash"]] == "Berlin is sunny; I do not know Paris." and len(data["runs"]) == 2
    assert "text" not in data["root"] and all("text" not in r for r in data["ranked"])
    shallow = _invoke("why", second, "--db", db, "--depth", "1", "--order", "context").output
    assert "The user lives in Berlin." not in shallow
    ranked = data["ranked"]
    assert ranked[0]["score"] >= ranked[-1]["score"] and all(r["name"] for r in ranked if r["run_id"] == second)
    assert len({r["item_hash"] for r in ranked}) == len(ranked)  # each item once
    # the answer asserts Berlin: the fact holding it ranks above the coffee-free context
    first = next(r for r in ranked if "Berlin" in texts[r["item_hash"]])
    assert ranked.index(first) < 3 and any("Berlin" in reason or "berlin" in reason for reason in first["reasons"])
    text = _invoke("why", second, "--db", db).output
    assert "most likely first" in text and first["name"] in text
    by_name = _invoke("why", second, "--db", db, "--item", first["name"], "--json").output
    assert json.loads(by_name)["root"]["item_hash"] == first["item_hash"]
    item_text = _invoke("why", second, "--db", db, "--item", first["name"]).output
    assert first["name"] in item_text and "Berlin" in item_text  # the item's walk, not an empty ranking


def test_diff_of_two_runs_and_of_two_stages(db: str) -> None:
    second, first = _run_ids(db)[1:]
    out = _invoke("diff", first, second, "--db", db).output
    assert "First divergence: input 'user message': produced different output" in out
    with Store.open(db, read_only=True) as store:
        answers = [store.get_run(r).output or "" for r in (first, second)]
    flat = " ".join(out.split())
    assert all(len(a) > 20 and " ".join(a.split()) in flat for a in answers)  # both answers whole, not cut
    assert "What the model saw at inference" in out and "origin kind" in out and "Tokens in" in out
    assert _invoke("compare", first, second, "--db", db).output == out  # one command, two names
    assert json.loads(_invoke("compare", first, second, "--db", db, "--json").output)["same_answer"] is False
    with Store.open(db, read_only=True) as store:
        stages = [r[0] for r in store.query("SELECT id FROM stages WHERE kind = 'inference' ORDER BY started_at")]
    out = _invoke("diff", "--stages", stages[0], stages[1], "--db", db).output
    assert "added" in out and "tool_result" in out and "total" in out
    data = json.loads(_invoke("diff", "--stages", stages[1], stages[2], "--db", db, "--json").output)
    assert {e["change"] for e in data["entries"]} >= {"dropped", "added"}


def test_sql_prints_a_table(db: str) -> None:
    out = _invoke("sql", "SELECT kind, count(*) AS n FROM stages GROUP BY kind ORDER BY n DESC, kind", "--db", db)
    assert out.output.splitlines()[0].split() == ["kind", "n"] and "(6 rows)" in out.output
    rows = json.loads(_invoke("sql", "SELECT origin_kind, count(*) n FROM context GROUP BY 1 ORDER BY 1",
                              "--db", db, "--json").output)
    assert {r["origin_kind"] for r in rows} == {"config", "memory", "stage", "user"}


def _strict_json(text: str) -> object:
    """JSON as a strict parser (a browser's, jq's) reads it: NaN and Infinity are not JSON."""
    def refuse(constant: str) -> object:
        raise ValueError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


def test_sql_json_writes_a_number_json_cannot_hold_as_null(db: str) -> None:
    out = _invoke("sql", "SELECT 'NaN'::DOUBLE AS n, 'inf'::DOUBLE AS i, -'inf'::DOUBLE AS m, 1.5::DOUBLE AS x, [1.0, 'nan'::DOUBLE] AS l",
                  "--db", db, "--json").output
    assert _strict_json(out) == [{"n": None, "i": None, "m": None, "x": 1.5, "l": [1.0, None]}]


def test_json_times_are_unix_seconds_in_every_command(db: str) -> None:
    """runs --json, show --json and sql --json print a time the same way: Unix seconds."""
    listed = json.loads(_invoke("runs", "--db", db, "--json").output)
    queried = json.loads(_invoke("sql", "SELECT id, started_at, ended_at FROM runs", "--db", db, "--json").output)
    by_id = {r["id"]: r for r in queried}
    for run in listed:
        row = by_id[run["id"]]
        assert isinstance(row["started_at"], float) and row["started_at"] == pytest.approx(run["started_at"], abs=1e-5)
        assert row["ended_at"] == pytest.approx(run["ended_at"], abs=1e-5)
    shown = json.loads(_invoke("show", listed[0]["id"], "--db", db, "--json").output)
    assert shown["run"]["started_at"] == listed[0]["started_at"]
    day = json.loads(_invoke("sql", "SELECT started_at::DATE AS day FROM runs LIMIT 1", "--db", db, "--json").output)
    assert len(day[0]["day"]) == 10  # a date is not a time: it stays YYYY-MM-DD


@pytest.mark.parametrize(("args", "message"), [
    (("diff", "only-one"), "give the two runs (ids, unique prefixes or `last`) to compare, A and B; got 1: only-one"),
    (("diff",), "give the two runs (ids, unique prefixes or `last`) to compare, A and B; got 0"),
    (("diff", "a", "b", "c"), "got 3: a b c"),
    (("diff", "--stages", "s-1"), "give the two stages (ids or unique prefixes) to compare, A and B; got 1"),
])
def test_diff_without_two_refs_is_a_usage_error_saying_what_it_needs(args: tuple[str, ...], message: str) -> None:
    group = click.Group("footprint")
    tracer_cli.register(group)
    result = CliRunner().invoke(group, list(args))
    assert result.exit_code == 2 and message in result.output, result.output
    assert "Try 'footprint diff" in result.output


def _footprint(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from explorer.cli import main; main()", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_errors_are_one_line_on_stderr_without_a_traceback(db: str, tmp_path: Path) -> None:
    text_file = tmp_path / "notes.duckdb"
    text_file.write_text("not a database")
    cases = [
        (("runs", "--db", str(tmp_path / "missing.duckdb")), "no footprint store at"),
        (("show", "last", "--db", str(text_file)), "is not a footprint store"),
        (("why", "r-nope", "--db", db), "no run matches 'r-nope'"),
        (("diff", "--stages", "s-nope", "s-nope", "--db", db), "no stage matches"),
        (("sql", "DROP TABLE fp_run", "--db", db), "only read-only queries"),
        (("sql", "SELEC 1", "--db", db), 'not valid SQL: Parser Error: syntax error at or near "SELEC"'),
        # a query reads the store, not the files (or URLs) of the machine it runs on
        (("sql", f"SELECT * FROM read_text('{text_file}')", "--db", db), "reads only the store"),
        (("sql", f"SELECT * FROM glob('{tmp_path}/*')", "--db", db), "reads only the store"),
    ]
    for args, message in cases:
        done = _footprint(*args)
        assert done.returncode == 1, (args, done.stderr)
        assert done.stderr.startswith("footprint: error: ") and message in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1, done.stderr  # one line
        assert "Traceback" not in done.stderr and done.stdout == ""
    assert not (tmp_path / "missing.duckdb").exists()
    assert text_file.read_text() == "not a database"


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.text(alphabet="ab日本🦆é\u0301 \x1b\x07", max_size=8), min_size=2, max_size=2),
                min_size=1, max_size=5),
       st.integers(min_value=2, max_value=12))
def test_tables_line_up_in_terminal_columns_with_wide_characters(rows: list[list[str]], width: int) -> None:
    """CJK and emoji take two columns, a combining accent none, a terminal code as many as its escape
    (\\x1b: 4): every row's columns start where the header's do, as printed."""
    from tracer._render import cells, for_terminal, one_line, table

    lines = [for_terminal(line) for line in table(["first", "second"], [[first, f"|{second}"] for first, second in rows])]
    start = lines[1].index("  -") + 2  # where the second column starts, in columns
    for line, row in zip(lines[2:], rows, strict=True):
        assert cells(line[: line.index("|")]) == start, (line, row)
    for text in (r[0] for r in rows):
        cut = one_line(text, width)
        assert cells(cut) <= width and (cut == " ".join(for_terminal(text).split()) or cut.endswith("…"))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab日🦆é\u0301 \n\t", max_size=300), st.integers(min_value=0, max_value=40))
def test_one_line_of_a_long_text_measures_only_its_start(text: str, width: int) -> None:
    """The same cut as flattening and measuring the whole text (whitespace runs, wide and combining
    characters anywhere), though only a prefix is read: a 30 KB message cut to 40 columns."""
    from tracer._render import cells, one_line

    flat = " ".join(text.split())
    if width <= 0:
        expected = ""
    elif cells(flat) <= width:
        expected = flat
    else:  # the longest start that leaves a column for the ellipsis
        expected = flat[:max(k for k in range(len(flat) + 1) if cells(flat[:k]) <= width - 1)] + "…"
    assert one_line(text, width) == expected


def _long_session(path: Path, turns: int) -> None:
    """One session of ``turns`` runs: each sends a window over the conversation (the last 60
    messages; what fell out before them left out by ``memory_window``) and answers."""
    with Store.open(path) as store:
        recorder = Recorder(store)
        system = ContextItem(Item.of_text("system", "Be brief."), Origin("config", source="persona"))
        messages: list[ContextItem] = []
        for turn in range(turns):
            text = f"turn {turn}: " + " ".join(f"w{turn * 7 + n}" for n in range(150))  # ~1 KB, its own
            run = recorder.start_run(agent="a", input=text, session_id="long")
            with run.stage("input", "user message") as given:
                messages.append(given.output(Item.of_text("user", text), origin_kind="user", source="input"))
            with run.stage("inference", "turn 1", after=[given]) as inference:
                start = max(0, len(messages) - 60)
                inference.inputs([system, *messages[start:]], dropped=[(m, "memory_window") for m in messages[:start]])
                answer = inference.output(Item.of_text("assistant", f"noted {turn}"))
            messages.append(answer)
            with run.stage("answer", after=[inference]) as final:
                final.inputs([answer])
                final.output(answer.item)
            run.end("answered", output=answer.text)


def test_why_json_of_a_long_session_carries_each_text_once_and_grows_with_it(tmp_path: Path) -> None:
    # every run's inference received the whole window, nearly all of it walked above, and each such
    # item was a node of its own, in every stage that received it: `why --json` grew with the square
    # of the session (63 MB on a long one; here ~19.7 KB per distinct item beyond its text at 120
    # turns, 4.8 MB in all, now ~1.9 KB: a run of items shown above is one node, each text is once
    # in "texts")
    for turns in (60, 120):
        path = tmp_path / f"long{turns}.duckdb"
        _long_session(path, turns)
        out = _invoke("why", "last", "--db", str(path), "--json").output
        data = json.loads(out)
        texts = data["texts"]
        assert len(texts) > 2 * turns  # the walk reached every message of the session
        assert all(r["item_hash"] in texts and "text" not in r for r in data["ranked"])
        distinct = sum(len(t.encode()) for t in texts.values())
        beyond = (len(out.encode()) - distinct) / len(texts)  # bytes per distinct item beyond its text
        assert beyond < 2500, (turns, beyond)
        # and the human tree stays readable: a run of items shown above is one line
        tree = _invoke("why", "last", "--db", str(path), "--order", "context").output.splitlines()
        assert len(tree) < 6 * turns and any("more items of this context, shown above" in line for line in tree)


#: what a message sent to a host may hold to take over the terminal of whoever reads it: a colour
#: (CSI), a window title (OSC, ended by BEL), a carriage return, a C1 CSI, backspace, DEL
_CONTROL = "\x1b[31mred\x1b[0m \x1b]0;pwned\x07 \x9b2J \x08\x7f"


def test_text_output_shows_control_characters_it_never_sends_them(tmp_path: Path) -> None:
    path = tmp_path / "ansi.duckdb"
    with Store.open(path) as store:
        run = Recorder(store).start_run(agent="a", input=f"hi {_CONTROL}", session_id="ansi")
        with run.stage("input", "user message") as given:
            user = given.output(Item.of_text("user", f"hi {_CONTROL}"), origin_kind="user", source="input")
        with run.stage("inference", "turn 1", after=[given]) as inference:
            inference.inputs([user])
            inference.output(Item.of_text("assistant", f"ok {_CONTROL}"))
        run.end("answered", output=f"ok {_CONTROL}")
    for args in (("runs",), ("show", "last"), ("show", "last", "--context"), ("why", "last"),
                 ("why", "last", "--order", "context"), ("sql", "SELECT input, output FROM runs")):
        out = _invoke(*args, "--db", str(path)).output
        assert not any(c in out for c in "\x1b\x07\x9b\x08\x7f\r"), (args, out)
        assert "\\x1b" in out, (args, out)  # shown, escaped


def test_a_block_that_fails_its_checksum_is_refused_as_a_corrupt_store_not_an_internal_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A store whose header is fine but one of whose blocks is damaged opens; the read that reaches
    the block failed with 'footprint: internal error: Error: Corrupt database file ...' (exit 70)."""
    from explorer.cli import main

    refused = []
    for block, bad in enumerate(damaged_copies(tmp_path), start=1):  # at the open or at a later read
        for args in (["runs"], ["show", "last"]):
            capsys.readouterr()
            with pytest.raises(SystemExit) as exited:
                main([*args, "--db", str(bad)])
            if exited.value.code != 0:
                refused.append((block, args, exited.value.code, capsys.readouterr().err))
    assert len({block for block, *_ in refused}) >= 2, refused  # the header's block and a later one
    for block, args, code, err in refused:
        assert code == 1, (block, args, err)
        assert "is not a readable footprint store: the file is truncated or corrupt" in err, (block, args, err)


@pytest.mark.parametrize("columns", [80, 100, 160])
def test_show_context_gives_the_text_the_width_the_other_columns_leave(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, columns: int) -> None:
    """The text column was cut to the terminal's width minus 70, whatever the other columns took
    (30 columns in a 100-column terminal), and a 'not sent' note was not counted."""
    path = tmp_path / "wide.duckdb"
    text = "a long user message " * 20
    with Store.open(path) as store:
        run = Recorder(store).start_run(agent="a", input=text, session_id="w")
        with run.stage("input", "user message") as given:
            user = given.output(Item.of_text("user", text), origin_kind="user", source="input")
        with run.stage("inference", "turn 1", after=[given]) as inference:
            inference.inputs([user])
            inference.output(Item.of_text("assistant", "ok"))
        run.end("answered", output="ok")
    monkeypatch.setenv("COLUMNS", str(columns))
    out = _invoke("show", "last", "--context", "--db", str(path)).output
    rows = [line for line in out.splitlines() if "a long user message" in line and "…" in line]
    assert rows, out
    for line in rows:
        assert columns - 4 <= len(line) <= columns, (columns, line)

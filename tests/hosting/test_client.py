"""RecordingsClient against a real host on loopback: the read API contract, end to end."""

from __future__ import annotations

import asyncio
import json

import pytest

from hosting import HostAuthError, HostClientError, RecordingsClient, create_app, standing_agent
from tests.hosting.hostkit import make_agent, serve_in_thread
from tracer import AmbiguousIdError, NotFoundError, Recorder, RunFilter, Store, why


def _record_runs(store: Store) -> list[str]:
    async def go() -> list[str]:
        ids = []
        for session, text in (("alice", "hello"), ("alice", "again"), ("bob", "hi there")):
            agent = make_agent(recorder=Recorder(store))
            agent.session_id = session
            ids.append((await agent.run(text)).run_id)
        return ids

    ids = asyncio.run(go())
    store.flush()
    return ids


def test_client_mirrors_the_store_read_methods(store: Store) -> None:
    ids = _record_runs(store)
    with serve_in_thread(create_app(recordings=store)) as url, RecordingsClient(url) as client:
        assert [r.id for r in client.list_runs()] == [r.id for r in store.list_runs()]
        assert client.count_runs() == 3
        assert client.count_runs(RunFilter(session_id="alice")) == 2
        assert [r.id for r in client.list_runs(RunFilter(session_id="alice"), limit=1)] == [
            store.list_runs(RunFilter(session_id="alice"), limit=1)[0].id
        ]
        assert [r.id for r in client.list_runs(limit=1, offset=1)] == [store.list_runs(limit=1, offset=1)[0].id]
        assert client.list_runs(RunFilter(search="hi there"))[0].input == "hi there"
        fork = Recorder(store).start_run(agent="a", input="again", forked_from_run=ids[0])
        fork.end("answered", output="again")
        store.flush()
        assert client.count_runs() == 4 and client.count_runs(RunFilter(forks=False)) == 3
        assert fork.id not in [r.id for r in client.list_runs(RunFilter(forks=False))]
        child = Recorder(store).start_run(agent="helper", input="help", attributes={"parent_run": ids[2]})
        child.end("answered", output="helped")
        store.flush()
        assert client.count_runs(RunFilter(children=False)) == 4 and client.count_runs() == 5
        assert child.id not in [r.id for r in client.list_runs(RunFilter(children=False))]
        assert client.get_run(ids[0]) == store.get_run(ids[0])
        assert client.resolve_run_id("last") == store.resolve_run_id("last")
        prefix = next(ids[1][:n] for n in range(4, len(ids[1])) if sum(i.startswith(ids[1][:n]) for i in ids) == 1)
        assert client.resolve_run_id(prefix) == ids[1]
        loaded, local = client.load_run(ids[1]), store.load_run(ids[1])
        assert loaded.stages == local.stages and loaded.items == local.items and loaded.inputs == local.inputs
        assert [r.id for r in client.session_runs("alice")] == ids[:2]
        assert client.why(ids[2]) == why(store, ids[2]).to_dict()
        # the client is a RunSource: `why` runs against the remote host too
        assert why(client, ids[2]).to_dict() == why(store, ids[2]).to_dict()
        with pytest.raises(NotFoundError):
            client.load_run("r-does-not-exist")
        with pytest.raises(AmbiguousIdError, match="ambiguous: 5 runs") as many:
            client.resolve_run_id("r-")
        assert (many.value.ref, many.value.matches) == ("r-", 5)


def test_client_reads_a_run_a_stage_at_a_time(store: Store) -> None:
    ids = _record_runs(store)
    whole = store.load_run(ids[1])
    inference = whole.inferences()[-1]
    with serve_in_thread(create_app(recordings=store)) as url, RecordingsClient(url) as client:
        outline = client.load_run(ids[1], snapshots=[])
        assert (outline.run, outline.stages, outline.edges, outline.outputs) == (
            whole.run, whole.stages, whole.edges, whole.outputs)
        assert outline.inputs == {} and outline.items == {}
        one = client.load_run(ids[1], snapshots=[inference.id])
        assert one == store.load_run(ids[1], snapshots=[inference.id])
        assert one.inputs == {inference.id: whole.inputs[inference.id]}
        rest = [s.id for s in whole.stages if s.id != inference.id]
        inputs, items = client.load_snapshots(ids[1], rest)
        assert (inputs, items) == store.load_snapshots(ids[1], rest)
        one.inputs.update(inputs)
        one.items.update(items)
        assert one == whole, "a run read a stage at a time over HTTP is the whole run"
        assert client.load_snapshots(ids[1], []) == ({}, {})
        with pytest.raises(NotFoundError):
            client.load_snapshots("r-does-not-exist", [inference.id])
        with pytest.raises(NotFoundError, match="has no stage s-typo"):  # not an empty answer
            client.load_snapshots(ids[1], [inference.id, "s-typo"])
        with pytest.raises(NotFoundError, match="has no stage s-typo"):  # not a run without that snapshot
            client.load_run(ids[1], snapshots=[inference.id, "s-typo"])


def test_client_sends_turns_and_lists_sessions(store: Store) -> None:
    host = standing_agent(agent_factory=lambda: make_agent(recorder=Recorder(store)), recordings=store)
    with serve_in_thread(create_app(host, token="s3cret")) as url:
        with RecordingsClient(url, token="s3cret") as client:
            first = client.send("hello", session_id="carol")
            assert first["status"] == "answered" and first["answer"] == "echo #1: hello"
            second = client.send("and again", session_id="carol")
            assert second["answer"] == "echo #2: and again"
            lines = client.sessions()
            assert [(s["session_id"], s["status"], s["running"]) for s in lines] == [("carol", "answered", False)]
            assert lines[0]["active"] is True and lines[0]["last_activity"] > 0
            assert [r.id for r in client.session_runs("carol")] == [first["run_id"], second["run_id"]]
        with RecordingsClient(url, token="wrong") as bad, pytest.raises(HostAuthError):
            bad.list_runs()
        with RecordingsClient(url) as anonymous, pytest.raises(HostAuthError):
            anonymous.sessions()


def test_client_names_an_unreachable_host() -> None:
    with RecordingsClient("http://127.0.0.1:9", timeout=2) as client, pytest.raises(HostClientError, match="cannot reach"):
        client.count_runs()


@pytest.mark.parametrize(("status", "body"), [(404, b"<!DOCTYPE HTML><html><h1>File not found</h1></html>"),
                                              (502, b"Bad Gateway"), (200, b"<html>a web page</html>"),
                                              (404, b'{"detail": "Not Found"}')])
def test_an_address_that_is_not_a_footprint_host_is_named_not_its_page_dumped(status: int, body: bytes) -> None:
    import httpx2 as httpx

    transport = httpx.MockTransport(lambda request: httpx.Response(status, content=body))
    with RecordingsClient("http://elsewhere:8000", transport=transport) as client:
        with pytest.raises(HostClientError) as refused:
            client.count_runs()
    message = str(refused.value)
    assert message.startswith(f"http://elsewhere:8000/v1/recordings/runs answered {status} ")
    assert "not as a footprint host does: is http://elsewhere:8000 the address footprint serve printed?" in message
    assert "<html" not in message.lower() and not isinstance(refused.value, NotFoundError)


def test_why_over_http_takes_an_item_by_its_name_like_the_command(store: Store) -> None:
    """`why?item=` resolves an item as `footprint why --item` does: its name, its hash or a prefix."""
    from click.testing import CliRunner

    from explorer.cli import cli
    from tracer import item_names

    agent = make_agent(recorder=Recorder(store))
    agent.session_id = "alice"
    asyncio.run(agent.run("hello"))
    run_id = asyncio.run(agent.run("again")).run_id  # it holds history from the first turn
    store.flush()
    names = item_names(store.load_run(run_id))
    assert any(n.startswith("history:") for n in names.values()) and "input" in names.values()
    with serve_in_thread(create_app(recordings=store)) as url, RecordingsClient(url) as client:
        for item_hash, name in names.items():
            by_name = client.why(run_id, name)
            assert by_name == client.why(run_id, item_hash[:10]) == why(store, run_id, item_hash).to_dict(), name
        with pytest.raises(NotFoundError, match=r"holds no item named 'memory:nope'.*names look like: "):
            client.why(run_id, "memory:nope")
        over_http = client.why(run_id, "input")
    store.close()
    printed = CliRunner().invoke(cli, ["why", run_id, "--item", "input", "--json", "--db", str(store.path)])
    assert printed.exit_code == 0, printed.output
    assert {k: v for k, v in json.loads(printed.output).items() if k != "ranked"} == over_http


@pytest.mark.parametrize("depth", [1, 2])
def test_why_depth_means_the_same_over_http_and_in_the_command(store: Store, depth: int) -> None:
    """`depth=N` and `footprint why --depth N` walk the same N origins (the command walked twice as far)."""
    from click.testing import CliRunner

    from explorer.cli import cli

    agent = make_agent(recorder=Recorder(store))
    agent.session_id = "alice"
    for text in ("hello", "again"):
        run_id = asyncio.run(agent.run(text)).run_id  # the second turn's history reaches back to the first
    store.flush()
    assert why(store, run_id, depth=depth).to_dict() != why(store, run_id).to_dict(), "the depth must cut the walk"
    with serve_in_thread(create_app(recordings=store)) as url, RecordingsClient(url) as client:
        over_http = client.why(run_id, depth=depth)
    store.close()
    printed = CliRunner().invoke(cli, ["why", run_id, "--depth", str(depth), "--json", "--db", str(store.path)])
    assert printed.exit_code == 0, printed.output
    assert {k: v for k, v in json.loads(printed.output).items() if k != "ranked"} == over_http

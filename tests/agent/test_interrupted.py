"""Exceptions that are not the agent's to catch: recorded, then raised; a tool's own CancelledError
is the tool's failure, not a cancel of the run."""

from __future__ import annotations

import asyncio

import pytest

from agent import Agent, tool
from agent.providers import ScriptedModel, calls
from tracer import Recorder, Store


class Outcome(BaseException):
    """Like pytest's Skipped/Failed, gevent's Timeout or trio's Cancelled: a BaseException, not an Exception."""


def _ended(store: Store) -> list[tuple[str, str | None, bool]]:
    store.flush()
    rows = store.query("select status, error, ended_at is not null from fp_run order by started_at")
    return [(status, error, ended) for status, error, ended in rows]


def _open_stages(store: Store) -> int:
    return store.query("select count(*) from fp_stage where ended_at is null")[0][0]


@pytest.mark.parametrize("kind", ["plain", "coroutine"])
@pytest.mark.parametrize("parallel", [False, True])
async def test_a_base_exception_from_a_tool_ends_the_run_recorded_then_is_raised(
    tmp_path, kind: str, parallel: bool
) -> None:
    if kind == "plain":
        def boom() -> str:
            """Raise."""
            raise Outcome("not ours")
    else:
        async def boom() -> str:  # type: ignore[misc]
            """Raise."""
            raise Outcome("not ours")

    @tool
    async def fine() -> str:
        """Answer."""
        return "fine"

    store = Store.open(tmp_path / "fp.duckdb")
    round_ = calls(("boom", {}), ("fine", {})) if parallel else calls(("boom", {}))
    agent = Agent("a", provider=ScriptedModel([round_, "after"]), tools=[tool(boom), fine],
                  recorder=Recorder(store))
    with pytest.raises(Outcome, match="not ours"):
        await agent.run("go")
    assert not agent.busy
    assert _ended(store) == [("failed", "Outcome: not ours", True)]
    assert _open_stages(store) == 0
    reason = store.query("select attributes->>'stop_reason' from fp_run")[0][0]
    assert reason == "interrupted"
    # the conversation stays valid: every call has a result, and the next run answers
    result = await agent.run("again")
    assert result.status == "answered" and result.answer == "after"
    store.close()


async def test_a_tools_own_cancelled_error_is_its_failure_and_the_run_goes_on(tmp_path) -> None:
    @tool
    async def handed_a_cancelled_future() -> str:
        """A library hands back a future that was cancelled elsewhere."""
        future = asyncio.get_running_loop().create_future()
        future.cancel()
        return await future

    model = ScriptedModel([calls(("handed_a_cancelled_future", {})), "went on"])
    store = Store.open(tmp_path / "fp.duckdb")
    agent = Agent("a", provider=model, tools=[handed_a_cancelled_future], recorder=Recorder(store))
    result = await agent.run("go")
    assert (result.status, result.answer) == ("answered", "went on")
    seen = [m for m in model.requests[1].chat_messages() if m["role"] == "tool"]
    assert len(seen) == 1 and "handed_a_cancelled_future failed: CancelledError" in seen[0]["content"]
    assert _ended(store) == [("answered", None, True)]
    store.close()


async def test_cancelling_the_run_still_cancels_it() -> None:
    started = asyncio.Event()

    @tool
    async def slow() -> str:
        """Wait."""
        started.set()
        await asyncio.sleep(30)
        return "late"

    agent = Agent("a", provider=ScriptedModel([calls(("slow", {})), "next"]), tools=[slow])
    run = asyncio.ensure_future(agent.run("go"))
    await started.wait()
    assert agent.cancel()
    result = await run
    assert result.status == "cancelled"
    assert (await agent.run("again")).answer == "next"

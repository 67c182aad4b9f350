"""Generated sessions: random messages, modes, tool batches, provider and storage faults, aborts,
compactions and restarts; after each, the invariants of the seed must hold.

- every message whose steer/send returned is in the conversation exactly once (or in a summary
  that replaced it), and a refused one is nowhere;
- every tool call has exactly one result, after it;
- nothing stays queued or owed once the session settled;
- what the storage holds is what the session holds (a fresh process loads the same history).
"""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent import Tool
from agent.durable import DurableAgent, PersistenceContext
from agent.durable.errors import DurableError
from agent.errors import ProviderServerError
from agent.providers import FunctionModel, ModelRequest, ModelResponse, ToolCall
from tests.agent.durable.durablekit import FlakyPersistence, session

TOOLS = [Tool("safe", "Durable.", {"type": "object"}, lambda a: "safe done", durable=True),
         Tool("once", "Not durable.", {"type": "object"}, lambda a: "once done")]

step = st.one_of(
    st.tuples(st.sampled_from(["steer", "send"]), st.sampled_from(["chat", "tools", "fail"])),
    st.tuples(st.sampled_from(["wait", "abort", "restart", "compact", "hiccup"]), st.just("")),
)


def model() -> FunctionModel:
    count = {"n": 0}

    async def answer(request: ModelRequest) -> ModelResponse | str:
        count["n"] += 1
        await asyncio.sleep(0)
        if "Summarise" in request.system_text():
            return "summary: " + " | ".join(ci.text for ci in request.context if ci.item.kind in ("user", "summary"))
        newest = [ci for ci in request.context if ci.item.kind in ("user", "tool_result")][-1]
        if newest.item.kind == "user" and "fail" in newest.text:
            raise ProviderServerError("generated failure", provider="m")
        if newest.item.kind == "user" and "tools" in newest.text:
            n = count["n"]
            return ModelResponse("", tuple(ToolCall(f"c{n}-{i}", ("safe", "once")[(n + i) % 2], "{}")
                                           for i in range(1 + n % 3)), "tool_calls")
        return f"re: {newest.text}"

    return FunctionModel(answer)


async def play(program: list[tuple[str, str]], steering: str, sending: str) -> None:
    persistence = FlakyPersistence()
    provider = model()

    def fresh() -> DurableAgent:
        return session(persistence, provider, tools=TOOLS, steering_mode=steering, send_mode=sending)

    agent = fresh()
    accepted: list[str] = []
    for i, (op, kind) in enumerate(program):
        if op in ("steer", "send"):
            text = f"m{i} {kind}"
            try:
                await (agent.steer(text) if op == "steer" else agent.send(text))
                accepted.append(text)
            except DurableError:
                pass  # refused by the storage: must be nowhere
        elif op == "wait":
            await agent.wait_for_idle()
        elif op == "abort":
            await agent.abort()
        elif op == "restart":
            await agent.abort()
            agent = fresh()
            agent.start()
        elif op == "compact":
            try:
                await asyncio.wait_for(agent.compact(), 5)
            except DurableError:
                pass
        elif op == "hiccup":
            persistence.fail = {"append"}
            await asyncio.sleep(0.001)
            persistence.fail = set()
        await asyncio.sleep(0)
    persistence.fail = set()
    await agent.wait_for_idle()
    agent = fresh()  # a new process picks up whatever is left
    agent.start()
    await agent.wait_for_idle()
    await agent.send("final")  # a turn request drains what an abort left waiting
    await agent.wait_for_idle()
    accepted.append("final")

    history = agent.history
    users = [ci.text for ci in history if ci.item.kind == "user"]
    summaries = " ".join(ci.text for ci in history if ci.item.kind == "summary")
    for text in accepted:
        assert users.count(text) + (f"{text}" in summaries and text not in users) == 1, (text, users, summaries)
    assert len(users) == len(set(users))
    assert all(u in accepted for u in users)
    calls = [i for i, ci in enumerate(history) if ci.item.kind == "tool_call"]
    for index in calls:
        cid = history[index].item.body["id"]
        results = [j for j, ci in enumerate(history) if ci.item.kind == "tool_result" and ci.item.body["call_id"] == cid]
        assert len(results) == 1 and results[0] > index, (cid, [c.text for c in history])
    ctx = PersistenceContext("s1")
    assert [k for k, _ in await persistence.inner.read_values(ctx, "") if k != "settings"] == []
    again = fresh()
    again.start()
    await again.wait_for_idle()
    assert [(ci.item.kind, ci.text, ci.origin) for ci in again.history] == [
        (ci.item.kind, ci.text, ci.origin) for ci in history]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=st.lists(step, min_size=1, max_size=14),
       steering=st.sampled_from(["one-at-a-time", "all"]), sending=st.sampled_from(["one-at-a-time", "all"]))
def test_generated_sessions_keep_the_invariants(program: list[tuple[str, str]], steering: str, sending: str) -> None:
    asyncio.run(asyncio.wait_for(play(program, steering, sending), 30))


def test_a_known_hard_program() -> None:
    program: list[Any] = [("send", "tools"), ("steer", "chat"), ("hiccup", ""), ("abort", ""), ("send", "fail"),
                          ("restart", ""), ("compact", ""), ("steer", "tools"), ("wait", "")]
    asyncio.run(play(program, "all", "one-at-a-time"))

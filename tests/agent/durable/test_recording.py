"""Recorded like everything else: a run per turn, queued messages with their origin, switches as stages."""

from __future__ import annotations

from typing import Any

from agent.durable import AgentProviders, DurableHooks, TurnDone
from agent.errors import ProviderServerError
from agent.providers import FunctionModel, ModelRequest
from tests.agent.durable.durablekit import Gate, echo_model, session
from tracer import Recorder, Store


def turns(agent: Any) -> list[TurnDone]:
    done: list[TurnDone] = []
    agent.listeners.append(lambda e: done.append(e) if isinstance(e, TurnDone) else None)
    return done


async def test_each_turn_is_a_run_of_the_session_and_queued_messages_carry_their_origin(store: Store) -> None:
    gate = Gate()

    async def answer(request: ModelRequest) -> str:
        if request.last_user_text() == "first":
            await gate.wait()
        return "ok"

    agent = session(llm=FunctionModel(answer), recorder=Recorder(store))
    done = turns(agent)
    await agent.send("first")
    await gate.entered.wait()
    await agent.steer("steered")
    await agent.send("sent")
    gate.opened.set()
    await agent.wait_for_idle()
    store.flush()
    runs = store.session_runs("s1")
    assert [r.id for r in runs] == [d.run_id for d in done]
    assert [r.input for r in runs] == ["first", "steered", "sent"]
    for run, expected in zip(runs, ["send", "steering", "send"], strict=True):
        data = store.load_run(run.id)
        entry = next(e for stage in data.stages if stage.kind == "inference"
                     for e in data.inputs[stage.id] if data.items[e.item_hash].kind == "user"
                     and data.items[e.item_hash].text == run.input)
        assert entry.origin.kind == "user" and entry.origin.source.startswith(f"{expected}@2")
        stage = next(s for s in data.stages if s.kind == "input")
        assert stage.attributes["queued"][0]["queue"] == expected


async def test_a_failed_turn_message_points_at_the_failed_run(store: Store) -> None:
    agent = session(llm=FunctionModel(lambda r: ProviderServerError("down", provider="m")),
                    recorder=Recorder(store))
    done = turns(agent)
    await agent.send("x")
    await agent.wait_for_idle()
    store.flush()
    failure = agent.history[-1]
    data = store.load_run(done[-1].run_id)
    assert data.run.status == "failed"
    assert failure.origin.run_id == data.run.id
    assert data.stage(failure.origin.stage_id).kind == "error"


async def test_model_switches_and_resets_are_stages(store: Store) -> None:
    providers = AgentProviders().add("a", echo_model("a"), "test").add("b", echo_model("b"), "test")
    agent = session(providers=providers, provider="a", recorder=Recorder(store),
                    hooks=DurableHooks(model_changed=lambda ctx, ch: "hand-off"))
    done = turns(agent)
    await agent.send("one")
    await agent.send("bigger", model="m2")
    await agent.send("other", provider="b")
    await agent.wait_for_idle()
    store.flush()
    switch = [s for s in store.load_run(done[1].run_id).stages if s.name == "model switch"]
    assert switch and switch[0].attributes["model"] == "m2" and switch[0].attributes["reset"] is False
    data = store.load_run(done[2].run_id)
    reset = next(s for s in data.stages if s.name == "history reset")
    assert reset.attributes["provider"] == "b" and reset.attributes["reset"] is True
    erased = [data.items[e.item_hash].text for e in data.inputs[reset.id]]
    assert "one" in erased and "bigger" in erased

"""Per-message settings, the AgentProviders registry, compatible and incompatible changes, model_changed."""

from __future__ import annotations

import pytest

from agent.durable import (
    AgentProviders,
    DurableHooks,
    InferenceSettings,
    InMemoryPersistence,
    ModelChange,
    TurnDone,
)
from agent.durable.errors import SettingsError
from agent.providers import FunctionModel, ModelRequest
from tests.agent.durable.durablekit import records, session, texts, values


def recording_model(name: str) -> tuple[FunctionModel, list[ModelRequest]]:
    seen: list[ModelRequest] = []

    def answer(request: ModelRequest) -> str:
        seen.append(request)
        return f"{name}: {request.last_user_text()}"

    return FunctionModel(answer, name=name), seen


async def test_settings_take_effect_on_consumption_and_stay_in_effect() -> None:
    model, seen = recording_model("a")
    agent = session(llm=model, model="default-model")
    await agent.send("one")
    await agent.send("two", model="big", effort="high", service_tier="flex")
    await agent.send("three")
    await agent.send("four", effort="low")
    await agent.wait_for_idle()
    got = [(r.settings().get("model"), r.settings().get("reasoning_effort"), r.settings().get("service_tier"))
           for r in seen]
    assert got == [("default-model", None, None), ("big", "high", "flex"), ("big", "high", "flex"),
                   ("big", "low", "flex")]


async def test_settings_survive_a_restart() -> None:
    persistence = InMemoryPersistence()
    model, seen = recording_model("a")
    first = session(persistence, model, model="default-model")
    await first.send("switch", model="big", effort="medium")
    await first.wait_for_idle()
    assert dict(await values(persistence, "settings")) == {
        "settings": {"provider": "m", "model": "big", "effort": "medium"}}
    second = session(persistence, model, model="default-model")
    await second.send("after restart")
    await second.wait_for_idle()
    assert seen[-1].settings()["model"] == "big" and seen[-1].settings()["reasoning_effort"] == "medium"


def registry() -> tuple[AgentProviders, list[ModelRequest], list[ModelRequest], list[ModelRequest]]:
    a, seen_a = recording_model("a")
    b, seen_b = recording_model("b")
    c, seen_c = recording_model("c")
    providers = AgentProviders(compatible=[("test", "replay")])
    providers.add("a", a, "test").add("b", b, "test").add("c", c, "replay")
    return providers, seen_a, seen_b, seen_c


async def test_a_compatible_change_keeps_the_conversation() -> None:
    providers, _, _, seen_c = registry()
    changes: list[ModelChange] = []
    agent = session(providers=providers, provider="a",
                    hooks=DurableHooks(model_changed=lambda ctx, ch: changes.append(ch) or "ignored"))
    await agent.send("hello")
    await agent.send("bigger model", model="m2")  # same provider: compatible
    await agent.send("other provider", provider="c")  # test <-> replay: compatible
    await agent.wait_for_idle()
    assert [ci.text for ci in seen_c[0].context if ci.item.kind == "user"] == [
        "hello", "bigger model", "other provider"]
    assert [(c.previous_provider, c.provider, c.previous_model, c.model, c.was_reset) for c in changes] == [
        ("a", "a", None, "m2", False), ("a", "c", "m2", "m2", False)]
    assert changes[1].previous_provider_instance is providers.get("a")
    assert changes[1].provider_instance is providers.get("c")
    assert all("ignored" not in t for _, t in texts(agent))  # no hand-off without a reset


async def test_an_incompatible_change_resets_and_starts_with_the_handoff() -> None:
    providers, _, seen_b, _ = registry()
    persistence = InMemoryPersistence()
    agent = session(persistence, providers=providers, provider="a",
                    hooks=DurableHooks(model_changed=lambda ctx, ch: "Handed over from a." if ch.was_reset else None))
    await agent.send("secret history")
    await agent.send("now b", provider="b")  # the same type, another provider: incompatible
    await agent.wait_for_idle()
    assert [(ci.item.kind, ci.text) for ci in seen_b[0].context if ci.item.kind in ("user", "system")][-2:] == [
        ("system", "Handed over from a."), ("user", "now b")]
    assert all("secret history" not in ci.text for ci in seen_b[0].context)
    stored = await records(persistence)
    assert [r.kind for r in stored] == ["system", "user", "assistant"]
    assert stored[0].body["item"]["origin"]["source"] == "model_changed"


async def test_a_reset_without_a_handoff_starts_empty() -> None:
    providers, _, seen_b, _ = registry()
    agent = session(providers=providers, provider="a")
    await agent.send("old")
    await agent.send("new", provider="b")
    await agent.wait_for_idle()
    assert [ci.text for ci in seen_b[0].context if ci.item.kind in ("user", "assistant", "system")] == ["new"]


async def test_a_message_naming_an_unregistered_provider_is_refused_before_it_is_stored() -> None:
    """It was queued: the setting then stayed in effect, and every later turn and a compaction
    failed on the missing provider (the host answered POST .../compact with 502)."""
    providers, _, _, _ = registry()
    persistence = InMemoryPersistence()
    agent = session(persistence, providers=providers, provider="a")
    await agent.send("first")
    await agent.wait_for_idle()
    with pytest.raises(SettingsError, match=r"provider 'ghost' is not registered .*\(registered: a, b, c\)"):
        await agent.send("to nowhere", provider="ghost")
    assert agent.queued() == {"steering": [], "send": []}
    await agent.send("still here")
    await agent.wait_for_idle()
    assert [t for t in texts(agent) if t[0] == "user"] == [("user", "first"), ("user", "still here")]
    reloaded = session(persistence, providers=providers, provider="a")
    reloaded.start()
    await reloaded.wait_for_idle()
    assert "to nowhere" not in [t[1] for t in texts(reloaded)]


async def test_a_session_whose_provider_is_not_registered_fails_the_turn_naming_it() -> None:
    """A session's own default (or a setting stored before its provider left the registry)."""
    providers, _, _, _ = registry()
    done: list[TurnDone] = []
    agent = session(providers=providers, provider="ghost")
    agent.listeners.append(lambda e: done.append(e) if isinstance(e, TurnDone) else None)
    await agent.send("to nowhere")
    await agent.wait_for_idle()
    assert done[-1].state == "failed"
    assert "provider 'ghost' is not registered" in (done[-1].error or "")
    assert texts(agent)[-1][1].startswith("The last turn failed: ")


def test_registry_lookups() -> None:
    providers, _, _, _ = registry()
    assert providers.type_of("c") == "replay" and providers.type_of("zzz") is None
    assert providers.get("zzz") is None
    assert providers.is_compatible("a", "a") and providers.is_compatible("a", "c")
    assert not providers.is_compatible("a", "b") and not providers.is_compatible("a", "zzz")
    with pytest.raises(ValueError, match="needs a compatibility type"):
        providers.add("x", providers.get("a"), "")  # type: ignore[arg-type]


@pytest.mark.parametrize("bad, match", [
    ({"effort": "huge"}, "effort must be one of"),
    ({"service_tier": "gold"}, "service_tier must be one of"),
    ({"model": ""}, "model setting must be a non-empty string"),
])
def test_malformed_settings_are_refused(bad: dict[str, str], match: str) -> None:
    with pytest.raises(SettingsError, match=match):
        InferenceSettings(**bad)


async def test_unknown_setting_names_are_refused() -> None:
    agent = session()
    with pytest.raises(SettingsError, match="unknown setting"):
        await agent.send("x", temperature="hot")

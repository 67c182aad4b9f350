"""The personal assistant and marketing agents: personas on a conversational agent."""

from __future__ import annotations

from agent.bus import AgentBinding, MarketingAgent, PersonalAssistantAgent, SourceBinding, assistant_persona
from agent.providers import FunctionModel, ModelRequest

BINDING = AgentBinding([SourceBinding("whatsapp", prefix="", reply_channel="whatsapp")])


async def test_assistant_and_marketing_are_personas_on_a_conversational_agent(message) -> None:
    def system(request: ModelRequest) -> str:
        return request.system_text()

    model = FunctionModel(system)
    pa = PersonalAssistantAgent("pa", BINDING, provider=model, owner="Maya")
    shop = MarketingAgent("shop", BINDING, provider=model, brand="Salon Ola", offer="haircuts from 60 zł")
    for agent in (pa, shop):
        agent.deliver(message("hi"))
        await agent.idle()
    assert "Maya's personal assistant" in pa.outbox[0].text
    assert "Salon Ola" in shop.outbox[0].text and "haircuts from 60 zł" in shop.outbox[0].text
    assert "never invent prices" in shop.outbox[0].text
    custom = PersonalAssistantAgent("pa2", BINDING, provider=model, owner="Maya", persona="Be terse.")
    assert custom.persona == "Be terse." and custom.owner == "Maya"


def test_the_default_persona_names_the_owner_everywhere() -> None:
    persona = assistant_persona("Maya")
    assert persona.count("Maya") >= 3 and "ask before committing" in persona

"""Planted-culprit scenarios, generated at random: the ground truth that blame and `why` are measured against.

A scenario is an agent with tens of benign items of several kinds (memory facts, features'
instructions, custom instructions, notes the user left in earlier runs, tool results of earlier runs
and of the run itself) and one culprit of a random kind, with or without a memory window (oldest
first, or a window that pins the start of the conversation and so is not oldest first) and a prompt
length cap. The model is a function that really reads its context: it answers the gate code of a
depot from the one sentence that states it, and says it does not know otherwise. Many benign items
look like the culprit (other depots' codes, other facts about the same depot, the same number in
another sentence), so neither a ranking nor a rebuild can get by on surface matches.

In a *chain* scenario the culprit says which depot is the user's; the model calls ``gate_code`` for
that depot and answers from the result, so the result is a derived culprit (it flips too) and the
planted one must still be named first.

Used by the property tests (``test_blame_properties.py``) and by ``bench/blame.py``.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from agent import Agent, ConversationMemory, Fact, Feature, InMemoryFacts, PromptComposer, tool
from agent.providers import FunctionModel, ModelRequest, ModelResponse, calls
from agent.tools import Tool
from tracer import ContextItem, Recorder, Store

PLACES = ["Harbor", "Mill", "Quarry", "Summit", "Orchard", "Lantern", "Beacon", "Cedar", "Falcon", "Granite",
          "Willow", "Meadow", "Anchor", "Copper", "Juniper", "Marble", "Thistle", "Raven", "Saffron", "Tundra"]
TOPICS = ["schedule", "parking", "staff", "deliveries", "safety", "weather", "holidays", "inventory", "fleet",
          "contacts", "billing", "maintenance"]
KINDS = ("memory", "feature", "history_user", "history_tool", "tool_result")
WINDOWS = ("none", "messages", "tokens", "pinned")
_MY_DEPOT = re.compile(r"my depot is the (\w+) one", re.I)


class PinnedWindow(ConversationMemory):
    """A window that is not oldest first: it keeps the first two messages and the newest ``keep``."""

    def __init__(self, keep: int) -> None:
        super().__init__()
        self.keep = keep

    def context(self, conversation_id: str) -> tuple[list[ContextItem], list[ContextItem]]:
        messages = self.require(conversation_id).messages
        start = len(messages) - self.keep
        while 0 < start < len(messages) and messages[start].item.kind in ("tool_call", "tool_result"):
            start -= 1  # never begin mid-exchange
        if start <= 2:
            return list(messages), []
        return [*messages[:2], *messages[start:]], list(messages[2:start])


def depot_model(request: ModelRequest) -> ModelResponse | str:
    """The model: notes are noted, look-ups looked up, and the gate code answered from the context."""
    context = request.context
    last_user = max(i for i, ci in enumerate(context) if ci.item.kind == "user")
    question = context[last_user].item.text
    results = [ci for ci in context[last_user:] if ci.item.kind == "tool_result"]
    if question.startswith("Note:"):
        return "Noted."
    if question.startswith("Look up"):
        if results:
            return "Done."
        topic = question.removeprefix("Look up ").rstrip(".")
        return calls(("lookup", {"topic": topic}, f"lookup-{topic}"))
    topics = re.findall(r"\[(\w+)\]", question)
    place = re.search(r"for the (\w+) depot", question)
    if place is None:  # "my depot": which one is it?
        mine = next((m.group(1) for ci in context if (m := _MY_DEPOT.search(ci.item.text))), "unknown")
    else:
        mine = place.group(1)
    if not results:
        wanted: list[Any] = [("search", {"topic": t}, f"search-{t}") for t in topics]
        if place is None:
            wanted.append(("gate_code", {"place": mine}, "gate-code"))
        return calls(*wanted)
    pattern = re.compile(rf"\b{re.escape(mine)} depot gate code is (\d{{4}})\b")
    for ci in context:
        found = pattern.search(ci.item.text)
        if found:
            return f"The {mine} depot gate code is {found.group(1)}."
    return f"I do not know the {mine} depot gate code."


@dataclass
class Scenario:
    """One generated agent, its earlier runs and its question, with the culprit's text and kind."""

    seed: int
    kind: str
    chain: bool
    window: str
    cap: bool
    place: str
    code: str
    culprit: str
    facts: list[Fact] = field(default_factory=list)
    features: list[Feature] = field(default_factory=list)
    instructions: list[str] = field(default_factory=list)
    earlier: list[str] = field(default_factory=list)  # the user's messages of the earlier runs
    lookups: dict[str, str] = field(default_factory=dict)  # lookup topic -> result (earlier runs)
    searches: dict[str, str] = field(default_factory=dict)  # search topic -> result (the run itself)
    codes: dict[str, str] = field(default_factory=dict)  # gate_code results
    question: str = ""
    window_size: int = 0
    cap_length: int = 0

    def describe(self) -> str:
        """One line for a failure message."""
        return (f"seed {self.seed}: culprit {self.kind}{' (chain)' if self.chain else ''}, window {self.window}"
                f"{self.window_size or ''}, cap {self.cap_length or 'off'}: {self.culprit!r}")


def _benign(rng: random.Random, place: str, code: str) -> str:
    other = rng.choice([p for p in PLACES if p != place])
    number = f"{rng.randint(1000, 9999)}"
    return rng.choice([
        f"The {other} depot gate code is {number}.",
        f"The {place} depot opens at {rng.randint(5, 10)}:00 on weekdays.",
        f"The {place} depot door code changed in {rng.randint(2015, 2024)}.",
        f"Invoice {code} for the {other} depot was paid on Monday.",
        f"The {other} depot gate code was {number} before the move.",
        f"Gate codes are rotated every {rng.randint(2, 12)} months at the {place} depot.",
        f"The {place} depot manager is {rng.choice(['Ana', 'Ben', 'Chloe', 'Dev'])}; call {number} for the gate.",
        f"Deliveries to the {other} depot use gate {rng.randint(1, 9)}.",
        f"The user prefers {rng.choice(['tea', 'coffee', 'water'])} in meetings.",
        f"Room {number} is on floor {rng.randint(1, 9)}.",
    ])


def generate(seed: int, *, benign: int | None = None, kind: str | None = None) -> Scenario:
    """A random scenario (``benign``: about how many benign items; ``kind``: force the culprit's kind)."""
    rng = random.Random(seed)
    place, code = rng.choice(PLACES), f"{rng.randint(1000, 9999)}"
    chain = rng.random() < 0.25
    culprit_kind = kind or rng.choice(KINDS if not chain else ("memory", "history_user", "feature"))
    culprit = (f"My depot is the {place} one." if chain
               else rng.choice([f"Reminder: the {place} depot gate code is {code}.",
                                f"For visitors: {place} depot gate code is {code} (ask at the desk).",
                                f"Update from security: the {place} depot gate code is {code} since Monday."]))
    total = benign if benign is not None else rng.randint(12, 45)
    window = rng.choice(WINDOWS)
    s = Scenario(seed, culprit_kind, chain, window, rng.random() < 0.3, place, code, culprit)
    # spread the benign items over the kinds
    weights = {"memory": 3, "feature": 1, "instruction": 1, "history_user": 3, "history_tool": 2, "tool_result": 2}
    kinds = list(weights)
    counts = dict.fromkeys(kinds, 0)
    for _ in range(total):
        counts[rng.choices(kinds, [weights[k] for k in kinds])[0]] += 1
    for capped, most in (("history_tool", 5), ("tool_result", 6)):  # topics to look up are few
        counts["memory"] += max(0, counts[capped] - most)
        counts[capped] = min(counts[capped], most)
    s.facts = [Fact(f"fact.{i}", _benign(rng, place, code)) for i in range(counts["memory"])]
    s.features = [Feature(f"feature{i}", instructions=_benign(rng, place, code)) for i in range(counts["feature"])]
    s.instructions = [_benign(rng, place, code) for _ in range(counts["instruction"])]
    s.earlier = [f"Note: {_benign(rng, place, code)}" for _ in range(counts["history_user"])]
    topics = rng.sample(TOPICS, min(len(TOPICS), counts["history_tool"] + counts["tool_result"] + 1))
    for topic in topics[:counts["history_tool"]]:
        s.lookups[topic] = _benign(rng, place, code)
    search_topics = topics[counts["history_tool"]:counts["history_tool"] + max(1, counts["tool_result"])]
    for topic in search_topics:
        s.searches[topic] = _benign(rng, place, code)
    # plant the culprit
    if culprit_kind == "memory":
        s.facts.insert(rng.randint(0, len(s.facts)), Fact(f"fact.{len(s.facts)}", culprit))
    elif culprit_kind == "feature":
        s.features.insert(rng.randint(0, len(s.features)), Feature("planted", instructions=culprit))
    elif culprit_kind == "history_user":
        s.earlier.insert(rng.randint(0, len(s.earlier)), f"Note: {culprit}")
    elif culprit_kind == "history_tool":
        free = [t for t in TOPICS if t not in s.lookups and t not in s.searches] or [f"memo{seed}"]
        s.lookups[rng.choice(free)] = culprit
    else:
        topic = rng.choice(list(s.searches))
        s.searches[topic] = culprit
    lookups = [f"Look up {t}." for t in s.lookups]
    s.earlier = _interleave(rng, s.earlier, lookups)
    others = [p for p in PLACES if p != place]
    s.codes = {p: f"{rng.randint(1000, 9999)}" for p in others} | {place: code}
    asked = " ".join(f"[{t}]" for t in s.searches)
    s.question = (f"What is the gate code for my depot? Check {asked}." if chain
                  else f"What is the gate code for the {place} depot? Check {asked}.")
    if window == "messages":
        s.window_size = rng.randint(6, 40)
    elif window == "tokens":
        s.window_size = rng.randint(150, 900)
    elif window == "pinned":
        s.window_size = rng.randint(6, 30)
    if s.cap:
        s.cap_length = rng.randint(400, 2500)
    return s


def _interleave(rng: random.Random, a: list[str], b: list[str]) -> list[str]:
    out = list(a)
    for value in b:
        out.insert(rng.randint(0, len(out)), value)
    return out


def tools_for(s: Scenario) -> list[Tool]:
    """The scenario's tools: lookup (earlier runs), search (the run itself), gate_code (chain scenarios)."""

    @tool
    async def lookup(topic: str) -> str:
        """Look a topic up in the depot handbook.

        Args:
            topic: the topic
        """
        return s.lookups.get(topic, "Nothing on that.")

    @tool
    async def search(topic: str) -> str:
        """Search the depot notices.

        Args:
            topic: the topic
        """
        return s.searches.get(topic, "No notices.")

    @tool
    async def gate_code(place: str) -> str:
        """The gate code of a depot.

        Args:
            place: the depot
        """
        return f"The {place} depot gate code is {s.codes[place]}." if place in s.codes else "No such depot."

    return [lookup, search, gate_code]


def memory_for(s: Scenario) -> ConversationMemory:
    """The scenario's conversation memory (its window)."""
    if s.window == "messages":
        return ConversationMemory(max_messages=s.window_size)
    if s.window == "tokens":
        return ConversationMemory(max_tokens=s.window_size)
    if s.window == "pinned":
        return PinnedWindow(s.window_size)
    return ConversationMemory()


def agent_for(s: Scenario, recorder: Recorder) -> Agent:
    """The scenario's agent, recording into ``recorder``."""
    return Agent(
        "depot-assistant", provider=FunctionModel(depot_model), persona="You help staff with the depots.",
        tools=tools_for(s), memory=memory_for(s), facts=InMemoryFacts({"u": s.facts}), user_id="u",
        features=s.features, custom_instructions=s.instructions, session_id=f"planted-{s.seed}",
        composer=PromptComposer(max_length=s.cap_length or None), recorder=recorder,
    )


@dataclass
class Planted:
    """A recorded scenario: the run to explain and the hash of the planted culprit in it."""

    scenario: Scenario
    run_id: str
    culprit: str  # item hash
    derived: set[str]  # items the culprit made (the chain's gate_code result and call)
    answer: str
    tools: list[Tool]


async def record(s: Scenario, store: Store) -> Planted | None:
    """Run the scenario's earlier runs and its question; None when the culprit never reached the answer
    (a window or the cap left it out: the scenario then tests nothing)."""
    agent = agent_for(s, Recorder(store))
    for message in s.earlier:
        await agent.run(message)
    result = await agent.run(s.question)
    expected = f"The {s.place} depot gate code is {s.codes[s.place]}."
    if result.answer != expected:
        return None
    store.flush()
    data = store.load_run(result.run_id)
    sent = {e.item_hash for st in data.inferences() for e in data.inputs.get(st.id, []) if e.included}
    culprit = next((h for h in sent if s.culprit in data.items[h].text), None)
    if culprit is None:
        return None
    derived = {h for h, item in data.items.items()
               if item.kind in ("tool_result", "tool_call") and "gate_code" in json.dumps(item.body)}
    return Planted(s, result.run_id, culprit, derived, result.answer, agent_tools(agent))


def agent_tools(agent: Agent) -> list[Tool]:
    """The agent's tools, for blame's new calls."""
    return list(agent.tools.values())


async def planted(seed: int, store: Store, *, benign: int | None = None, kind: str | None = None,
                  tries: int = 20) -> Planted:
    """The first scenario from ``seed`` on whose culprit reaches the answer."""
    for attempt in range(tries):
        found = await record(generate(seed * 1000 + attempt, benign=benign, kind=kind), store)
        if found is not None:
            return found
    raise AssertionError(f"no scenario from seed {seed} got its culprit into the answer in {tries} tries")

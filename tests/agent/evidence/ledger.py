"""Ledger scenarios: long generated sessions with several faults at once, and an oracle for every edit.

The model (:func:`ledger_model`) is a pure function of its context. A question names keys
(``{alpha} {bravo}``) and topics to search (``[parking]``); the answer gives, for each key, the value
of the statement ``set KEY := VALUE (rev N)`` with the highest revision anywhere in the context
(system prompt, memory facts, retrieved facts, features, custom instructions, history, tool
results), then a digest of those values, so the answer looks random but is not. Two rules make
faults that act only in combination: the answer says ``LOCKED`` when the context holds both
``LOCKDOWN-A`` and ``LOCKDOWN-B`` (each of the pair flips it); and the parity of the ``TICK``
markers is part of the answer when there are any (removing one tick flips it, removing two does not:
an answer that is not monotone in its context).

Innocent items look like the culprits: the same key with a lower revision, ``set KEY = V`` (no
colon), ``unset KEY := V``, ``set KEYx := V``, statements about keys nobody asked for. Faults are
planted in every place an item can sit; some are duplicated (the same note twice, a note and the
model's echo of it, the same search result in an earlier run and this one), so removing one copy
changes nothing.

Because the model is pure, the oracle is exact: the answer of the recorded answering snapshot with
one item edited (:func:`oracle`) is what a faithful counterfactual must give. The scenario records
what every call of the session really saw (:class:`WatchedWindow`, the provider's requests), so the
recording can be checked against it.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from agent import Agent, ConversationMemory, Fact, Feature, InMemoryFacts, PromptComposer, tool
from agent.providers import FunctionModel, ModelRequest, ModelResponse, calls
from agent.tools import Tool
from tracer import ContextItem, Recorder

KEYS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo",
        "lima"]
TOPICS = ["parking", "staff", "deliveries", "safety", "weather", "holidays", "inventory", "fleet", "contacts",
          "billing", "maintenance", "schedule", "badges", "keys", "visitors", "cleaning"]
#: where a fault can be planted
PLACES = ("persona", "instruction", "feature", "fact", "retrieved", "note", "echo", "lookup", "search")
_STATEMENT = re.compile(r"(?<![\w-])set (\w+) := (\d+) \(rev (\d+)\)")
_KEYS = re.compile(r"\{(\w+)\}")
_TOPICS = re.compile(r"\[(\w+)\]")


def values_of(texts: Iterable[str]) -> dict[str, tuple[int, str]]:
    """For each key stated in ``texts``: (highest revision, its value)."""
    best: dict[str, tuple[int, str]] = {}
    for text in texts:
        for key, value, rev in _STATEMENT.findall(text):
            if key not in best or int(rev) > best[key][0]:
                best[key] = (int(rev), value)
    return best


def answer_of(texts: Sequence[str], keys: Sequence[str]) -> str:
    """The ledger answer for ``keys`` from a context whose items have ``texts``."""
    best = values_of(texts)
    parts = [f"{k}={best[k][1] if k in best else '?'}" for k in keys]
    digest = hashlib.blake2b(" ".join(parts).encode(), digest_size=3).hexdigest()
    answer = " ".join(parts) + f" [ref {digest}]"
    if any("LOCKDOWN-A" in t for t in texts) and any("LOCKDOWN-B" in t for t in texts):
        answer = "LOCKED " + answer
    ticks = sum(t.count("TICK") for t in texts)
    if ticks:
        answer += f" ticks {'odd' if ticks % 2 else 'even'}"
    return answer


def ledger_model(request: ModelRequest) -> ModelResponse | str:
    """The model: notes are noted (some echoed), look-ups looked up, questions answered from the context."""
    context = request.context
    last_user = max(i for i, ci in enumerate(context) if ci.item.kind == "user")
    question = context[last_user].item.text
    results = [ci for ci in context[last_user + 1:] if ci.item.kind == "tool_result"]
    if question.startswith("Note:"):
        return f"Noted: {question.removeprefix('Note: ')}" if question.endswith("(echo)") else "Noted."
    if question.startswith("Look up "):
        topic = question.removeprefix("Look up ").rstrip(".")
        return "Done." if results else calls(("lookup", {"topic": topic}, f"lookup-{topic}"))
    topics = _TOPICS.findall(question)
    if topics and not results:
        return calls(*(("search", {"topic": t}, f"search-{t}") for t in topics))
    return answer_of([ci.item.text for ci in context], _KEYS.findall(question))


def ledger_provider() -> FunctionModel:
    """The live provider for re-runs (``--provider tests.agent.evidence.ledger:ledger_provider``)."""
    return FunctionModel(ledger_model, name="ledger")


class WatchedWindow(ConversationMemory):
    """A memory window that remembers what each call kept and left out (what the model really saw).

    ``pin`` keeps the first ``pin`` messages too, so the window is not oldest first and leaves out
    the middle of the conversation.
    """

    def __init__(self, *, max_messages: int | None = None, pin: int = 0) -> None:
        super().__init__(max_messages=max_messages)
        self.pin = pin
        self.windows: list[tuple[list[ContextItem], list[ContextItem]]] = []

    def context(self, conversation_id: str) -> tuple[list[ContextItem], list[ContextItem]]:
        """The window, remembered."""
        kept, dropped = super().context(conversation_id)
        if self.pin and dropped:
            head = 0
            while head < min(self.pin, len(dropped)) or (head < len(dropped) and
                                                          dropped[head].item.kind in ("tool_call", "tool_result")):
                head += 1
            kept, dropped = [*dropped[:head], *kept], dropped[head:]
        self.windows.append((list(kept), list(dropped)))
        return kept, dropped


@dataclass
class Ledger:
    """One generated session: the agent's parts, the earlier runs' messages, the question, the planted faults."""

    seed: int
    turns: int
    window: int | None
    pin: int
    cap: int | None
    keys: list[str]
    persona: str = "You keep the ledger."
    instructions: list[str] = field(default_factory=list)
    features: list[Feature] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    retrieved: list[Fact] = field(default_factory=list)
    earlier: list[str] = field(default_factory=list)
    lookups: dict[str, str] = field(default_factory=dict)
    searches: dict[str, str] = field(default_factory=dict)
    question: str = ""
    planted: dict[str, str] = field(default_factory=dict)  # fault text -> the place it was planted

    def describe(self) -> str:
        """One line for a failure message."""
        return (f"seed {self.seed}: {self.turns} earlier runs, window {self.window} pin {self.pin}, cap {self.cap}, "
                f"keys {self.keys}, faults {sorted(set(self.planted.values()))}")


def _statement(key: str, value: int, rev: int) -> str:
    return f"set {key} := {value} (rev {rev})"


def _lookalike(rng: random.Random, key: str, rev: int) -> str:
    """Text like a fault's that cannot change the answer (``rev``: below the key's winning one)."""
    value = rng.randint(10, 99)
    return rng.choice([
        f"set {key} = {value} (rev {rev + 1000})",
        f"unset {key} := {value} (rev {rev + 1000})",
        f"set {key}x := {value} (rev {rev + 1000})",
        f"Remember: {_statement(key, value, rev)} was superseded.",
        f"the {key} ledger was audited; set {key} := is pending",
        f"Room {value} is on floor {rng.randint(1, 9)}.",
    ])


def generate(
    seed: int, *, turns: int, window: int | None, pin: int = 0, cap: int | None = None, keys: int = 3,
    faults: Sequence[str] = ("fact",), lockdown: tuple[str, str] | None = None, duplicates: int = 0,
    ticks: int = 0, system_items: int = 60, unasked: Sequence[str] = (),
) -> Ledger:
    """A session of ``turns`` earlier runs, its question asking ``keys`` keys, each key's winning
    statement planted in the place ``faults`` gives (cycled); ``lockdown`` plants the two halves of
    the combined fault in two places; ``duplicates`` winning statements are planted twice (in a
    second place too); ``ticks`` TICK markers are spread over the facts; ``system_items`` innocent
    items fill the system context; ``unasked`` places get a winning statement of a key not asked."""
    rng = random.Random(seed)
    asked = rng.sample(KEYS, keys)
    others = [k for k in KEYS if k not in asked]
    s = Ledger(seed, turns, window, pin, cap, asked)
    revs = iter(rng.sample(range(1, 900), 899))  # unique revisions below the winners (900+): never a tie
    topics = list(TOPICS)
    rng.shuffle(topics)
    search_topics = topics[:rng.randint(1, 3)]
    lookup_topics = topics[len(search_topics):]
    searches = {t: [f"Notice about {t}."] for t in search_topics}
    lookups: dict[str, list[str]] = {t: [f"Handbook on {t}."] for t in lookup_topics}
    notes: list[str] = []
    system: dict[str, list[str]] = {"persona": [], "instruction": [], "feature": [], "fact": [], "retrieved": []}

    def plant(place: str, text: str) -> None:
        if place in system:
            system[place].append(text)
        elif place in ("note", "echo"):
            notes.append(f"Note: {text}" + (" (echo)" if place == "echo" else ""))
        elif place == "lookup":
            lookups[rng.choice(lookup_topics)].append(text)
        elif place == "search":
            searches[rng.choice(search_topics)].append(text)
        else:
            raise ValueError(place)
        s.planted[text] = place

    winners: list[tuple[str, int]] = []
    for index, key in enumerate(asked):
        rev = 900 + index * 10 + rng.randint(0, 9)
        winners.append((key, rev))
        text = _statement(key, rng.randint(100, 999), rev)
        plant(faults[index % len(faults)], text)
        if index < duplicates:
            plant(rng.choice([p for p in PLACES if p != faults[index % len(faults)]]), text)
    for index, place in enumerate(unasked):
        plant(place, _statement(others[index % len(others)], rng.randint(100, 999), 950 + index))
    if lockdown is not None:
        plant(lockdown[0], "Security: LOCKDOWN-A is armed.")
        plant(lockdown[1], "Security: LOCKDOWN-B is armed.")
    # the innocents: lower revisions of the asked keys, look-alikes, other keys
    for _ in range(system_items):
        key = rng.choice(asked + others)
        text = (_statement(key, rng.randint(10, 99), next(revs)) if rng.random() < 0.4
                else _lookalike(rng, key, next(revs)))
        system[rng.choice(list(system))].append(text)
    for place, count in (("note", turns // 2), ("lookup", turns // 8), ("search", 4)):
        for _ in range(count):
            key = rng.choice(asked + others)
            text = (_statement(key, rng.randint(10, 99), next(revs)) if rng.random() < 0.5
                    else _lookalike(rng, key, next(revs)))
            if place == "note":
                notes.append(f"Note: {text}" + (" (echo)" if rng.random() < 0.2 else ""))
            elif place == "lookup":
                lookups[rng.choice(lookup_topics)].append(text)
            else:
                searches[rng.choice(search_topics)].append(text)
    for n in range(ticks):
        system["fact"].append(f"Counter TICK number {n}.")
    s.persona = " ".join(["You keep the ledger.", *system["persona"]])
    s.instructions = system["instruction"]
    s.features = [Feature(f"f{i}", instructions=text) for i, text in enumerate(system["feature"])]
    s.facts = [Fact(f"fact{i:03d}", text) for i, text in enumerate(system["fact"])]
    s.retrieved = [Fact(f"r{i:03d}.{rng.choice(search_topics + lookup_topics)}", text)
                   for i, text in enumerate(system["retrieved"])]
    # a retrieved fault must be retrieved by the question: its topic is searched
    s.retrieved = [Fact(f"{f.key.split('.')[0]}.{search_topics[0]}", f.text) if f.text in s.planted else f
                   for f in s.retrieved]
    s.lookups = {t: " ".join(v) for t, v in lookups.items()}
    s.searches = {t: " ".join(v) for t, v in searches.items()}
    # the earlier runs: notes, look-ups, earlier questions (which search too), some said twice
    runs = list(notes)
    runs += [f"Look up {t}." for t in lookup_topics if rng.random() < 0.8 or any(
        p in lookups[t] for p in s.planted)]
    while len(runs) < turns:
        asked_then = " ".join(f"{{{k}}}" for k in rng.sample(KEYS, 2))
        runs.append(f"Report {asked_then} after checking [{rng.choice(search_topics)}].")
    rng.shuffle(runs)
    planted_notes = [r for r in runs if any(p in r for p in s.planted)]
    # keep the planted notes among the newest messages, where a window cannot drop them
    runs = [r for r in runs if r not in planted_notes] + planted_notes
    s.earlier = runs
    s.question = (f"Report {' '.join('{' + k + '}' for k in asked)} after checking "
                  f"{' '.join(f'[{t}]' for t in search_topics)}.")
    return s


def tools_for(s: Ledger) -> list[Tool]:
    """lookup (earlier runs) and search (earlier questions and this one); both durable: re-runs may call them."""

    @tool(durable=True)
    async def lookup(topic: str) -> str:
        """Look a topic up in the handbook.

        Args:
            topic: the topic
        """
        return s.lookups.get(topic, "Nothing on that.")

    @tool(durable=True)
    async def search(topic: str) -> str:
        """Search the notices.

        Args:
            topic: the topic
        """
        return s.searches.get(topic, "No notices.")

    return [lookup, search]


def cli_tools() -> list[Tool]:
    """Tools for ``footprint blame --tools`` (a session's own search and lookup results are in its
    recording; a call the recording did not make gets nothing useful)."""
    return tools_for(Ledger(0, 0, None, 0, None, []))


@dataclass
class Session:
    """A recorded ledger session: the agent, its provider (which kept every request) and its window."""

    ledger: Ledger
    agent: Agent
    provider: FunctionModel
    memory: WatchedWindow
    run_ids: list[str]
    first_calls: list[int]  # per run, the index of its first model call in ``provider.requests``

    @property
    def run_id(self) -> str:
        """The run to explain: the question's."""
        return self.run_ids[-1]


class _Facts(InMemoryFacts):
    """The plain facts always, the retrieved ones when their topic is in the message."""

    def __init__(self, facts: list[Fact], retrieved: list[Fact]) -> None:
        super().__init__({"u": [*facts, *retrieved]})
        self.always = {f.key for f in facts}

    async def facts_for(self, user_id: str, query: str) -> list[Fact]:
        """Every plain fact, and the retrieved facts of the query's topics."""
        words = set(re.findall(r"\w+", query.lower()))
        return [f for f in await self.facts(user_id) if f.key in self.always or f.key.split(".")[-1] in words]


async def record(s: Ledger, recorder: Recorder) -> Session:
    """Run the session's earlier runs and its question."""
    provider = FunctionModel(ledger_model, name="ledger", keep_requests=100_000)
    memory = WatchedWindow(max_messages=s.window, pin=s.pin)
    agent = Agent(
        "ledger", provider=provider, persona=s.persona, tools=tools_for(s), memory=memory,
        facts=_Facts(s.facts, s.retrieved), user_id="u", features=s.features, custom_instructions=s.instructions,
        session_id=f"ledger-{s.seed}", composer=PromptComposer(max_length=s.cap), recorder=recorder,
    )
    run_ids, first_calls = [], []
    for message in [*s.earlier, s.question]:
        first_calls.append(len(provider.requests))
        result = await agent.run(message)
        assert result.status == "answered", (s.describe(), message, result.error)
        run_ids.append(result.run_id)
    return Session(s, agent, provider, memory, run_ids, first_calls)

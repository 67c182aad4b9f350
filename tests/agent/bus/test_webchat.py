"""WebChatAgent: the chat is the memory; traces stay out; tool exchanges are remembered for a while."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent import tool
from agent.bus import (
    AgentBinding,
    BadEventError,
    Bus,
    FinishedToolCall,
    MessageEvent,
    OutboundEvent,
    SendText,
    SendTrace,
    SourceBinding,
    TranscriptLine,
    Verdict,
    WebChatAgent,
)
from agent.providers import FunctionModel, ModelRequest, ScriptedModel, calls
from tracer import ItemKind, OriginKind, Recorder, Store, why

CHAT = "chat-1"
BINDING = AgentBinding([SourceBinding("webchat", prefix="", reply_channel="webchat")])


class Chat:
    """A chat canister in miniature: numbered lines, and a transport that writes the agent's sends into it."""

    def __init__(self) -> None:
        self.lines: list[TranscriptLine] = []
        self.write_replies = True
        self.reads = 0

    def write(self, sender: str, text: str, *, trace: bool = False) -> int:
        seq = len(self.lines) + 1
        self.lines.append(TranscriptLine(seq, sender, text, trace=trace))
        return seq

    async def read(self, chat_id: str, limit: int) -> Sequence[TranscriptLine]:
        self.reads += 1
        return list(self.lines)

    def transport(self, event: OutboundEvent) -> None:
        if isinstance(event, SendTrace):
            self.write(event.agent, event.text, trace=True)
        elif self.write_replies:
            self.write(event.agent, event.text)


class Room:
    """A bus with one web chat agent and a chat; ``say`` writes a line and delivers it."""

    def __init__(self, agent: WebChatAgent, chat: Chat) -> None:
        self.agent, self.chat = agent, chat
        self.bus = Bus()
        self.sent: list[OutboundEvent] = []
        self.bus.add_transport(self.sent.append)
        self.bus.add_transport(chat.transport)
        agent.start(self.bus)

    async def say(self, sender: str, text: str, *, deliver: bool = True) -> int:
        seq = self.chat.write(sender, text)
        if deliver:
            self.bus.publish(MessageEvent("webchat", CHAT, sender, str(seq), text, time.time()))
            await self.bus.drain()
        return seq


def context_lines(request: ModelRequest) -> list[str]:
    """The conversation part of a request, one readable entry per item."""
    out = []
    for ci in request.context:
        kind = ci.item.kind
        if kind == ItemKind.USER:
            out.append(f"user {ci.item.text}")
        elif kind == ItemKind.ASSISTANT:
            out.append(f"assistant {ci.item.text}")
        elif kind == ItemKind.TOOL_CALL:
            out.append(f"call {ci.item.body['name']}")
        elif kind == ItemKind.TOOL_RESULT:
            out.append(f"result {ci.item.body['name']}")
    return out


def answered_this_turn(request: ModelRequest) -> bool:
    """True when a tool result follows the newest user message (the turn already called its tool)."""
    kinds = [ci.item.kind for ci in request.context]
    last_user = len(kinds) - 1 - kinds[::-1].index(ItemKind.USER)
    return ItemKind.TOOL_RESULT in kinds[last_user:]


def webchat(chat: Chat, model: Any, **kwargs: Any) -> WebChatAgent:
    return WebChatAgent("salon", BINDING, provider=model, transcript=chat, **kwargs)


# ---------------------------------------------------------------------- the transcript is the memory


async def test_each_turn_reads_the_chat_back_and_answers_the_new_line() -> None:
    chat = Chat()
    model = FunctionModel(lambda r: f"answer {len(r.context)}")
    room = Room(webchat(chat, model), chat)
    await room.say("ola", "hello")
    await room.say("ola", "are you there?")
    assert context_lines(model.requests[1]) == ["user ola: hello", "assistant answer 3", "user ola: are you there?"]
    first_answer = next(e for e in room.sent if isinstance(e, SendText))
    assert first_answer == SendText("webchat", CHAT, "answer 3", "salon", in_reply_to="1")
    assert chat.lines[-1].sender_id == "salon" and room.agent.answered_through(CHAT) == 3


async def test_what_people_said_while_the_agent_was_muted_is_in_context_next_turn() -> None:
    chat = Chat()
    model = FunctionModel(lambda r: "noted")
    room = Room(webchat(chat, model), chat)
    await room.say("ola", "first", deliver=True)
    await room.say("ola", "muted one", deliver=False)
    await room.say("piotr", "muted two", deliver=False)
    await room.say("ola", "back to you")
    assert context_lines(model.requests[-1]) == [
        "user ola: first", "assistant noted", "user ola: muted one", "user piotr: muted two", "user ola: back to you",
    ]


async def test_a_restarted_agent_loses_nothing() -> None:
    chat = Chat()
    room = Room(webchat(chat, FunctionModel(lambda r: "one")), chat)
    await room.say("ola", "hello")
    model = FunctionModel(lambda r: "two")
    room2 = Room(webchat(chat, model), chat)  # a fresh agent on a fresh bus, the same chat
    await room2.say("ola", "still there?")
    assert context_lines(model.requests[0]) == ["user ola: hello", "assistant one", "user ola: still there?"]


async def test_traces_never_reach_the_model_and_tools_send_progress_and_finished_lines() -> None:
    seen_when_running: list[list[str]] = []
    chat = Chat()

    @tool(progress="Sprawdzam listę usług…")
    async def list_services() -> list[str]:
        """The salon's services."""
        seen_when_running.append([ln.text for ln in chat.lines if ln.trace])
        return ["strzyżenie", "farbowanie"]

    def trace_of(finished: FinishedToolCall) -> str | None:
        return f"{finished.name}: {'error' if finished.is_error else 'ok'}"

    model = ScriptedModel([calls(("list_services", {})), "Mamy strzyżenie i farbowanie.", "Proszę bardzo."])
    room = Room(webchat(chat, model, tools=[list_services], trace_of=trace_of), chat)
    await room.say("ola", "co oferujecie?")
    traces = [e for e in room.sent if isinstance(e, SendTrace)]
    assert [(t.kind, t.tool, t.text) for t in traces] == [
        ("progress", "list_services", "Sprawdzam listę usług…"), ("tool", "list_services", "list_services: ok"),
    ]
    assert seen_when_running == [["Sprawdzam listę usług…"]]  # the progress line was out before the tool ran
    assert [ln.trace for ln in chat.lines] == [False, True, True, False]

    await room.say("ola", "dziękuję")
    lines = context_lines(model.requests[-1])
    assert not any("Sprawdzam" in x or "list_services: ok" in x for x in lines)
    assert lines == ["user ola: co oferujecie?", "call list_services", "result list_services",
                     "assistant Mamy strzyżenie i farbowanie.", "user ola: dziękuję"]


async def test_silent_without_a_reply_channel_neither_answers_nor_traces() -> None:
    chat = Chat()

    @tool(progress="working…")
    async def work() -> str:
        """Work."""
        return "done"

    agent = WebChatAgent("salon", AgentBinding([SourceBinding("webchat", prefix="")]), transcript=chat,
                         provider=ScriptedModel([calls(("work", {})), "done it"]), tools=[work])
    room = Room(agent, chat)
    await room.say("ola", "go")
    assert room.sent == [] and agent.answered_through(CHAT) == 1


async def test_own_lines_and_echoed_traces_are_not_delivered_and_redeliveries_are_skipped() -> None:
    chat = Chat()
    model = FunctionModel(lambda r: "hi")
    agent = webchat(chat, model)
    assert agent.deliver(MessageEvent("webchat", CHAT, "salon", "5", "my own line", time.time())) is Verdict.IGNORE
    echoed = MessageEvent("webchat", CHAT, "bot2", "6", "trace", time.time(), metadata={"trace": True})
    assert agent.deliver(echoed) is Verdict.IGNORE
    room = Room(agent, chat)
    seq = await room.say("ola", "hello")
    room.bus.publish(MessageEvent("webchat", CHAT, "ola", str(seq), "hello", time.time()))
    await room.bus.drain()
    assert len(model.requests) == 1


async def test_a_message_without_a_sequence_number_is_reported() -> None:
    chat = Chat()
    agent = webchat(chat, FunctionModel(lambda r: "hi"))
    agent.deliver(MessageEvent("webchat", CHAT, "ola", "abc", "hello", time.time()))
    await agent.idle()
    assert isinstance(agent.failures[0].error, BadEventError) and "abc" in str(agent.failures[0].error)


async def test_persona_for_is_asked_every_turn() -> None:
    asked: list[str] = []

    def persona_for(chat_id: str) -> str | None:
        asked.append(chat_id)
        return "Odpowiadaj po polsku." if len(asked) == 1 else None

    chat = Chat()
    model = FunctionModel(lambda r: r.system_text())
    room = Room(webchat(chat, model, persona="Answer in English.", persona_for=persona_for), chat)
    await room.say("ola", "one")
    await room.say("ola", "two")
    assert asked == [CHAT, CHAT]
    assert "Odpowiadaj po polsku." in model.requests[0].system_text()
    assert "Answer in English." in model.requests[1].system_text()
    assert "Odpowiadaj" not in model.requests[1].system_text()


async def test_history_limit_cuts_the_transcript() -> None:
    chat = Chat()
    model = FunctionModel(lambda r: "ok")
    room = Room(webchat(chat, model, history_limit=3), chat)
    for i in range(4):
        await room.say("ola", f"m{i}", deliver=False)
    await room.say("ola", "now")
    assert context_lines(model.requests[0]) == ["user ola: m2", "user ola: m3", "user ola: now"]


async def test_lines_are_items_with_transcript_origins_and_own_replies_keep_their_run() -> None:
    chat = Chat()
    model = FunctionModel(lambda r: "hello ola")
    room = Room(webchat(chat, model), chat)
    await room.say("ola", "hi")
    await room.say("ola", "again")
    request = model.requests[1]
    user = next(ci for ci in request.context if ci.item.kind == ItemKind.USER)
    assert (user.origin.kind, user.origin.source) == (OriginKind.USER, f"transcript:{CHAT}#1")
    reply = next(ci for ci in request.context if ci.item.kind == ItemKind.ASSISTANT)
    assert reply.origin.kind == OriginKind.STAGE and reply.origin.run_id is not None  # the run that wrote it
    restarted = webchat(chat, FunctionModel(lambda r: "x"))
    turn = restarted.build_turn(CHAT, 5, MessageEvent("webchat", CHAT, "ola", "5", "x", 0.0), chat.lines)
    own = next(ci for ci in turn.history if ci.item.kind == ItemKind.ASSISTANT)
    assert (own.origin.kind, own.origin.source) == (OriginKind.FILE, f"transcript:{CHAT}#2")


# ---------------------------------------------------------------------- remembered tool exchanges

PREVIEW_ID = "c-77"


def salon_tools(added: list[dict[str, Any]]) -> list[Any]:
    @tool(progress="Dodaję usługę…")
    async def add_service(name: str, price: int, confirmed: bool = False, confirmation_id: str | None = None) -> dict[str, Any]:
        """Add a service to the salon's list; call with confirmed=false first for a preview."""
        if not confirmed:
            return {"status": "confirmation_required", "confirmation_id": PREVIEW_ID, "preview": f"{name} {price} zł"}
        if confirmation_id != PREVIEW_ID:
            return {"status": "error", "reason": "unknown confirmation id"}
        added.append({"name": name, "price": price})
        return {"status": "added"}

    return [add_service]


def salon_model(request: ModelRequest) -> Any:
    """Reads its context like a model would: previews, confirmations and what this turn already did."""
    context = request.context
    last_user = max(i for i, ci in enumerate(context) if ci.item.kind == ItemKind.USER)
    this_turn = [ci for ci in context[last_user + 1:] if ci.item.kind == ItemKind.TOOL_RESULT]
    said = request.last_user_text()
    if said.endswith("dodaj strzyżenie za 80 zł"):
        if not this_turn:
            return calls(("add_service", {"name": "strzyżenie", "price": 80, "confirmed": False}))
        return "Dodam usługę „strzyżenie” za 80 zł. Potwierdzasz?"
    if said.endswith("tak"):
        if this_turn:
            return "Dodano." if json.loads(this_turn[-1].item.body["content"])["status"] == "added" else "Błąd."
        previews = [json.loads(ci.item.body["content"]) for ci in context if ci.item.kind == ItemKind.TOOL_RESULT]
        ids = [p["confirmation_id"] for p in previews if p.get("status") == "confirmation_required"]
        if ids:
            return calls(("add_service", {"name": "strzyżenie", "price": 80, "confirmed": True,
                                          "confirmation_id": ids[-1]}))
        return "Nie widzę podglądu — co mam potwierdzić?"
    return "Słucham?"


async def test_the_two_step_confirmation_sees_the_previous_turns_exchange(tmp_path: Path) -> None:
    added: list[dict[str, Any]] = []
    chat = Chat()
    model = FunctionModel(salon_model)
    with Store.open(tmp_path / "chat.duckdb") as store:
        agent = webchat(chat, model, tools=salon_tools(added), recorder=Recorder(store))
        room = Room(agent, chat)
        await room.say("owner", "dodaj strzyżenie za 80 zł")
        await room.say("owner", "tak")
        store.flush()

        first_request_of_turn_two = model.requests[2]
        assert context_lines(first_request_of_turn_two) == [
            "user owner: dodaj strzyżenie za 80 zł",  # the anchor
            "call add_service", "result add_service",  # remembered, right before the reply
            "assistant Dodam usługę „strzyżenie” za 80 zł. Potwierdzasz?",
            "user owner: tak",
        ]
        assert added == [{"name": "strzyżenie", "price": 80}]
        texts = [ln.text for ln in chat.lines if not ln.trace]
        assert texts[-1] == "Dodano."

        # the remembered call still names the run that made it, so why walks back into turn one
        runs = store.session_runs(CHAT)
        assert len(runs) == 2
        call = next(ci for ci in first_request_of_turn_two.context if ci.item.kind == ItemKind.TOOL_CALL)
        assert call.origin.run_id == runs[0].id
        assert runs[0].id in why(store, runs[1].id).runs


async def test_without_the_remembered_exchange_the_model_cannot_confirm() -> None:
    added: list[dict[str, Any]] = []
    chat = Chat()
    room = Room(webchat(chat, FunctionModel(salon_model), tools=salon_tools(added)), chat)
    await room.say("owner", "dodaj strzyżenie za 80 zł")
    model = FunctionModel(salon_model)
    restarted = Room(webchat(chat, model, tools=salon_tools(added)), chat)  # a restart forgets the exchange
    await restarted.say("owner", "tak")
    assert "call add_service" not in context_lines(model.requests[0])
    assert added == [] and chat.lines[-1].text == "Nie widzę podglądu — co mam potwierdzić?"


async def test_an_exchange_whose_reply_is_not_in_the_chat_yet_goes_last() -> None:
    chat = Chat()
    chat.write_replies = False  # the chat has not shown the agent's reply yet
    model = FunctionModel(salon_model)
    room = Room(webchat(chat, model, tools=salon_tools([])), chat)
    await room.say("owner", "dodaj strzyżenie za 80 zł")
    await room.say("owner", "tak")
    assert context_lines(model.requests[2]) == [
        "user owner: dodaj strzyżenie za 80 zł", "call add_service", "result add_service", "user owner: tak",
    ]


async def test_an_exchange_whose_line_left_the_window_is_left_out() -> None:
    chat = Chat()
    model = FunctionModel(salon_model)
    room = Room(webchat(chat, model, tools=salon_tools([]), history_limit=3), chat)
    await room.say("owner", "dodaj strzyżenie za 80 zł")  # line 1, reply line 2
    await room.say("owner", "hmm", deliver=False)  # line 3
    await room.say("owner", "tak")  # line 4: the window is lines 2-4
    assert context_lines(model.requests[2]) == [
        "assistant Dodam usługę „strzyżenie” za 80 zł. Potwierdzasz?", "user owner: hmm", "user owner: tak",
    ]


async def test_only_the_last_three_tool_turns_come_back_and_plain_turns_keep_nothing() -> None:
    chat = Chat()

    @tool
    async def ping(n: int) -> str:
        """Ping."""
        return f"pong {n}"

    def model_fn(request: ModelRequest) -> Any:
        said = request.last_user_text()
        if said.startswith("owner: ping") and not answered_this_turn(request):
            return calls(("ping", {"n": int(said.split()[-1])}))
        return "ok"

    model = FunctionModel(model_fn)
    room = Room(webchat(chat, model, tools=[ping]), chat)
    for n in range(1, 5):
        await room.say("owner", f"ping {n}")
    await room.say("owner", "no tools here")
    await room.say("owner", "what did you ping?")
    results = [ci.item.body["content"] for ci in model.requests[-1].context if ci.item.kind == ItemKind.TOOL_RESULT]
    assert results == ["pong 2", "pong 3", "pong 4"]
    assert [e.anchor for e in room.agent.remembered.exchanges(CHAT)] == [3, 5, 7]


async def test_a_failed_turn_is_not_marked_answered_and_its_exchange_waits_as_pending() -> None:
    from agent.errors import ProviderError

    chat = Chat()
    script: list[Any] = [calls(("add_service", {"name": "x", "price": 1, "confirmed": False})),
                         ProviderError("down", provider="p"), "Gotowe."]
    model = ScriptedModel(script)
    room = Room(webchat(chat, model, tools=salon_tools([])), chat)
    await room.say("owner", "dodaj x")
    assert room.agent.answered_through(CHAT) is None and room.agent.failures[0].where == "run"
    assert [e.anchor for e in room.agent.remembered.exchanges(CHAT)] == [1]
    seq = await room.say("owner", "halo?")
    # line 1 is answered again together with the new line: the failed attempt's calls are left out
    assert context_lines(model.requests[-1]) == ["user owner: dodaj x", "user owner: halo?"]
    assert room.agent.answered_through(CHAT) == seq


async def test_remembered_chats_are_bounded() -> None:
    from agent.bus import RememberedToolExchanges

    chat = Chat()

    @tool
    async def ping() -> str:
        """Ping."""
        return "pong"

    def model_fn(request: ModelRequest) -> Any:
        return "ok" if answered_this_turn(request) else calls(("ping", {}))

    agent = WebChatAgent("salon", BINDING, provider=FunctionModel(model_fn), transcript=chat, tools=[ping],
                         remembered=RememberedToolExchanges(max_chats=2))
    for i, chat_id in enumerate(["a", "b", "c"]):
        agent.deliver(MessageEvent("webchat", chat_id, "ola", str(i + 1), "ping", time.time()))
        await agent.idle()
    assert agent.remembered.chats() == ["b", "c"]

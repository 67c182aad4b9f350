"""The bus host: channel agents on one bus, fed and read over HTTP on loopback."""

from __future__ import annotations

import asyncio
import json
import time

import httpx2 as httpx

from agent.bus import AgentBinding, ChannelAgent, HeartbeatEvent, MessageEvent, OutboundEvent, SourceBinding
from hosting import BusHost, create_bus_app
from tests.hosting.hostkit import serve_in_thread


class Echo(ChannelAgent):
    """Answers every message with its own name and the text."""

    async def on_message(self, message: MessageEvent, route: SourceBinding) -> None:
        await self.reply(message, route, f"{self.name}: {message.text}")


class Ticker(ChannelAgent):
    """Counts heartbeats."""

    ticks = 0

    async def on_heartbeat(self, tick: HeartbeatEvent) -> None:
        Ticker.ticks += 1


def _agents() -> list[ChannelAgent]:
    vip = Echo("vip-desk", AgentBinding([SourceBinding("chat", endpoint="vip", reply_channel="chat")]))
    everyone = Echo("front-desk", AgentBinding([SourceBinding("chat", prefix="", reply_channel="chat")]))
    watcher = Echo("auditor", AgentBinding([SourceBinding("chat", prefix="", claim=False)]))
    return [watcher, vip, everyone]


def test_priority_claims_and_outbound_stream_over_http() -> None:
    sent: list[OutboundEvent] = []
    host = BusHost(_agents(), transports=[sent.append])
    with serve_in_thread(create_bus_app(host, token="t")) as url:
        auth = {"Authorization": "Bearer t"}
        with httpx.Client(base_url=url, headers=auth, timeout=10) as http, \
                http.stream("GET", "/v1/bus/outbound") as stream:
            lines = stream.iter_lines()
            assert next(lines) == ": connected"
            report = http.post("/v1/bus/messages", json={"source": "chat", "endpoint": "vip", "sender_id": "u1",
                                                         "text": "hello"}).json()
            assert report == {"handled": True, "claimed_by": "vip-desk", "shared_with": ["auditor"], "failed": []}
            report = http.post("/v1/bus/messages", json={"source": "chat", "endpoint": "room-7", "sender_id": "u2",
                                                         "text": "hi"}).json()
            assert report["claimed_by"] == "front-desk"
            events = []
            for line in lines:
                if line.startswith("data: "):
                    events.append(json.loads(line.removeprefix("data: ")))
                if len(events) == 2:
                    break
            assert sorted(e["text"] for e in events) == ["front-desk: hi", "vip-desk: hello"]
            assert {e["to"] for e in events} == {"vip", "room-7"}
            status = http.get("/v1/bus/status").json()
            assert [a["name"] for a in status["agents"]] == ["auditor", "vip-desk", "front-desk"]
            bad = http.post("/v1/bus/messages", json={"source": "chat"})
            assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_request"
        assert httpx.get(f"{url}/v1/bus/status").status_code == 401
    assert sorted(e.text for e in sent) == ["front-desk: hi", "vip-desk: hello"]


async def test_heartbeat_reaches_agents_that_hear_it_and_close_stops_it() -> None:
    Ticker.ticks = 0
    host = BusHost([Ticker("ticker", AgentBinding(heartbeat=True))], heartbeat_seconds=0.01)
    await host.start()
    deadline = time.monotonic() + 5
    while Ticker.ticks < 3 and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    await host.close()
    seen = Ticker.ticks
    assert seen >= 3
    await asyncio.sleep(0.05)
    assert Ticker.ticks == seen and host.bus is None

"""Secrets at rest: a password in a tool call's arguments, an API key in user text and in a
provider's error — none of them is found in the store file, the session store, the logs, the
OpenTelemetry export or the HTTP replies."""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from agent import Agent, Tool
from agent.errors import ProviderError
from agent.providers import FunctionModel, ModelRequest, calls
from hosting import DuckDBSessions, create_app, standing_agent
from tracer import Recorder, Store
from tracer.otel import spans_of

API_KEY = "sk-" + "Zq9Xw8Vu7Ts6" * 3
PASSWORD = "correct-horse-battery-staple"
PASTED_PASSWORD = "tr0ub4dor-and-3"  # a JSON field pasted into a message: '{"password": "..."}'
PROJECT_KEY = "sk-proj-" + "Ab3dEf6hIj9kLm2n" * 3
BEARER = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijklmnop"
GOOGLE_KEY = "AIza" + "Sy9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe_d-"
GITHUB_TOKEN = "ghp_" + "Zq9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe9Dc8"
GITHUB_PAT = "github_pat_11ABCDEFG0" + "Zq9Xw8Vu7Ts6Rq5Po4Nm3Lk2" * 3
SLACK_TOKEN = "xoxb-1234567890-" + "Zq9Xw8Vu7Ts6Rq5Po4Nm3Lk2"
AWS_KEY = "AKIA" + "Z2Q3X4W5V6U7T2S3"
ANTHROPIC_KEY = "sk-ant-api03-" + "Zq9Xw8Vu7Ts6_Rq5Po4Nm3Lk2-" * 3
PRIVATE_KEY_BODY = "MIIEowIBAAKCAQEAzq9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe"
URL_PASSWORD = "db-pw-Zq9Xw8Vu7"
SECRETS = (API_KEY, PASSWORD, PASTED_PASSWORD, PROJECT_KEY, BEARER, GOOGLE_KEY, GITHUB_TOKEN, GITHUB_PAT, SLACK_TOKEN,
           AWS_KEY, ANTHROPIC_KEY, PRIVATE_KEY_BODY, URL_PASSWORD)


def _answer(request: ModelRequest) -> Any:
    text = request.last_user_text()
    if text == "log me in":
        if request.context[-1].item.kind != "tool_result":
            return calls(("login", {"user": "ada", "password": PASSWORD, "note": f"as {GITHUB_TOKEN}"}, "call-login"))
        return "logged in"
    if text == "use the other key":
        raise ProviderError(f"401 Unauthorized: incorrect API key provided: {API_KEY} (slack said {SLACK_TOKEN})")
    return f"noted: {text}"


async def _login(arguments: dict[str, Any]) -> str:
    return f"welcome {arguments['user']}, your deploy key is {AWS_KEY}"


def _agent(recorder: Recorder) -> Agent:
    login = Tool("login", "Log in.", {"type": "object", "properties": {"user": {"type": "string"},
                                                                        "password": {"type": "string"},
                                                                        "note": {"type": "string"}}}, _login)
    return Agent("secrets", provider=FunctionModel(_answer), tools=[login], recorder=recorder)


def _every_text_in(path: Path) -> str:
    """Every text value of every table of the DuckDB file (its strings are compressed on disk)."""
    store = Store.open(path, read_only=True)
    try:
        out = []
        for (table,) in store.query("SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'"):
            for (column,) in store.query(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = ?", [table]):
                out += [str(v) for (v,) in store.query(f'SELECT "{column}"::VARCHAR FROM {table}') if v is not None]
        return "\n".join(out)
    finally:
        store.close()


async def test_no_secret_reaches_a_store_a_log_an_export_or_a_reply(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="footprint")
    path = tmp_path / "fp.duckdb"
    store = Store.open(path)
    recorder = Recorder(store)
    host = standing_agent(agent_factory=lambda: _agent(recorder), sessions=DuckDBSessions(store),
                          durability="sync", close_sessions=True)
    app = create_app(host)
    replies: list[str] = []
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://host") as client:
        for message in (f"my key is {API_KEY}, keep it", "log me in", "use the other key", "still there?",
                        f"the database wants password={PASSWORD}",
                        f'my settings are {{"user": "ada", "password": "{PASTED_PASSWORD}"}}, key {PROJECT_KEY}',
                        f"call it with Authorization: Bearer {BEARER} please",
                        f"keys: {GOOGLE_KEY}, {GITHUB_PAT}, {ANTHROPIC_KEY}, postgresql://app:{URL_PASSWORD}@db/x",
                        f"-----BEGIN RSA PRIVATE KEY-----\n{PRIVATE_KEY_BODY}\n-----END RSA PRIVATE KEY-----"):
            reply = await client.post("/v1/turns", json={"message": message, "session_id": "ada"})
            replies.append(reply.text)
        failed = json.loads(replies[2])
        assert failed["status"] == "failed" and "[REDACTED]" in failed["error"]
        for route in ("/v1/sessions/ada", "/v1/sessions/ada/runs", "/v1/recordings/runs"):
            replies.append((await client.get(route)).text)
        run_ids = [r["id"] for r in json.loads(replies[-1])["runs"]]
        for run_id in run_ids:
            replies.append((await client.get(f"/v1/recordings/runs/{run_id}")).text)
        streamed = await client.post("/v1/turns/stream", json={"message": "use the other key", "session_id": "ada"})
        replies.append(streamed.text)
    await host.close()
    spans = spans_of([store.load_run(r) for r in run_ids], content=True)
    exported = "\n".join(json.dumps(dict(s.attributes or {}), default=str) + json.dumps(
        [dict(e.attributes or {}) for e in s.events], default=str) + (s.status.description or "") for s in spans)
    store.close()

    stored = _every_text_in(path)
    assert "log me in" in stored and "welcome ada" in stored  # the conversation is there ...
    places = {"store file": stored, "logs": caplog.text, "OTLP export": exported, "HTTP replies": "\n".join(replies),
              "raw file": path.read_bytes().decode("latin-1")}
    for where, text in places.items():
        for secret in SECRETS:
            assert secret not in text, f"{secret[:6]}... found in {where}"  # ... its secrets are not
    assert stat.S_IMODE(os.stat(path).st_mode) & 0o077 == 0  # and the file is its owner's only


def test_the_hosts_own_token_pasted_into_a_message_never_comes_back_nor_reaches_the_store(tmp_path: Path) -> None:
    from tests.hosting.hostkit import host_process

    token = "s3cret-tok-42"  # shorter than the default bearer pattern's 16 characters, and without 'Bearer '
    path = tmp_path / "fp.duckdb"
    auth = {"Authorization": f"Bearer {token}"}
    with host_process(path, tmp_path, "--agent", "echo", "--token", token) as (proc, url):
        reply = httpx.post(f"{url}/v1/turns", headers=auth, timeout=30,
                           json={"message": f"the host's token is {token} (Bearer {token})", "session_id": "tok"})
        runs = httpx.get(f"{url}/v1/sessions/tok/runs", headers=auth, timeout=30)
        proc.terminate()
        proc.wait(timeout=30)
    assert reply.status_code == 200 and "[REDACTED]" in reply.json()["answer"]
    assert runs.status_code == 200 and runs.json()["runs"]
    assert token not in reply.text and token not in runs.text  # nor in the redaction policy stored with the run
    assert token not in _every_text_in(path)


def test_the_hosts_own_token_sent_to_a_durable_session_is_not_stored(tmp_path: Path) -> None:
    import time

    from tests.hosting.hostkit import host_process

    token = "s3cret-tok-43"
    path = tmp_path / "fp.duckdb"
    auth = {"Authorization": f"Bearer {token}"}
    with host_process(path, tmp_path, "--agent", "echo", "--token", token, "--durable") as (proc, url):
        sent = httpx.post(f"{url}/v1/durable/tok/send", headers=auth, timeout=30,
                          json={"text": f"the host's token is {token}"})
        assert sent.status_code == 202, sent.text
        deadline, state = time.monotonic() + 30, {}
        while time.monotonic() < deadline:
            state = httpx.get(f"{url}/v1/durable/tok", headers=auth, timeout=30).json()
            if not state.get("busy") and state.get("messages", 0) >= 2:
                break
            time.sleep(0.1)
        proc.terminate()
        proc.wait(timeout=30)
    assert state.get("messages", 0) >= 2, state  # the turn ran and was stored ...
    assert token not in json.dumps(state)
    assert token not in _every_text_in(path)  # ... with the token masked

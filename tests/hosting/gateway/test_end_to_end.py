"""End to end: `footprint serve --gateway`, an agent created, chatted with, its prompt patched and chatted
with again over HTTP; `footprint compare` of the two runs names the prompt change as the first divergence."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx2 as httpx

from tests.hosting.hostkit import FOOTPRINT, ROOT

TOKEN = "e2e-token"


def start_host(db: Path) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("OPENAI_API_KEY", None)
    proc = subprocess.Popen(
        [str(FOOTPRINT), "serve", "--db", str(db), "--port", "0", "--agent", "echo", "--gateway", "--token", TOKEN],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env, cwd=ROOT,
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            raise RuntimeError(f"footprint serve exited with {proc.returncode}")
        match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        if match:
            assert "stored agents under /api/agents" in line
            return proc, f"http://127.0.0.1:{match.group(1)}"
    proc.kill()
    raise RuntimeError("footprint serve did not start")


def test_a_patched_prompt_is_the_first_divergence_of_two_chats(tmp_path: Path) -> None:
    db = tmp_path / "fp.duckdb"
    proc, url = start_host(db)
    try:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as client:
            created = client.post("/api/agents", json={"name": "Support", "systemPrompt": "You answer politely."})
            assert created.status_code == 201, created.text
            agent_id = created.json()["id"]
            first = client.post(f"/api/agents/{agent_id}/chat", json={"message": "hello", "session_id": "s1"})
            patch = client.patch(f"/api/agents/{agent_id}", json={"systemPrompt": "You answer tersely."})
            second = client.post(f"/api/agents/{agent_id}/chat", json={"message": "hello", "session_id": "s1"})
            assert (first.status_code, patch.status_code, second.status_code) == (200, 200, 200)
            assert first.json()["status"] == second.json()["status"] == "answered"
            runs = client.get(f"/api/agents/{agent_id}/runs").json()["runs"]
            assert [r["id"] for r in runs] == [second.json()["run_id"], first.json()["run_id"]]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert proc.returncode == 0

    compared = subprocess.run(
        [str(FOOTPRINT), "compare", first.json()["run_id"], second.json()["run_id"], "--db", str(db), "--json"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert compared.returncode == 0, compared.stderr
    report = json.loads(compared.stdout)
    divergence = report["first_divergence"]
    assert divergence["label"] == "prompt 'prompt composition'", divergence
    assert divergence["reasons"] == ["produced different output"]
    [entry] = divergence["outputs"]["entries"]  # exactly one piece changed: the base prompt section
    assert (entry["change"], entry["item_kind"]) == ("edited", "prompt_section")
    assert entry["before_text"].startswith("You answer politely.") and entry["text"].startswith("You answer tersely.")
    assert [p["change"] for p in report["stages"]][:divergence["index"]] == ["same"] * divergence["index"]

"""Default agents: the seed file's shape, the start and resync rules, and choosing an agent by keywords."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hosting.gateway import Gateway, SeedFileError, choose_agent, load_seed_file, parse_seeds
from tests.hosting.gateway.conftest import SEEDS


def write(path: Path, agents: Any) -> None:
    path.write_text(json.dumps(agents), encoding="utf-8")


async def test_start_creates_the_missing_defaults_and_keeps_edits(gateway: Gateway, seed_file: Path) -> None:
    research = await gateway.get("research")
    assert (research.name, research.config.emoji, research.config.category) == ("Research Agent", "🔬", "knowledge")
    assert research.config.triggers == ["research", "find papers"] and research.config.max_turns == 10

    await gateway.update("research", {"systemPrompt": "Edited by a user."})
    await gateway.delete("coder")
    report = await gateway.start()  # a restart

    assert report.to_dict() == {"created": ["coder"], "updated": [], "unchanged": ["research"], "kept": []}
    assert (await gateway.get("research")).system_prompt == "Edited by a user."


async def test_resync_updates_creates_and_never_deletes(gateway: Gateway, seed_file: Path) -> None:
    mine = await gateway.create({"name": "My own agent"})
    await gateway.update("research", {"systemPrompt": "Edited by a user."})
    await gateway.chat("research", "hi")
    assert gateway.cached() == ["research"]
    changed = [{**SEEDS[0], "systemPrompt": "You research, v2."},
               {"id": "writer", "name": "Writer", "systemPrompt": "You write.", "config": {}}]
    write(seed_file, changed)  # the coder agent is no longer in the file

    report = await gateway.resync()

    assert report.to_dict() == {"created": ["writer"], "updated": ["research"], "unchanged": [],
                                "kept": sorted(["coder", mine.id], key=lambda i: {"coder": 0}.get(i, 1))}
    assert (await gateway.get("research")).system_prompt == "You research, v2."
    assert gateway.cached() == []  # the updated agent's instance was dropped
    assert (await gateway.resync()).to_dict()["unchanged"] == ["research", "writer"]
    assert await gateway.repository.count() == 4


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{nope", "is not JSON: Expecting property name"),
        ('{"agents": 3}', "expected a list of agents"),
        ("[1]", "agents[0] is not a JSON object"),
        ('[{"name": "x"}]', "agents[0].id: a default agent needs an id"),
        ('[{"id": "a", "name": "A", "config": {"temperature": 9}}]', "agents[0].temperature: Input should be less"),
        ('[{"id": "a", "name": "A", "config": []}]', "agents[0].config is not a JSON object"),
        ('[{"id": "a", "name": "A"}, {"id": "a", "name": "B"}]', "agents[1].id 'a' repeats agents[0].id"),
    ],
)
def test_a_bad_seed_file_says_what_and_where(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "seeds.json"
    path.write_text(content, encoding="utf-8")

    with pytest.raises(SeedFileError, match=message.replace("[", r"\[").replace("]", r"\]")) as caught:
        load_seed_file(path)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[{\"id\": \"caf\xe9\"}]".encode("latin-1"), "is not UTF-8 JSON: byte 0xe9 at position 12 is not UTF-8"),
        ("[]".encode("utf-16"), "is not UTF-8 JSON: byte 0xff at position 0"),
        (b"[" * 100_000 + b"]" * 100_000, "is nested too deeply to parse"),
        (b"[" + b"9" * 5000 + b"]", "is not JSON the host can read: Exceeds the limit"),
    ],
    ids=["latin-1", "utf-16", "deep", "huge-integer"],
)
def test_a_seed_file_the_parser_refuses_for_any_reason_is_a_seed_file_error(
    tmp_path: Path, content: bytes, message: str
) -> None:
    """A file that is not UTF-8 escaped as UnicodeDecodeError: `footprint: internal error` (exit 70)."""
    path = tmp_path / "seeds.json"
    path.write_bytes(content)

    with pytest.raises(SeedFileError, match=message) as caught:
        load_seed_file(path)
    assert str(caught.value).startswith(str(path))


def test_a_missing_seed_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(SeedFileError, match=r"cannot read the default agents file .*missing\.json"):
        load_seed_file(tmp_path / "missing.json")


async def test_choose_agent_by_trigger_keywords(gateway: Gateway) -> None:
    records = await gateway.list()

    assert choose_agent(records, "There is a BUG in my Python script")[0].id == "coder"  # type: ignore[index]
    assert choose_agent(records, "please research this")[1] == ["research"]  # type: ignore[index]
    assert choose_agent(records, "papers: find them")[1] == ["find papers"]  # type: ignore[index]  # any order
    assert choose_agent(records, "find me a cafe") is None  # every word of a keyword must be there
    assert choose_agent(records, "good morning") is None


def test_seed_triggers_may_be_a_plain_list() -> None:
    [definition] = parse_seeds([{"id": "a", "name": "A", "triggers": ["Hello There"]}])
    assert definition.triggers == ["hello there"]

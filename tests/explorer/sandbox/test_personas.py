"""Personas and their conversations, kept as JSON records in the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent import Conversation
from explorer import PersonaStore, SandboxError
from explorer.sandbox import KeyValue
from tracer import Store


@pytest.fixture
def personas(tmp_path: Path) -> PersonaStore:
    store = Store.open(tmp_path / "p.duckdb")
    yield PersonaStore(store, known_tools=["check_availability"], clock=lambda: 100.0)
    store.close()


def test_create_list_update_delete(personas: PersonaStore) -> None:
    bob = personas.create("Bob", "You are Bob.", discloses_ai=False)
    ada = personas.create("  Ada ", " You are Ada. ", tools=["check_availability"])
    assert [p.name for p in personas.list()] == ["Ada", "Bob"]
    assert (ada.name, ada.persona, ada.tools, ada.conversation_id) == (
        "Ada", "You are Ada.", ("check_availability",), "ada-0002")
    renamed = personas.update(ada.id, name="Ada Lovelace", discloses_ai=False)
    assert renamed.conversation_id == ada.conversation_id and not renamed.discloses_ai
    assert personas.get(ada.id) == renamed and personas.find("ada lovelace") == renamed
    assert personas.delete(bob.id) == bob
    assert [p.name for p in personas.list()] == ["Ada Lovelace"]


@pytest.mark.parametrize(
    ("name", "persona", "tools", "message"),
    [
        ("", "x", (), "needs a name"),
        ("Ada", "   ", (), "needs a persona text"),
        ("Ada", "x", ("rm_rf",), "unknown tool"),
        ("x" * 65, "x", (), "keep it to 64"),
    ],
)
def test_bad_personas_are_refused_saying_why(
    personas: PersonaStore, name: str, persona: str, tools: tuple[str, ...], message: str
) -> None:
    with pytest.raises(SandboxError, match=message):
        personas.create(name, persona, tools=tools)
    assert personas.list() == []


def test_names_are_unique_whatever_their_case(personas: PersonaStore) -> None:
    ada = personas.create("Ada", "x")
    personas.create("Bob", "y")
    with pytest.raises(SandboxError, match="already a persona called 'Ada'"):
        personas.create("ADA", "z")
    with pytest.raises(SandboxError, match="already a persona called 'Ada'"):
        personas.update(personas.find("bob").id, name="ada")  # type: ignore[union-attr]
    with pytest.raises(SandboxError, match="no field colour"):
        personas.update(ada.id, colour="red")
    with pytest.raises(SandboxError, match="no persona p-nope"):
        personas.get("p-nope")


def test_conversations_are_saved_and_deleted_with_their_persona(personas: PersonaStore) -> None:
    ada = personas.create("Ada", "x")
    assert personas.load_conversation(ada.id) is None
    personas.save_conversation(ada.id, Conversation(ada.conversation_id, "x", metadata={"k": 1}))
    loaded = personas.load_conversation(ada.id)
    assert loaded is not None and loaded.metadata == {"k": 1}
    personas.delete(ada.id)
    assert personas.load_conversation(ada.id) is None


def test_an_unreadable_conversation_is_an_error_not_a_fresh_start(personas: PersonaStore) -> None:
    ada = personas.create("Ada", "x")
    personas.kv.put("sandbox.conversation", ada.id, {"format": "something else"})
    with pytest.raises(SandboxError, match="unreadable"):
        personas.load_conversation(ada.id)


def test_the_records_live_in_the_store_file_and_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "kv.duckdb"
    with Store.open(path) as store:
        PersonaStore(store).create("Ada", "x")
    with Store.open(path, read_only=True) as store:
        assert [p.name for p in PersonaStore(store).list()] == ["Ada"]
        with pytest.raises(SandboxError, match="read-only"):
            KeyValue(store).put("ns", "k", 1)
    with Store.open(tmp_path / "empty.duckdb") as store:
        assert KeyValue(store).items("ns") == [] and KeyValue(store).get("ns", "k") is None
        kv = KeyValue(store)
        kv.put("ns", "k", {"a": [1]})
        assert kv.items("ns") == [("k", {"a": [1]})]
        assert kv.delete("ns", "k") and not kv.delete("ns", "k")

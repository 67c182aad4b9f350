"""Personal memory records: validation naming the field, and the in-memory store."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent import RECORD_KINDS, InMemoryPersonalMemory, memory_record
from agent.errors import PersonalMemoryError


@pytest.mark.parametrize(
    ("arguments", "field", "message"),
    [
        (("bad user!", "fact", "x"), "user_id", "user id 'bad user!'"),
        (("alice", "secret", "x"), "kind", "kind 'secret' is not one of identity, fact"),
        (("alice", "fact", "x"), "name", "a fact record needs a name"),
        (("alice", "fact", "  "), "name", "needs a name"),
        (("alice", "interest", "chess"), "name", r"^an interest record needs a name"),
        (("alice", "autonomy_level", "reckless"), "text", "autonomy level 'reckless' is not one of manual"),
        (("alice", "timezone", "Mars/Olympus"), "text", "'Mars/Olympus' is not an IANA time zone"),
        (("alice", "memory", ""), "text", "needs a non-empty text"),
    ],
)
def test_an_invalid_record_names_the_field(arguments: tuple[str, str, str], field: str, message: str) -> None:
    with pytest.raises(PersonalMemoryError, match=message) as caught:
        memory_record(*arguments)
    assert caught.value.field == field


def test_a_credential_in_a_record_is_masked_when_the_record_is_made() -> None:
    """Every record is made here (the HTTP API's, the injector's facts), so none keeps a raw key."""
    record = memory_record("alice", "fact", "my key is sk-" + "a1B2c3D4e5F6" * 3, name="key")
    assert record.text == "my key is [REDACTED]"


def test_field_specific_rules() -> None:
    with pytest.raises(PersonalMemoryError, match="status 'done' of the fact record 'city' must be active"):
        memory_record("alice", "fact", "Berlin", name="city", status="done")
    with pytest.raises(PersonalMemoryError, match="importance 2 must be a number from 0 to 1") as caught:
        memory_record("alice", "memory", "likes tea", importance=2)
    assert caught.value.field == "importance"
    with pytest.raises(PersonalMemoryError, match=r"^a timezone record is named 'timezone'"):
        memory_record("alice", "timezone", "Europe/Berlin", name="tz")
    with pytest.raises(PersonalMemoryError, match=r"^an autonomy_level record is named 'autonomy_level', not 'x'"):
        memory_record("alice", "autonomy_level", "manual", name="x")
    assert memory_record("alice", "timezone", "Europe/Berlin").key == "timezone/timezone"
    goal = memory_record("alice", "goal", "Learn German", status="done")
    assert goal.status == "done" and len(goal.name) == 12
    assert memory_record("alice", "fact", "x" * 4000, name="long").text == "x" * 4000
    with pytest.raises(PersonalMemoryError, match="4001 characters"):
        memory_record("alice", "fact", "x" * 4001, name="long")


async def test_the_in_memory_store_keeps_records_per_user_in_profile_order() -> None:
    memory = InMemoryPersonalMemory()
    await memory.put(memory_record("alice", "goal", "Run a marathon", name="marathon"))
    await memory.put(memory_record("alice", "identity", "Alice", name="name"))
    await memory.put(memory_record("alice", "fact", "Lives in Berlin", name="home_city"))
    await memory.put(memory_record("bob", "fact", "Lives in Lyon", name="home_city"))
    await memory.put(memory_record("alice", "fact", "Lives in Hamburg", name="home_city"))  # replaces

    records = await memory.records("alice")

    assert [r.key for r in records] == ["identity/name", "fact/home_city", "goal/marathon"]
    assert records[1].text == "Lives in Hamburg" and records[1].source == "personal:alice/fact/home_city"
    assert await memory.delete("alice", "goal/marathon") and not await memory.delete("alice", "goal/marathon")
    assert [r.text for r in await memory.records("bob")] == ["Lives in Lyon"]


@settings(max_examples=200, deadline=None)
@given(kind=st.sampled_from(sorted(RECORD_KINDS)), name=st.text(max_size=12), text=st.text(max_size=30),
       importance=st.floats(allow_nan=True), status=st.sampled_from(["active", "done", "x"]))
def test_any_input_is_a_valid_record_or_a_named_error(kind: str, name: str, text: str, importance: float,
                                                       status: str) -> None:
    try:
        record = memory_record("u", kind, text, name=name or None, importance=importance, status=status)
    except PersonalMemoryError as error:
        assert error.field in {"name", "text", "status", "importance"}
        assert str(error)
    else:
        assert record.text == record.text.strip() and record.text
        assert 0.0 <= record.importance <= 1.0
        assert record.source == f"personal:u/{kind}/{record.name}"

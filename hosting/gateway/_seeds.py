"""Default agents: a JSON seed file of agent definitions, loaded at start and on resync.

The file is a list of agents, or ``{"agents": [...]}``. Each agent has an ``id``, ``name``,
``systemPrompt``, ``provider`` and ``model`` (usually ``default``) and a ``config`` object (max
tokens, temperature, max turns, max tool calls, tools, tool groups), plus optional ``emoji``,
``category``, ``description`` and ``triggers`` — keywords (a list, or ``{"keywords": [...]}``)
that choose the agent for a message (:func:`choose_agent`).

Rules: at start, agents of the file that are not stored are created and stored ones are left as
they are (a restart never undoes an edit); a resync also updates the stored agents of the file to
the file's definition. Neither ever deletes an agent — one the user made, or one the file no
longer lists.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._definition import AgentDefinition, AgentRecord, validated
from .errors import AgentDefinitionError, SeedFileError

#: The default agents that ship with footprint (``footprint serve --gateway`` seeds them).
BUNDLED_SEED_FILE = Path(__file__).with_name("default-agents.json")
_EXTRAS = ("emoji", "category", "description", "triggers")
_WORD = re.compile(r"[a-z0-9]+")


def load_seed_file(path: str | Path) -> list[AgentDefinition]:
    """The definitions in a seed file; :class:`SeedFileError` says what is wrong and where."""
    where = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise SeedFileError(f"cannot read the default agents file {where}: {exc.strerror or exc}") from exc
    return parse_seeds(_parse_json(raw, where), where=where)


def _parse_json(raw: bytes, where: str) -> Any:
    """``raw`` parsed as UTF-8 JSON; a :class:`SeedFileError` naming ``where`` and what is wrong.

    Every way the parser can refuse a file is said so — bytes that are not UTF-8 (a file saved as
    Latin-1 or UTF-16), nesting too deep to parse, an integer longer than Python reads — not only a
    syntax error: the others escaped as a `footprint: internal error` (exit 70).
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SeedFileError(f"{where} is not UTF-8 JSON: byte 0x{raw[exc.start]:02x} at position {exc.start} is not "
                            f"UTF-8 (save the file as UTF-8)") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SeedFileError(f"{where} is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except RecursionError:
        raise SeedFileError(f"{where} is not JSON the host can read: it is nested too deeply to parse") from None
    except ValueError as exc:  # an integer of more digits than sys.get_int_max_str_digits()
        raise SeedFileError(f"{where} is not JSON the host can read: {exc}") from None


def parse_seeds(data: Any, *, where: str = "seed") -> list[AgentDefinition]:
    """Definitions from a parsed seed file (see the module docstring for its shape)."""
    entries = data.get("agents") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise SeedFileError(f"{where}: expected a list of agents or {{\"agents\": [...]}}")
    definitions: list[AgentDefinition] = []
    seen: dict[str, int] = {}
    for index, entry in enumerate(entries):
        at = f"agents[{index}]"
        if not isinstance(entry, dict):
            raise SeedFileError(f"{where}: {at} is not a JSON object")
        if not entry.get("id"):
            raise SeedFileError(f"{where}: {at}.id: a default agent needs an id (resync matches agents by it)")
        try:
            definition = validated(_flatten(entry, f"{where}: {at}"), where=at)
        except AgentDefinitionError as exc:
            raise SeedFileError(f"{where}: {exc}") from None
        assert definition.id is not None
        if definition.id in seen:
            raise SeedFileError(f"{where}: {at}.id {definition.id!r} repeats agents[{seen[definition.id]}].id")
        seen[definition.id] = index
        definitions.append(definition)
    return definitions


def _flatten(entry: dict[str, Any], at: str) -> dict[str, Any]:
    flat = {k: v for k, v in entry.items() if k not in ("config", "dataAccess", *_EXTRAS)}
    config = entry.get("config", {})
    if not isinstance(config, dict):
        raise SeedFileError(f"{at}.config is not a JSON object")
    flat.update(config)
    for key in _EXTRAS:
        if key in entry:
            flat[key] = entry[key]
    triggers = flat.get("triggers")
    if isinstance(triggers, dict):
        flat["triggers"] = triggers.get("keywords", [])
    return flat


@dataclass
class SyncReport:
    """What loading or resyncing the seed file did, by agent id."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # stored agents the file does not list: never deleted

    def to_dict(self) -> dict[str, list[str]]:
        """The JSON-ready form (what ``POST /api/agents/resync`` returns)."""
        return {"created": self.created, "updated": self.updated, "unchanged": self.unchanged, "kept": self.kept}


def choose_agent(records: Sequence[AgentRecord], message: str) -> tuple[AgentRecord, list[str]] | None:
    """The agent whose trigger keywords match ``message`` best, with the keywords that matched.

    A keyword matches when all its words appear in the message (case-insensitive); the agent with
    the most matched words wins, ties going to the earlier agent. None when no keyword matches.
    """
    words = set(_WORD.findall(message.lower()))
    best: tuple[int, int, AgentRecord, list[str]] | None = None
    for index, record in enumerate(records):
        matched = [k for k in record.config.triggers if set(_WORD.findall(k)) <= words and _WORD.findall(k)]
        if not matched:
            continue
        weight = sum(len(_WORD.findall(k)) for k in matched)
        if best is None or (weight, -index) > (best[0], -best[1]):
            best = (weight, index, record, matched)
    return None if best is None else (best[2], best[3])

"""A stored agent's definition: the record the repository keeps, and the rules it must meet.

The record follows the agents table: id, name, system prompt, provider, model, a config JSON blob
(max tokens, temperature, max turns, max tool calls, tools, tool groups — plus the emoji,
category, description and keyword triggers of default agents), created and updated times.
``provider`` and ``model`` may be ``default``: resolved when the agent is first used, from the
host's settings. Field names are camelCase on the wire (``systemPrompt``, ``maxToolCalls``), as in
the REST API and the seed file; Python code uses the snake_case attributes.

Every rule is checked in one place, the pydantic models below, whoever writes the record — the
REST API, the seed file or a program — and a violation is an :class:`AgentDefinitionError`
naming the field.
"""

from __future__ import annotations

import json
import re
import time
import unicodedata
import uuid
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from tracer import RedactionPolicy
from tracer.errors import quoted

from .errors import AgentDefinitionError

DEFAULT = "default"
ID_PATTERN = r"^[a-z0-9][a-z0-9_\-]{0,63}$"
TOOL_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
MAX_PROMPT_CHARS = 100_000

_WIRE = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True, str_strip_whitespace=True)
#: a definition is stored, returned and sent to the model: a credential in its texts is masked, as in the recordings
_POLICY = RedactionPolicy()
NOT_A_SECRET = ("looks like a credential (an API key or a token): it is stored and sent on as given, so give "
                "one that is not a secret")


def _names(values: list[str], what: str) -> list[str]:
    for index, value in enumerate(values):
        if not TOOL_NAME_PATTERN.match(value):
            raise ValueError(f"{what}[{index}] {quoted(value)} must be 1-64 ASCII letters, digits or _ . -")
    if len(set(values)) != len(values):
        raise ValueError(f"{what} lists a name twice")
    return values


class _NoNul(BaseModel):
    @field_validator("*")
    @classmethod
    def _no_nul_characters(cls, value: Any) -> Any:
        # a NUL cannot be stored in PostgreSQL text: refused for every store alike, naming the field
        texts = value if isinstance(value, list) else [value]
        if any(isinstance(t, str) and "\x00" in t for t in texts):
            raise ValueError("must not contain NUL characters")
        return value


def _not_a_bool(value: Any) -> Any:
    # pydantic reads true as 1 and false as 0 for a number: maxToolCalls false stored 0 tool calls
    if isinstance(value, bool):
        raise ValueError(f"must be a number, not {str(value).lower()}")
    return value


#: a number field that refuses JSON's true and false (what ``Annotated[int, NOT_A_BOOL]`` adds)
NOT_A_BOOL = BeforeValidator(_not_a_bool)


class AgentConfig(_NoNul):
    """The config blob of a stored agent."""

    model_config = _WIRE

    max_tokens: Annotated[int, NOT_A_BOOL] = Field(8192, ge=1, le=1_000_000, description="The most tokens one answer may use.")
    temperature: Annotated[float, NOT_A_BOOL] = Field(0.7, ge=0.0, le=2.0, description="Sampling temperature, 0 to 2.")
    max_turns: Annotated[int, NOT_A_BOOL] = Field(25, ge=1, le=1_000, description="Model calls one turn may make.")
    max_tool_calls: Annotated[int, NOT_A_BOOL] = Field(200, ge=0, le=10_000, description="Tool calls one turn may make.")
    tools: list[str] = Field(default_factory=list, max_length=500, description="Tool names from the host's registry.")
    tool_groups: list[str] = Field(default_factory=list, max_length=100,
                                   description="Tool groups; each adds its tools.")
    emoji: str | None = Field(None, max_length=16)
    category: str | None = Field(None, max_length=100)
    description: str | None = Field(None, max_length=2_000)
    triggers: list[str] = Field(default_factory=list, max_length=100,
                                description="Keywords that make a message choose this agent.")

    @field_validator("tools")
    @classmethod
    def _tool_names(cls, value: list[str]) -> list[str]:
        return _names(value, "tools")

    @field_validator("tool_groups")
    @classmethod
    def _group_names(cls, value: list[str]) -> list[str]:
        return _names(value, "toolGroups")

    @field_validator("description", "category", "emoji")
    @classmethod
    def _masked_text(cls, value: str | None) -> str | None:
        return None if value is None else _POLICY.text(value)

    @field_validator("triggers")
    @classmethod
    def _keywords(cls, value: list[str]) -> list[str]:
        cleaned = [_POLICY.text(k).strip().lower() for k in value]
        if any(not k or len(k) > 100 for k in cleaned):
            raise ValueError("each trigger keyword must be 1-100 characters")
        return cleaned


class _DefinitionFields(_NoNul):
    model_config = _WIRE

    name: str = Field(..., min_length=1, max_length=100, description="A unique name.")
    system_prompt: str = Field("", max_length=MAX_PROMPT_CHARS, description="The agent's base prompt.")
    provider: str = Field(DEFAULT, min_length=1, max_length=100,
                          description="A provider of the host, or `default` (the host's default).")
    model: str = Field(DEFAULT, min_length=1, max_length=200, description="A model name, or `default`.")

    @field_validator("system_prompt", "name")
    @classmethod
    def _masked_prompt(cls, value: str) -> str:
        # NFC: a name typed as "cafe" + a combining accent is the same name as "café", in every store
        return _POLICY.text(unicodedata.normalize("NFC", value))

    @field_validator("provider", "model")
    @classmethod
    def _not_a_credential(cls, value: str) -> str:
        # a name the host resolves and sends on as given: a key pasted here would be kept (it cannot be masked)
        if _POLICY.text(value) != value:
            raise ValueError(NOT_A_SECRET)
        return value


class AgentDefinition(_DefinitionFields, AgentConfig):
    """What creating an agent takes: name, prompt, provider, model and the config fields, flat."""

    id: str | None = Field(None, pattern=ID_PATTERN, description="Optional; a fresh id is given when absent.")

    @field_validator("id")
    @classmethod
    def _id_not_a_credential(cls, value: str | None) -> str | None:
        if value is not None and _POLICY.text(value) != value:
            raise ValueError(NOT_A_SECRET)
        return value

    def config(self) -> AgentConfig:
        """The config part."""
        return AgentConfig.model_validate(self.model_dump(include=set(AgentConfig.model_fields)))


@dataclass(frozen=True)
class AgentRecord:
    """A stored agent."""

    id: str
    name: str
    system_prompt: str
    provider: str
    model: str
    config: AgentConfig
    created_at: float
    updated_at: float

    def to_dict(self) -> dict[str, Any]:
        """The REST form (camelCase)."""
        return {"id": self.id, "name": self.name, "systemPrompt": self.system_prompt, "provider": self.provider,
                "model": self.model, "config": self.config_dict(), "createdAt": self.created_at,
                "updatedAt": self.updated_at}

    def config_dict(self) -> dict[str, Any]:
        """The config blob as stored (camelCase keys)."""
        return self.config.model_dump(by_alias=True)

    def config_json(self) -> str:
        """The config blob as the repository stores it."""
        return json.dumps(self.config_dict(), ensure_ascii=False, sort_keys=True)

    def definition(self) -> dict[str, Any]:
        """The flat definition (the create request's shape) this record was made from."""
        return {"id": self.id, "name": self.name, "systemPrompt": self.system_prompt, "provider": self.provider,
                "model": self.model, **self.config_dict()}

    def same_definition(self, other: AgentRecord) -> bool:
        """True when both define the agent alike (times aside)."""
        return self.definition() == other.definition()


def validated(data: Any, *, where: str = "") -> AgentDefinition:
    """``data`` (a mapping in the wire form) as a checked definition; errors name the field."""
    if not isinstance(data, dict):
        raise AgentDefinitionError(where, f"an agent definition is a JSON object, not {type(data).__name__}")
    try:
        definition = AgentDefinition.model_validate(data)
    except ValidationError as exc:
        raise definition_error(exc, where) from None
    if not definition.name.strip():
        raise AgentDefinitionError(_at(where, "name"), "must not be blank")
    return definition


#: the fields a reply has and a definition does not (a client sending back what GET returned)
_NOT_A_FIELD = {
    "config": "is how a reply groups the config: give its fields (maxTokens, temperature, ...) at the top level",
    "createdAt": "is set by the store, not given",
    "updatedAt": "is set by the store, not given",
}


def definition_error(exc: ValidationError, where: str = "") -> AgentDefinitionError:
    """The first problem of a pydantic error as an :class:`AgentDefinitionError` naming its field."""
    first = exc.errors()[0]
    loc = [str(p) for p in first.get("loc", ()) if p != "body"]
    field = ".".join(loc)
    message = str(first.get("msg", "invalid")).removeprefix("Value error, ")
    if first.get("type") == "extra_forbidden":
        message = _NOT_A_FIELD.get(field, "is not a field of an agent definition")
    more = len(exc.errors()) - 1
    if more:
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    return AgentDefinitionError(_at(where, field), message)


def _at(where: str, field: str) -> str:
    return f"{where}.{field}" if where and field else where or field


def record_from(definition: AgentDefinition, *, created_at: float | None = None) -> AgentRecord:
    """A new record for ``definition`` (a fresh id unless it names one)."""
    now = time.time()
    return AgentRecord(
        id=definition.id or f"agt-{uuid.uuid4().hex[:12]}", name=definition.name,
        system_prompt=definition.system_prompt, provider=definition.provider, model=definition.model,
        config=definition.config(), created_at=created_at if created_at is not None else now, updated_at=now,
    )


def patched(record: AgentRecord, changes: dict[str, Any]) -> AgentRecord:
    """``record`` with ``changes`` (wire form, flat) applied and checked; updated now."""
    if not isinstance(changes, dict):
        raise AgentDefinitionError("", "a patch is a JSON object")
    if "id" in changes and changes["id"] != record.id:
        raise AgentDefinitionError("id", "an agent's id cannot be changed")
    merged = {**record.definition(), **changes}
    updated = record_from(validated(merged), created_at=record.created_at)
    # updated_at moves strictly forward: it is what other hosts compare to see a change
    return AgentRecord(**{**updated.__dict__, "updated_at": max(updated.updated_at, record.updated_at + 1e-6)})


def record_from_row(row: tuple[Any, ...], *, where: str) -> AgentRecord:
    """A record from a repository row (id, name, system_prompt, provider, model, config, created, updated)."""
    try:
        config = AgentConfig.model_validate(json.loads(row[5] or "{}"))
    except (ValueError, ValidationError) as exc:
        raise AgentDefinitionError(f"{where}.config", f"the stored config cannot be read: {exc}") from None
    return AgentRecord(str(row[0]), str(row[1]), row[2] or "", str(row[3]), str(row[4]), config,
                       float(row[6] or 0.0), float(row[7] or 0.0))

"""The request and response bodies of the HTTP host (they make its OpenAPI spec)."""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from agent import check_user_id
from agent._personal import USER_PATTERN
from agent.errors import PersonalMemoryError
from tracer import RedactionPolicy
from tracer.errors import quoted

SESSION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@\-]{0,199}$"
SESSION_ID_RULE = "1-200 ASCII letters, digits or . _ : @ - (starting with a letter or digit)"
MAX_MESSAGE_CHARS = 100_000
_SESSION_ID = re.compile(SESSION_ID_PATTERN)
_CREDENTIALS = RedactionPolicy()
NOT_A_SECRET = ("looks like a credential (an API key or a token): ids are stored, logged and sent back as "
                "given, so use one that is not a secret")


#: the bearer tokens of the hosts this process serves (see :func:`refuse_in_ids`)
_HOST_TOKENS: set[str] = set()


def refuse_in_ids(token: str) -> None:
    """Refuse session and turn ids holding ``token`` (a host's own bearer token, whatever it looks
    like): such an id would be stored as the session's name, exported with its spans and listed."""
    _HOST_TOKENS.add(token)


def looks_like_credential(value: str) -> bool:
    """True when the default redaction policy would mask some of ``value`` (an id pasted from a key)."""
    return _CREDENTIALS.text(value) != value


def _refuse_credential(what: str, value: str) -> None:
    if any(token in value for token in _HOST_TOKENS):  # not quoted: nothing would mask it
        raise ValueError(f"{what} holds this host's bearer token: ids are stored, logged and sent back "
                         f"as given, so use one that is not a secret")
    if looks_like_credential(value):
        raise ValueError(f"{what} {quoted(value)} {NOT_A_SECRET}")


def check_session_id(value: str) -> str:
    """``value`` when it is a valid session id; else a ValueError saying what a session id is.

    An id that looks like a credential is refused: unlike a message, an id cannot be masked (it
    names the session in the store, in replies and in URLs), so a key pasted as one would be kept.
    """
    if not _SESSION_ID.fullmatch(value):
        raise ValueError(f"session id {quoted(value)} must be {SESSION_ID_RULE}")
    _refuse_credential("session id", value)
    return value


TURN_ID_RULE = "1-200 characters, none of them a control character"


def check_turn_id(value: str) -> str:
    """``value`` when it is a valid turn id; else a ValueError saying what a turn id is.

    A turn id names a stored value (``turn.<turn_id>``): a NUL byte cannot be stored in PostgreSQL
    text at all (the turn ran, then its save failed with 503), and other control characters in an
    id are a client's bug, not a name.
    """
    if not value:
        raise ValueError("turn id must not be empty (give 1-200 characters naming the turn, or leave turn_id out)")
    if len(value) > 200:
        raise ValueError(f"turn id is {len(value)} characters; it must be {TURN_ID_RULE}")
    if any(unicodedata.category(c) in ("Cc", "Cs") for c in value):
        raise ValueError(f"turn id {quoted(value)} must be {TURN_ID_RULE}")
    _refuse_credential("turn id", value)  # it is stored as a key (turn.<turn_id>), never masked
    return value


def _checked_user_id(value: str) -> str:
    try:
        return check_user_id(value)
    except PersonalMemoryError as exc:
        raise ValueError(str(exc)) from None


#: A user id (whose personal memory), checked as a memory record checks it, in a body or a path.
UserIdText = Annotated[str, AfterValidator(_checked_user_id),
                       Field(json_schema_extra={"pattern": USER_PATTERN.pattern})]

#: A session id, checked the same way in a body field and in a path (one rule, one error, 422).
SessionIdText = Annotated[str, AfterValidator(check_session_id),
                          Field(json_schema_extra={"pattern": SESSION_ID_PATTERN})]

#: A client's turn id, checked the same way in every body that takes one. (Its length is checked by
#: check_turn_id too: pydantic's own length check answered an empty one with "Value should have
#: at least 1 item after validation, not 0".)
TurnIdText = Annotated[str, AfterValidator(check_turn_id),
                       Field(json_schema_extra={"minLength": 1, "maxLength": 200})]


class TurnRequest(BaseModel):
    """Send a turn: a message, or a decision for a session paused on a question."""

    model_config = ConfigDict(extra="forbid")

    message: str = Field("", max_length=MAX_MESSAGE_CHARS, description="The user's message.")
    session_id: SessionIdText | None = Field(
        None,
        description="The conversation to continue (created on first use); omit for a one-off turn.",
    )
    decision: str | None = Field(
        None, min_length=1, max_length=MAX_MESSAGE_CHARS,
        description="The answer to the question a paused session asked; continues the paused run.",
    )
    turn_id: TurnIdText | None = Field(
        None,
        description="A client-chosen id for this turn: resending it after a lost reply or a host "
                    "restart returns that turn's reply instead of running the message twice.",
    )

    @model_validator(mode="after")
    def _message_or_decision(self) -> TurnRequest:
        if self.decision is None and not self.message.strip():
            raise ValueError("give a non-empty `message` (or a `decision` for a paused session)")
        if self.decision is not None and self.session_id is None:
            raise ValueError("a `decision` needs the `session_id` of the paused session")
        return self


class DecisionRequest(BaseModel):
    """Resume a paused session with a person's decision."""

    model_config = ConfigDict(extra="forbid")

    decision: str = Field(..., min_length=1, max_length=MAX_MESSAGE_CHARS)
    turn_id: TurnIdText | None = None


class TurnReplyModel(BaseModel):
    """How a turn ended: answered, awaiting a person (with the question), failed, cancelled, or
    interrupted by a host stop (stored, finished on the session's next request)."""

    status: Literal["answered", "awaiting", "failed", "cancelled", "interrupted"] = Field(
        description="answered; awaiting a person's decision (the question); failed (the error); cancelled (the run "
                    "was stopped); interrupted (the host stopped during the turn: it is stored and finishes on the "
                    "session's next request, whose reply carries it as recovered)")
    session_id: str | None
    run_id: str | None
    answer: str = ""
    question: str | None = None
    error: str | None = None
    recovered: dict[str, Any] | None = Field(
        None, description="A turn interrupted by a host stop, completed before this one (its run and answer).",
    )
    replayed: bool = Field(False, description="True when this is the stored reply of a turn_id already run.")


class SessionLine(BaseModel):
    """One session in GET /v1/sessions."""

    session_id: str
    active: bool = Field(description="An agent instance for it is in the pool.")
    running: bool = Field(description="A turn of it is running on this host now.")
    last_activity: float | None = Field(description="Unix time of its last change.")
    status: str | None = Field(description="running (a turn of it runs: here, or on another host sharing the store, "
                                           "under that host's lease); interrupted (a crash or a shutdown stopped its "
                                           "turn: the session's next request finishes it); else its last run's "
                                           "status (answered, awaiting, failed, cancelled).")


class SessionsReply(BaseModel):
    """GET /v1/sessions."""

    sessions: list[SessionLine]


class HealthReply(BaseModel):
    """GET /v1/health."""

    status: str
    shape: str
    durability: str
    sessions_store: str
    active_sessions: int
    running_turns: int
    draining: bool
    failed: str | None = None  # why the host is exiting to be restarted


class ErrorDetail(BaseModel):
    """What went wrong: a stable ``code`` (``invalid_json``, ``session_busy``, ``not_found``, ...) and a message."""

    model_config = ConfigDict(extra="allow")

    code: str
    message: str
    field: str | None = Field(None, description="The request field the error is about (invalid_request).")
    session_id: str | None = Field(None, description="The session a refusal is about.")
    details: list[dict[str, Any]] | None = Field(None, description="Each invalid field: its loc and message.")


class ErrorReply(BaseModel):
    """Every error the host answers: 4xx for bad input or a refusal, 5xx for the host's own failure."""

    error: ErrorDetail


#: Every route's error responses in the OpenAPI spec (instead of FastAPI's {"detail": [...]} 422,
#: which the host never sends).
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    "4XX": {"model": ErrorReply, "description": "Bad input (400 invalid_json, 408 request_timeout, 413, 415, 422 invalid_request), "
                                                "401 without the token, 404 not_found, 409 a refusal or "
                                                "ambiguous_id (an id prefix more than one id starts with)"},
    "5XX": {"model": ErrorReply, "description": "The host's own failure (500, 503 store_error / host_failed)"},
}


"""Path parameters every route checks the same way as the body fields (one rule, one error)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from ._models import SESSION_ID_RULE, SessionIdText, UserIdText

#: A route parameter ``session_id: SessionId`` is validated like the ``session_id`` of a request
#: body: a bad one is a 422 ``invalid_request`` naming ``session_id`` and what a session id is.
SessionId = Annotated[SessionIdText, Path(description=SESSION_ID_RULE)]

#: The largest offset a page may start at (SQL's OFFSET is a signed 64-bit number; past it is a 422, not a 500).
MAX_OFFSET = 2**63 - 1

#: A page's ``offset``: 0 or more, at most :data:`MAX_OFFSET`.
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET, description="How many to skip (0 or more).")]

#: A route parameter ``user_id: UserId`` is validated like the ``user_id`` of a chat body.
UserId = Annotated[UserIdText, Path(description="1-100 ASCII letters, digits or . _ : @ - (a letter or digit first)")]

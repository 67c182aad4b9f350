"""Path parameters every route checks the same way as the body fields (one rule, one error)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path

from ._models import SESSION_ID_RULE, SessionIdText

#: A route parameter ``session_id: SessionId`` is validated like the ``session_id`` of a request
#: body: a bad one is a 422 ``invalid_request`` naming ``session_id`` and what a session id is.
SessionId = Annotated[SessionIdText, Path(description=SESSION_ID_RULE)]

"""Path parameters every route checks the same way (one dependency, one error)."""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import Depends, HTTPException, Path

from ._models import SESSION_ID_PATTERN

_SESSION_ID = re.compile(SESSION_ID_PATTERN)


def checked_session_id(
    session_id: Annotated[str, Path(description="1-200 letters, digits or . _ : @ - (a letter or digit first)")],
) -> str:
    """The route's ``session_id``; 400 naming what is wrong when it is not a valid session id."""
    if not _SESSION_ID.match(session_id):
        raise HTTPException(400, f"session id {session_id[:80]!r} must be 1-200 letters, digits or . _ : @ - "
                                 f"(starting with a letter or digit)")
    return session_id


#: A route parameter ``session_id: SessionId`` is validated like every other route's.
SessionId = Annotated[str, Depends(checked_session_id)]

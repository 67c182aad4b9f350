"""The execution context a tool receives when it declares it.

A tool built with ``takes_context=True`` (or a ``@tool`` function with a parameter annotated
:class:`ToolContext`) is called with the run, session, user, workspace and agent it runs for, and
can add attributes to its own tool stage with :meth:`ToolContext.record`, so what it decided
(which rule refused a call, which tool a meta-tool reached, what a sandbox ran) is on the record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._permissions import PermissionChecker
    from ._registry import ToolRegistry


@dataclass
class ToolContext:
    """Who a tool call runs for, and where its decisions are recorded.

    ``confirmed``: a person already approved this call (a resumed run); a confirmation rule does
    not ask again. ``tools`` is the catalogue the agent's meta-tools reach, ``permissions`` the
    checker that governs the calls (None: no checker configured).
    """

    agent: str = ""
    run_id: str | None = None
    session_id: str | None = None
    user_id: str | None = None
    workspace: str | None = None
    call_id: str | None = None
    confirmed: bool = False
    tools: ToolRegistry | None = None
    permissions: PermissionChecker | None = None
    _record: Callable[[dict[str, Any]], None] | None = field(default=None, repr=False)

    def record(self, **attributes: Any) -> None:
        """Add ``attributes`` to this call's tool stage (redacted like everything recorded)."""
        if self._record is not None:
            self._record(attributes)

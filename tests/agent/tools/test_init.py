"""agent.tools' public front: __all__ is sorted-complete and every name in it is importable."""

from __future__ import annotations

import agent
import agent.tools as tools


def test_all_names_every_public_name_and_each_resolves() -> None:
    public = {n for n in vars(tools) if n.isidentifier() and not n.startswith("_") and n not in {"annotations", "errors"}}
    assert public == set(tools.__all__)
    assert all(getattr(tools, n) is not None for n in tools.__all__)


def test_the_agent_front_still_exports_the_tool_basics() -> None:
    for name in ("Tool", "ToolContext", "ToolRegistry", "PauseRun", "tool", "result_text"):
        assert getattr(agent, name) is getattr(tools, name)

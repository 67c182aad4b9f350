"""footprint's explorer: a Textual app over recorded runs, `why`, the persona sandbox and a live host.

Open it with ``footprint explore [--db DB]`` (a store file, read-only), ``footprint explore --host URL`` (a host in
another process) or ``footprint up`` (a host and the explorer in one process); from code with
:func:`open_run`. The screens read through a :class:`RecordingSource`, so a local store and a
host's read API look the same to them.

The names below are imported on first use: the ``footprint`` console script lives in this package
(``explorer.cli``), and every command would otherwise pay for importing Textual.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._evidence import evidence_from_dict
    from ._open import build_app, open_run
    from ._source import HostSource, RecordingSource, StoreSource
    from ._terminal import explore_command, has_terminal
    from .app import ExplorerApp
    from .errors import ExplorerError, SandboxError, SourceError
    from .sandbox import Persona, PersonaStore, SandboxChat, sandbox_registry

_WHERE = {
    "ExplorerApp": ".app",
    "ExplorerError": ".errors",
    "HostSource": "._source",
    "Persona": ".sandbox",
    "PersonaStore": ".sandbox",
    "RecordingSource": "._source",
    "SandboxChat": ".sandbox",
    "SandboxError": ".errors",
    "SourceError": ".errors",
    "StoreSource": "._source",
    "build_app": "._open",
    "evidence_from_dict": "._evidence",
    "explore_command": "._terminal",
    "has_terminal": "._terminal",
    "open_run": "._open",
    "sandbox_registry": ".sandbox",
}

__all__ = [
    "ExplorerApp",
    "ExplorerError",
    "HostSource",
    "Persona",
    "PersonaStore",
    "RecordingSource",
    "SandboxChat",
    "SandboxError",
    "SourceError",
    "StoreSource",
    "build_app",
    "evidence_from_dict",
    "explore_command",
    "has_terminal",
    "open_run",
    "sandbox_registry",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'explorer' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

"""footprint's explorer: a Textual app over recorded runs, `why`, the persona sandbox and a live host.

Open it with ``footprint explore [--db DB]`` (a store file, read-only), ``footprint explore --host URL`` (a host in
another process) or ``footprint up`` (a host and the explorer in one process); from code with
:func:`open_run`. The screens read through a :class:`RecordingSource`, so a local store and a
host's read API look the same to them.

The names below are imported on first use: the ``footprint`` console script lives in this package
(``explorer.cli``), and every command would otherwise pay for importing Textual.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracer._lazy import lazy_exports

if TYPE_CHECKING:
    from ._evidence import evidence_from_dict
    from ._open import build_app, open_run
    from ._source import HostSource, RecordingSource, StoreSource
    from ._terminal import explore_command, has_terminal
    from .app import ExplorerApp
    from .errors import ExplorerError, SandboxError, SourceError
    from .sandbox import Persona, PersonaStore, SandboxChat, sandbox_registry

#: each public name and the module that defines it, imported when the name is first used (tracer._lazy)
_EXPORTS: dict[str, str] = {
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

if not TYPE_CHECKING:  # (mypy reads the imports above; a module __getattr__ would let any name through)
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

"""Errors raised by the explorer.

    FootprintError (tracer.errors)
    └── ExplorerError
        ├── SourceError          the recordings cannot be read (a store file, a host's read API)
        └── SandboxError         a persona cannot be created, edited, found or chatted with
"""

from __future__ import annotations

from tracer.errors import FootprintError


class ExplorerError(FootprintError):
    """An error of the explorer."""


class SourceError(ExplorerError):
    """The recordings cannot be read from the store or host the explorer was pointed at."""


class SandboxError(ExplorerError):
    """A persona of the sandbox cannot be created, edited, found or chatted with."""

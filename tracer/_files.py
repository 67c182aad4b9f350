"""Store files are readable by their owner only: recordings and sessions hold conversations."""

from __future__ import annotations

import os
import stat

#: The files DuckDB keeps beside a database file while it is open.
SIDE_FILES = (".wal",)


def restrict_to_owner(path: str | os.PathLike[str]) -> None:
    """Make ``path`` (and the DuckDB files beside it that exist) readable and writable by its owner only.

    A file that is already stricter is left as it is; a file that cannot be changed (another
    owner's) is left too: opening it is still allowed, and its owner decides who reads it.
    """
    base = os.fspath(path)
    for name in (base, *(base + suffix for suffix in SIDE_FILES)):
        try:
            mode = stat.S_IMODE(os.stat(name).st_mode)
            if mode & 0o077:
                os.chmod(name, mode & 0o700)
        except FileNotFoundError:
            continue
        except PermissionError:
            continue

"""Path and host rules: where a file tool may reach and which hosts a network tool may call.

Both are checked against the call's arguments. A path is resolved the way the operating system
will open it — relative to the workspace, ``..`` folded, every symbolic link followed — and must
then lie inside an allowed root (compared by path components, so ``/data2`` is not inside
``/data``). A host is taken from a URL or a bare host name, lower-cased, its trailing dot dropped
and IDNA-encoded (a look-alike with Cyrillic letters becomes ``xn--...`` and matches nothing); a
URL that different parsers could read differently (user info, backslashes, spaces or control
characters) is refused rather than guessed at. ``*.example.com`` allows the subdomains of
example.com, not example.com itself and not ``example.com.evil.net``.
"""

from __future__ import annotations

import functools
import os
import re
import stat
from collections.abc import Collection, Iterable
from typing import Any
from urllib.parse import urlsplit

# argument names that carry a path (file tools) or a URL / host (network tools); an argument is read
# when its name is one of them or ends with one as its last word ("target_path", "outputFile",
# "webhook_url"), at any depth of the arguments ({"spec": {"path": ...}})
PATH_ARGUMENTS = ("path", "paths", "file", "files", "file_path", "filename", "directory", "dir", "folder",
                  "source", "src", "destination", "dest", "dst", "target")
HOST_ARGUMENTS = ("url", "urls", "uri", "host", "hostname", "endpoint")

_LINK = stat.S_IFLNK
_UNSAFE_URL = re.compile(r"[\x00-\x20\x7f\\]")


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def names_argument(name: str, names: Collection[str]) -> bool:
    """True when an argument called ``name`` is one of ``names``: the same, or ending with one as
    its last word(s) (``target_path``, ``outputFile``, ``source-dir``)."""
    if name in names:
        return True
    words = _CAMEL.sub("_", name).lower().replace("-", "_")
    return words in names or any(words.endswith("_" + n) for n in names)


def argument_values(arguments: dict[str, Any], names: Collection[str]) -> list[tuple[str, str]]:
    """(argument name, value) for each argument :func:`names_argument` picks, at any depth of the
    arguments (an object inside an argument, or a list of them): its strings, and strings in lists."""
    out: list[tuple[str, str]] = []
    objects: list[dict[str, Any]] = [arguments]
    while objects:
        for name, value in objects.pop().items():
            named = isinstance(name, str) and names_argument(name, names)
            for leaf in value if isinstance(value, list) else (value,):
                if isinstance(leaf, dict):
                    objects.append(leaf)
                elif named and isinstance(leaf, str):
                    out.append((name, leaf))
    return out


def resolve_path(value: str, base: str | None) -> str:
    """``value`` as the file it names: absolute, ``..`` folded, symbolic links followed.

    ``base`` (the workspace) must already be resolved. The walk checks each component with one
    ``lstat``; only when it meets a symbolic link does it hand the whole path to ``realpath``, so
    the common case costs a few system calls (the result is the same: property-tested).
    """
    if "\x00" in value:
        raise ValueError("the path contains a NUL character")
    start = os.sep if value.startswith(os.sep) else (base or os.path.realpath(os.getcwd()))
    current = start.rstrip(os.sep)  # "" stands for the root while walking
    parts = value.split(os.sep)
    for i, part in enumerate(parts):
        if part in ("", "."):
            continue
        if part == "..":
            current = current[:current.rfind(os.sep)]  # current holds no link: this is the real parent
            continue
        current = f"{current}{os.sep}{part}"
        try:
            mode = os.lstat(current).st_mode
        except (FileNotFoundError, NotADirectoryError):
            if ".." in parts[i + 1:]:  # climbing out of what does not exist may land on a link
                return os.path.realpath(os.path.join(start, value))
            return os.path.normpath(os.path.join(current, *parts[i + 1:]))  # nothing below exists
        if mode & 0o170000 == _LINK:
            return os.path.realpath(os.path.join(start, value))
    return current or os.sep


def path_inside(path: str, roots: Iterable[str]) -> bool:
    """True when the resolved ``path`` is one of ``roots`` (resolved too) or lies below one."""
    for root in roots:
        if path == root or path.startswith(root if root.endswith(os.sep) else root + os.sep):
            return True
    return False


@functools.lru_cache(maxsize=4096)
def host_of(value: str) -> str:
    """The normalised host a URL or bare host name points at (:class:`ValueError` when ambiguous)."""
    if _UNSAFE_URL.search(value):
        raise ValueError("it contains spaces, control characters or backslashes")
    if "://" in value or value.startswith("//"):
        parts = urlsplit(value)
        if "@" in parts.netloc:
            raise ValueError("it carries user info before the host ('...@host')")
        host = parts.hostname or ""
    else:
        host = value.split("/", 1)[0]
        if "@" in host:
            raise ValueError("it carries user info before the host ('...@host')")
        if host.startswith("["):
            host = host[1:host.find("]")] if "]" in host else ""
        elif host.count(":") == 1:
            host = host.split(":", 1)[0]
    return normalise_host(host)


def normalise_host(host: str) -> str:
    """Lower-case, no trailing dot, IDNA-encoded (:class:`ValueError` for an empty or invalid name)."""
    host = host.strip().lower().rstrip(".")
    if not host:
        raise ValueError("it names no host")
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError as exc:
        raise ValueError(f"its host {host!r} is not a valid international name") from exc


def host_allowed(host: str, patterns: Iterable[str]) -> bool:
    """True when ``host`` (normalised) is an allowed host or a subdomain a ``*.`` pattern allows."""
    for pattern in patterns:
        if pattern.startswith("*."):
            if host.endswith(pattern[1:]) and len(host) > len(pattern) - 1:
                return True
        elif host == pattern:
            return True
    return False

"""A function's docstring as a tool's description and its parameters' descriptions.

:func:`docstring_parts` reads Google style (``Args:``), NumPy style (``Parameters`` underlined with
dashes) and Sphinx style (``:param name:``).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params|Returns?|Yields?|Raises|Examples?|Notes?|See Also):\s*$")
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM = re.compile(r"^:param\s+(?:[\w\[\], |]+\s+)?(\w+):\s*(.*)$")
# NumPy style: a section's name underlined with dashes; a parameter is 'name : type' (or 'a, b : type')
_NUMPY_SECTION = re.compile(r"^(Parameters|Other Parameters|Returns|Yields|Receives|Raises|Warns|Warnings|"
                            r"See Also|Notes|References|Examples|Attributes|Methods)$")
_NUMPY_PARAM = re.compile(r"^(\*{0,2}\w+(?:\s*,\s*\*{0,2}\w+)*)\s*(?::.*)?$")
_PARAMETER_SECTIONS = ("Args", "Arguments", "Parameters", "Params", "Other Parameters")


def docstring_parts(fn: Callable[..., Any], doc: str | None = None) -> tuple[str, dict[str, str]]:
    """The description (text before the first section) and each parameter's description.

    Reads Google style (``Args:`` then ``name: text``, continuation lines indented deeper), NumPy
    style (``Parameters`` underlined with dashes, then ``name : type`` and the text indented below)
    and Sphinx style (``:param name: text``). ``doc``: the docstring to read instead of ``fn``'s.
    """
    doc = inspect.cleandoc(doc) if doc is not None else inspect.getdoc(fn) or ""
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    numpy = False
    current: list[str] = []
    lines = doc.splitlines()
    for n, line in enumerate(lines):
        stripped = line.strip()
        if numpy_header(lines, n):
            section, numpy, current = stripped, True, []
            continue
        if numpy and set(stripped) == {"-"} and n and numpy_header(lines, n - 1):
            continue  # the header's underline
        header = _SECTION.match(stripped) if not line.startswith(" ") else None
        if header:
            section, numpy, current = header.group(1), False, []
            continue
        sphinx = _SPHINX_PARAM.match(stripped)
        if sphinx:
            section, current = "Sphinx", [sphinx.group(1)]
            params[sphinx.group(1)] = sphinx.group(2).strip()
            continue
        if stripped.startswith(":") and section in (None, "Sphinx"):
            section, current = "Sphinx", []  # :returns:, :raises: ... end the description
            continue
        if section is None:
            description.append(stripped)
        elif section in _PARAMETER_SECTIONS and numpy:
            match = _NUMPY_PARAM.match(line)  # unindented: a parameter; indented: its text
            if match:
                current = [name.strip().lstrip("*") for name in match.group(1).split(",")]
                params.update({name: "" for name in current})
            elif stripped:
                for name in current:
                    params[name] = f"{params[name]} {stripped}".strip()
        elif section in _PARAMETER_SECTIONS:
            match = _ARG_LINE.match(stripped)
            if match and len(line) - len(line.lstrip()) <= 4:
                current = [match.group(1).lstrip("*")]
                params[current[0]] = match.group(2).strip()
            elif current and stripped:
                params[current[0]] = f"{params[current[0]]} {stripped}".strip()
        elif section == "Sphinx" and current and stripped:
            params[current[0]] = f"{params[current[0]]} {stripped}".strip()
    return "\n".join(_paragraphs(description)), {k: v for k, v in params.items() if v}


def numpy_header(lines: list[str], n: int) -> bool:
    """True when line ``n`` is a NumPy-style section header (its name, then a line of dashes)."""
    return (n + 1 < len(lines) and not lines[n].startswith(" ") and bool(_NUMPY_SECTION.match(lines[n].strip()))
            and set(lines[n + 1].strip()) == {"-"})


def _paragraphs(lines: list[str]) -> list[str]:
    out: list[str] = []
    block: list[str] = []
    for line in [*lines, ""]:
        if line:
            block.append(line)
        elif block:
            out.append(" ".join(block))
            block = []
    return out

"""The tool registry: the catalogue an agent's tool names resolve against.

The registry, not the agent config, decides what a tool name does: one config can point at fake
data in a sandbox and a real backend in production. It registers and unregisters tools, lets a
plugin replace a core tool's executor while keeping its definition, filters by names or groups,
searches by name, description, category and tags (what the ``search_tools`` meta-tool uses), and
knows the workspace directory file tools are confined to.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable, Iterator, Sequence

from ..errors import ToolNotFoundError, UserError
from ._tool import Execute, Tool

_WORD = re.compile(r"[a-z0-9]+")
# words too common to say which tool is meant
_STOP_WORDS = frozenset("a an and about for from in into is it of on or the to with".split())


class ToolRegistry:
    """Tools by name, with groups and a workspace directory.

    A *group* is a named set of tools: either one defined with :meth:`define_group`, or a
    category (every tool whose ``category`` is that name).
    """

    def __init__(self, tools: Iterable[Tool] = (), *, workspace: str | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        self._groups: dict[str, tuple[str, ...]] = {}
        self._words: dict[str, tuple[frozenset[str], frozenset[str], frozenset[str]]] = {}
        self._workspace: str | None = None
        self.workspace = workspace
        for t in tools:
            self.register(t)

    # ------------------------------------------------------------------ workspace

    @property
    def workspace(self) -> str | None:
        """The directory file tools work in (absolute), or None."""
        return self._workspace

    @workspace.setter
    def workspace(self, directory: str | None) -> None:
        self._workspace = None if directory is None else os.path.abspath(directory)

    # ------------------------------------------------------------------ changes

    def register(self, t: Tool, *, replace: bool = False) -> Tool:
        """Add a tool; a second tool of the same name is refused unless ``replace``."""
        if t.name in self._tools and not replace:
            raise UserError(f"a tool named {t.name!r} is already registered; pass replace=True to replace it")
        self._tools[t.name] = t
        self._words[t.name] = _index(t)
        return t

    def unregister(self, name: str) -> Tool:
        """Remove the tool called ``name`` and return it (it also leaves every group)."""
        t = self.get(name)
        del self._tools[name]
        del self._words[name]
        return t

    def replace_executor(self, name: str, execute: Execute, *, takes_context: bool | None = None) -> Tool:
        """Give the tool called ``name`` a new executor, keeping its definition and metadata.

        This is how a plugin supplies the real implementation of a core stub. Returns the new tool.
        """
        old = self.get(name)
        new = dataclasses.replace(
            old, execute=execute, takes_context=old.takes_context if takes_context is None else takes_context)
        self._tools[name] = new
        return new

    def define_group(self, group: str, names: Iterable[str]) -> None:
        """Name a set of registered tools (an unknown tool name is a :class:`UserError`)."""
        members = tuple(names)
        self.resolve(members)
        self._groups[group] = members

    # ------------------------------------------------------------------ lookups

    def get(self, name: str) -> Tool:
        """The tool called ``name`` (:class:`ToolNotFoundError` when there is none)."""
        try:
            return self._tools[name]
        except KeyError:
            raise ToolNotFoundError(
                f"no tool named {name!r}; registered: {', '.join(sorted(self._tools)) or 'none'}"
            ) from None

    def resolve(self, names: Iterable[str]) -> list[Tool]:
        """The tools for declarative ``names``, in order; an unknown name is a :class:`UserError`."""
        out = []
        for n in names:
            if n not in self._tools:
                raise UserError(
                    f"tool {n!r} is not in the registry (registered: {', '.join(sorted(self._tools)) or 'none'})"
                )
            out.append(self._tools[n])
        return out

    def group(self, group: str) -> list[Tool]:
        """The tools of a defined group, or of the category called ``group``, sorted by name."""
        if group in self._groups:
            return [self._tools[n] for n in sorted(self._groups[group]) if n in self._tools]
        members = [t for t in self._tools.values() if t.category == group]
        if not members:
            known = sorted(set(self._groups) | {c for c in self.categories() if c})
            raise UserError(f"no tool group or category {group!r}; known: {', '.join(known) or 'none'}")
        return sorted(members, key=lambda t: t.name)

    def select(self, names: Sequence[str] = (), groups: Sequence[str] = ()) -> list[Tool]:
        """The tools named, then those of each group, without repeats (the order of first mention)."""
        chosen: dict[str, Tool] = {t.name: t for t in self.resolve(names)}
        for g in groups:
            for t in self.group(g):
                chosen.setdefault(t.name, t)
        return list(chosen.values())

    def filter(self, names: Iterable[str]) -> ToolRegistry:
        """A new registry holding only the tools called ``names`` (same workspace and groups)."""
        kept = ToolRegistry(self.resolve(names), workspace=self.workspace)
        for g, members in self._groups.items():
            kept._groups[g] = tuple(n for n in members if n in kept)
        return kept

    def search(self, query: str, *, limit: int = 10) -> list[Tool]:
        """Tools matching ``query`` by name, description, category and tags, best first.

        Every word of the query scores: a whole name 10, a word of the name 4, a tag or the
        category 3, a word of the description 1 (a trailing plural ``s`` and common words such as
        "the" are ignored). An empty query or ``*`` lists every tool by name.
        """
        if query.strip() in ("", "*"):
            return [self._tools[n] for n in sorted(self._tools)][:limit]
        words = {_stem(w) for w in _WORD.findall(query.lower()) if w not in _STOP_WORDS}
        whole = query.strip().lower()
        scored = []
        for name, (name_words, tag_words, description) in self._words.items():
            score = 10 if name.lower() == whole else 0
            for w in words:
                if w in name_words:
                    score += 4
                if w in tag_words:
                    score += 3
                if w in description:
                    score += 1
            if score:
                scored.append((-score, name))
        return [self._tools[n] for _, n in sorted(scored)[:limit]]

    def categories(self) -> dict[str, int]:
        """How many tools each category holds ("" for tools without one), sorted by category."""
        counts: dict[str, int] = {}
        for t in self._tools.values():
            counts[t.category or ""] = counts.get(t.category or "", 0) + 1
        return dict(sorted(counts.items()))

    def names(self) -> list[str]:
        """Every registered name, sorted."""
        return sorted(self._tools)

    def tools(self) -> list[Tool]:
        """Every registered tool, sorted by name."""
        return [self._tools[n] for n in sorted(self._tools)]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools())

    def __len__(self) -> int:
        return len(self._tools)


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _index(t: Tool) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """The words search matches: the name's, the tags' and category's, the description's."""

    def words(*texts: str) -> frozenset[str]:
        return frozenset(_stem(w) for text in texts for w in _WORD.findall(text.lower()))

    return words(t.name), words(*t.tags, t.category or ""), words(t.description)

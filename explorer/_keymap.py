"""The keys a person can use on a screen: for the help screen (``?``) and the command palette (``ctrl+p``).

Only the explorer's own keys are listed — those its screens and widgets declare — in the order a
person needs them: the screen's first, then the focused list's, then the ones every screen has.
Textual's own bindings (focus cycling, scrolling a pane, its cursor keys) stay out; how to move
in a list is one line, the same everywhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from textual.app import App
from textual.binding import Binding
from textual.dom import DOMNode
from textual.screen import Screen

#: What every list of the explorer understands (see components/_keys.py), and the app-wide keys.
COMMON_KEYS: list[tuple[str, str]] = [
    ("↑ ↓  j k", "move in a list"),
    ("pgup pgdn", "a page up or down"),
    ("home end", "the first row, the last row"),
    ("enter", "open what the cursor is on"),
    ("ctrl+p", "the command palette: this screen's actions by name"),
    ("? f1", "these keys"),
    ("q ctrl+q", "quit"),
]


_MOVES = ("cursor_", "scroll_", "move(")


@dataclass(frozen=True)
class ScreenKey:
    """One action of a screen: the keys that do it, what it does, and the node that owns it."""

    keys: str
    description: str
    action: str
    node: DOMNode


def _declared(node: DOMNode) -> set[tuple[str, str]]:
    """(action, description) of the bindings the explorer's own classes declare for ``node``."""
    found: set[tuple[str, str]] = set()
    for cls in type(node).__mro__:
        if not cls.__module__.startswith("explorer"):
            continue
        for binding in vars(cls).get("BINDINGS", []):
            if isinstance(binding, Binding):
                found.add((binding.action, binding.description))
            elif isinstance(binding, tuple) and len(binding) >= 3:
                found.add((str(binding[1]), str(binding[2])))
    return found


def screen_keys(app: App[object], screen: Screen[object]) -> list[ScreenKey]:
    """The explorer's keys active on ``screen``: its own, then the focused widget's, then the app's."""
    grouped: dict[tuple[int, str, str], tuple[list[str], DOMNode, str]] = {}
    declared: dict[int, set[tuple[str, str]]] = {}
    for key, active in screen.active_bindings.items():
        binding, node = active.binding, active.node
        if not binding.description or binding.system or binding.action.startswith(_MOVES):
            continue  # moving is one line of COMMON_KEYS
        mine = declared.setdefault(id(node), _declared(node))
        if (binding.action, binding.description) not in mine:
            continue  # one of Textual's own
        rank = 0 if node is screen else (2 if node is app else 1)
        display = app.get_key_display(binding) if binding.key_display else app.get_key_display(
            binding.__class__(key, binding.action))
        # the footer shows the description; the help and the palette its whole form, the tooltip
        keys, _, _ = grouped.setdefault((rank, binding.action, binding.description),
                                        ([], node, binding.tooltip or binding.description))
        if display not in keys:
            keys.append(display)
    ordered = sorted(grouped.items(), key=lambda kv: kv[0][0])
    return [ScreenKey(" ".join(keys), whole, action, node)
            for (_, action, _), (keys, node, whole) in ordered if action not in ("help", "quit")]


def help_rows(app: App[Any], screen: Screen[Any]) -> list[tuple[str, str]]:
    """The rows of the help screen: this screen's keys, then the keys every screen has."""
    return [(k.keys, k.description) for k in screen_keys(app, screen)] + COMMON_KEYS


def palette_commands(app: App[Any], screen: Screen[Any]) -> Iterator[tuple[str, str, str, DOMNode]]:
    """(title, help, action, node) for each of the screen's actions, for the command palette."""
    for key in screen_keys(app, screen):
        yield key.description, f"key: {key.keys}", key.action, key.node

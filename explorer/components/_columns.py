"""How a table whose last column is a text fits a pane: the text keeps its room, the others give way.

At 60 columns the snapshot's text had 12 cells and the table a horizontal scrollbar; what a reader
reads is the text, so the other columns narrow or go first, in the order each table names.
"""

from __future__ import annotations

from collections.abc import Sequence

#: a column that gives way, and the narrowest it may get (0: it is left out)
GiveWay = Sequence[tuple[str, int]]


def text_room(width: int) -> int:
    """The fewest cells the text keeps in a pane ``width`` wide (before a column is cut for it)."""
    return max(24, width // 3)


def fit_columns(width: int, columns: list[tuple[str, int]], give_way: GiveWay) -> list[tuple[str, int]]:
    """``columns`` (label, width), then a last one, ``text``, filling a pane ``width`` wide.

    Each column takes two cells more (its padding), and the scrollbar two; the text takes what is
    left. Where that is less than :func:`text_room`, the columns of ``give_way`` narrow or go, in its
    order, until it is not.
    """
    widths = dict(columns)

    def left() -> int:
        return width - 2 - sum(w + 2 for w in widths.values()) - 2

    for label, narrowest in give_way:
        short = text_room(width) - left()
        if short <= 0:
            break
        if label in widths:
            if narrowest:
                widths[label] = max(narrowest, widths[label] - short)
            else:
                del widths[label]
    return [(label, widths[label]) for label, _ in columns if label in widths] + [("text", max(8, left()))]

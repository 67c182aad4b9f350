"""How the explorer writes times, tokens, costs and previews, and the colours it gives kinds.

One place for these so every screen agrees (and snapshot tests have one thing to pin). Every recorded
text a screen shows (a question, an answer, a tool's result, a session's or an agent's name, an error)
goes through :func:`visible` (or :func:`plain`, or ``tracer.one_line``, which calls the same function):
a terminal acts on the control characters in it, so an answer holding ``ESC ] 0 ;`` retitled the
window and one holding ``ESC [ 2 J`` cleared the screen. Shown as ``\\x1b``, as ``footprint show`` does.
"""

from __future__ import annotations

import time

from rich.text import Text

from tracer import FootprintError, Run, Stage, for_terminal

#: Colour of a context item by the kind of its origin (the issue asks to colour by origin kind).
ORIGIN_COLOURS: dict[str, str] = {
    "user": "green",
    "memory": "magenta",
    "prompt_section": "blue",
    "stage": "yellow",
    "config": "bright_black",
    "file": "cyan",
    "hook": "red",
}

#: Colour of a run's status.
STATUS_COLOURS: dict[str, str] = {
    "answered": "green",
    "awaiting": "yellow",
    "failed": "red",
    "cancelled": "bright_black",
    "running": "cyan",
}

#: Colour of a flowchart box by its stage kind.
STAGE_COLOURS: dict[str, str] = {
    "input": "green",
    "memory": "magenta",
    "prompt": "blue",
    "inference": "yellow",
    "tool_batch": "cyan",
    "tool": "cyan",
    "answer": "green",
    "pause": "bright_yellow",
    "resume": "bright_yellow",
    "compaction": "blue",
    "error": "red",
    "subagent": "bright_cyan",
    "plan_step": "bright_blue",
}

#: Colour of a flowchart edge by its kind.
EDGE_COLOURS: dict[str, str] = {
    "next": "bright_black",
    "fork": "cyan",
    "join": "cyan",
    "loop": "yellow",
    "resume": "magenta",
}


_SHORT_KINDS = {
    "prompt_section": "prompt", "tool_definition": "tool def", "tool_call": "call", "tool_result": "result",
}


def visible(text: str | None) -> str:
    """Recorded ``text`` as the explorer shows it: each control character a terminal would act on
    (ESC, BEL, backspace, DEL, the C1 controls; not a tab or a line end) written as ``\\xNN``.

    The same function ``footprint show`` prints through, so a screen and the CLI show a text alike.
    """
    return for_terminal(text or "")


def plain(text: str | None, style: str = "") -> Text:
    """Recorded ``text`` to put on screen: plain text (a ``str`` given to a Static or a Label is read
    as markup, so ``[/b]`` stopped the app), its control characters :func:`visible`."""
    return Text(visible(text), style=style)


def kind_label(kind: str) -> str:
    """An item or origin kind short enough for a column (``prompt_section`` -> ``prompt``)."""
    return visible(_SHORT_KINDS.get(kind, kind))


def clock(ts: float | None, *, seconds: bool = True) -> str:
    """A start time as ``MM-DD HH:MM:SS`` (or ``MM-DD HH:MM``) in local time ("-" when unknown)."""
    if ts is None:
        return "-"
    return time.strftime("%m-%d %H:%M:%S" if seconds else "%m-%d %H:%M", time.localtime(ts))


def tokens(n: int) -> str:
    """A token count in at most five characters: 812, 12.4k, 3.1M."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k" if n < 100_000 else f"{n // 1000}k"
    return f"{n / 1_000_000:.1f}M"


def cost(dollars: float) -> str:
    """A dollar cost: ``$0.0123``; ``-`` when nothing was charged."""
    if not dollars:
        return "-"
    if dollars < 0.00001:
        return "~$0"
    if dollars < 0.01:
        return f"${dollars:.5f}".rstrip("0")
    return f"${dollars:.2f}"


def cost_short(dollars: float) -> str:
    """A dollar cost in at most seven characters, for a table column: ``<$0.01``, ``$0.12``."""
    if not dollars:
        return "-"
    if dollars < 0.01:
        return "<$0.01"
    return f"${dollars:.2f}" if dollars < 1000 else f"${dollars:,.0f}"


def duration(start: float | None, end: float | None) -> str:
    """A duration: ``85µs``, ``4.2ms``, ``12ms``, ``1.4s``, ``2m05s``; empty when it has not ended."""
    if start is None or end is None:
        return ""
    seconds = max(0.0, end - start)
    if seconds < 0.001:
        return f"{seconds * 1_000_000:.0f}µs"
    if seconds < 0.01:
        return f"{seconds * 1000:.1f}ms"
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def short_id(run_id: str | None) -> str:
    """A run or stage id short enough for a column (its tail, which is what differs)."""
    if not run_id:
        return "-"
    run_id = visible(run_id)
    return run_id if len(run_id) <= 12 else "…" + run_id[-10:]


def head(text: str | None, width: int) -> str:
    """The start of ``text`` in ``width`` characters (ids that share a tail, like sessions), :func:`visible`."""
    if not text:
        return "-"
    text = visible(text)
    return text if len(text) <= width else text[: width - 1] + "…"


def status_text(status: str) -> Text:
    """A status, coloured."""
    return plain(status, STATUS_COLOURS.get(status, ""))


def origin_text(kind: str, source: str | None = None) -> Text:
    """An origin kind (and its source), coloured by kind."""
    short = kind_label(kind)
    label = short if not source else f"{short}:{visible(source)}"
    return Text(label, style=ORIGIN_COLOURS.get(kind, ""))


def run_title(run: Run) -> str:
    """A one-line title for a run: agent, status, when and the session (plain text: give it to a Text)."""
    session = f" · session {visible(run.session_id)}" if run.session_id else ""
    return f"{visible(run.agent)} · {visible(run.status)} · {clock(run.started_at)}{session}"


def stage_label(stage: Stage) -> str:
    """A stage as ``kind name`` (the name only when it says more than the kind)."""
    return visible(stage.kind if stage.name in ("", stage.kind) else f"{stage.kind} {stage.name}")


def failure(exc: BaseException) -> str:
    """What a failed read or action says on screen: footprint's own errors are written for the
    reader and shown as they are; anything else is named by its type. (Plain text, :func:`visible`:
    an error quotes what it failed on, a session's name or a stored text.)"""
    return visible(str(exc) if isinstance(exc, FootprintError) else f"{type(exc).__name__}: {exc}")

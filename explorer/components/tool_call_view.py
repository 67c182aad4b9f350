"""A tool call: its arguments, its result and how long it took."""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from tracer import ItemKind, RunData, Stage

from .._format import clock, duration, visible
from .._prefetch import has_snapshot
from ._snapshots import SnapshotsWanted


def _pretty(value: object, width: int = 70) -> str:
    """JSON text on one line when it fits ``width``, indented when not; other text as it is (to pass
    through :func:`~explorer._format.visible`: JSON escapes a control character, a plain text does not)."""
    parsed = value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        if isinstance(parsed, str):
            return parsed
    compact = json.dumps(parsed, ensure_ascii=False)
    return compact if len(compact) <= width else json.dumps(parsed, indent=2, ensure_ascii=False)


def governance_lines(attrs: dict[str, Any]) -> list[tuple[str, str]]:
    """What tool governance recorded on the stage: the permission decision, the tool a meta-tool
    reached (with the limits it applied), and how a sandbox run ended. Each line is
    :func:`~explorer._format.visible` (a reason, a tool's stderr are recorded texts)."""
    lines: list[tuple[str, str]] = []
    permission = attrs.get("permission")
    if isinstance(permission, dict):
        decision = str(permission.get("decision", "?"))
        reason = f": {permission['reason']}" if permission.get("reason") else ""
        lines.append((f"permission {decision.replace('_', ' ')} for {permission.get('tool')} "
                      f"(rule {permission.get('rule')}, user {permission.get('user')}){reason}",
                      "green" if decision == "allowed" else "red" if decision != "needs_confirmation" else "yellow"))
    if attrs.get("reached_tool"):
        lines.append((f"reached tool {attrs['reached_tool']}", "cyan"))
    if attrs.get("limits_applied"):
        lines.append(("limits applied: " + ", ".join(map(str, attrs["limits_applied"])), "yellow"))
    sandbox = attrs.get("sandbox")
    if isinstance(sandbox, dict):
        if sandbox.get("refused"):
            lines.append((f"sandbox refused the code: {sandbox['refused']}", "red"))
        else:
            limits = sandbox.get("limits") or {}
            lines.append((f"sandbox {sandbox.get('language')}: exit {sandbox.get('exit_code')}, "
                          f"{sandbox.get('duration_ms')} ms; limits {limits.get('memory_mb')} MB, "
                          f"{limits.get('cpu_seconds')} s CPU, {limits.get('wall_seconds')} s wall",
                          "green" if sandbox.get("error") is None else "red"))
            if sandbox.get("error"):
                lines.append((str(sandbox["error"]), "red"))
            if sandbox.get("stderr"):
                lines.append(("stderr: " + str(sandbox["stderr"])[:500], "dim"))
    return [(visible(line), style) for line, style in lines]


class ToolCallView(VerticalScroll):
    """The details of a tool stage."""

    DEFAULT_CSS = """
    ToolCallView { height: 1fr; }
    ToolCallView > Static { height: auto; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.stage: Stage | None = None
        self.waiting = False  # for the stage to be read (the call it answered, its result)

    def compose(self) -> ComposeResult:
        yield Static("", id="tool-call-body")

    def show(self, data: RunData, stage: Stage) -> None:
        """Show ``stage`` (a tool call) of ``data`` (until it is read, with the arguments it kept)."""
        self.stage = stage
        self.waiting = not has_snapshot(data, stage.id)
        if self.waiting:
            self.post_message(SnapshotsWanted([stage.id]))
        attrs = stage.attributes
        call = next(
            (data.items[e.item_hash] for e in data.snapshot(stage.id)
             if e.item_hash in data.items and data.items[e.item_hash].kind == ItemKind.TOOL_CALL),
            None,
        )
        result = next(
            (data.items[h] for h in data.outputs.get(stage.id, []) if h in data.items), None
        )
        is_error = bool(attrs.get("is_error")) or stage.status == "error"
        text = Text()
        text.append(visible(stage.name), style="bold cyan")
        text.append(f"  {visible(stage.status)}", style="red" if is_error else "green")
        if "call_id" in attrs:
            text.append(f"  call {visible(str(attrs['call_id']))}", style="dim")
        text.append("\n")
        took = f"{attrs['duration_ms']:.1f}ms" if isinstance(attrs.get("duration_ms"), int | float) else duration(
            stage.started_at, stage.ended_at)
        text.append(f"started {clock(stage.started_at)}  took {took or '-'}", style="dim")
        if attrs.get("served_from"):
            text.append(f"  (result served from the {visible(str(attrs['served_from']))})", style="dim")
        if attrs.get("paused"):
            text.append(f"\npaused: {visible(str(attrs.get('question', '')))}", style="yellow")
        for line, style in governance_lines(attrs):
            text.append(f"\n{line}", style=style)
        text.append("\n\nArguments  ", style="bold")
        arguments = call.body.get("arguments") if call is not None else attrs.get("arguments", "")
        text.append(visible(_pretty(arguments or "{}")))
        text.append("\nResult  ", style="bold")
        if result is None:
            text.append("reading…" if self.waiting else "(no result recorded)", style="dim")
        else:
            text.append(visible(_pretty(result.body.get("content", result.text))), style="red" if is_error else "")
        if stage.error:
            text.append(f"\n\nError: {visible(stage.error)}", style="red")
        self.query_one("#tool-call-body", Static).update(text)
        self.scroll_home(animate=False)

    def snapshots_read(self, data: RunData) -> None:
        """More stages were read: show the call and its result if they were awaited."""
        if self.waiting and self.stage is not None:
            self.show(data, self.stage)

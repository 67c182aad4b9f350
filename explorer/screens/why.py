"""Why: the evidence graph behind an answer (or any item), and what was left out of context."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.lazy import Lazy
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Header, Static, Tree

from tracer import SHOWN_ABOVE, Evidence, EvidenceNode, Store, item_names, one_line

from .._format import ORIGIN_COLOURS, failure, plain, visible
from .._verdicts import (
    Verdict,
    blame_verdict,
    counterfactual_verdict,
    default_provider_for,
    default_tools_for,
    replay_verdict,
)
from ..components.evidence_tree import EvidenceTree
from ..components.not_in_context import NotInContextTable
from .verdict import VerdictScreen


class WhyScreen(Screen[None]):
    """The evidence tree; enter (or ``g``) on a node goes to the stage it names."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        Binding("g", "go", "Go to origin"),
        Binding("e", "expand", "Expand all", show=False),
        Binding("x", "counterfactual", "Remove & re-run"),
        Binding("b", "blame", "Blame"),
        Binding("r", "replay", "Replay", show=False),
    ]

    class Walked(Message):
        """The evidence arrived from the worker, with the run's item names (hash -> name)."""

        def __init__(self, evidence: Evidence, names: dict[str, str] | None = None) -> None:
            super().__init__()
            self.evidence = evidence
            self.names = names or {}

    class WalkFailed(Message):
        """`why` failed (no answer, no such item, the source went away)."""

        def __init__(self, error: str) -> None:
            super().__init__()
            self.error = error

    class Judged(Message):
        """An evidence action (replay, counterfactual, blame) finished with a verdict."""

        def __init__(self, verdict: Verdict) -> None:
            super().__init__()
            self.verdict = verdict

    class JudgeFailed(Message):
        """An evidence action could not run; ``error`` says why."""

        def __init__(self, action: str, error: str) -> None:
            super().__init__()
            self.action = action
            self.error = error

    def __init__(self, run_id: str, item: str | None = None) -> None:
        super().__init__()
        self.run_id = run_id
        self.item = item
        self.evidence: Evidence | None = None
        self.names: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(plain(f"walking back from {'item ' + self.item[:12] if self.item else 'the answer'} "
                           f"of run {self.run_id}…"), id="why-title")
        yield EvidenceTree(id="evidence")
        yield Static("", id="why-detail")
        yield Static("Not in context", id="nic-title")
        yield Lazy(NotInContextTable(id="not-in-context"))
        yield Footer()

    def on_mount(self) -> None:
        self.walk()

    @work(thread=True, exclusive=True, group="why", exit_on_error=False)
    def walk(self) -> None:
        """Run `why` in a worker thread."""
        try:
            evidence = self.app.source.why(self.run_id, self.item)  # type: ignore[attr-defined]
        except Exception as exc:  # shown to the reader; the screen closes
            self.post_message(self.WalkFailed(failure(exc)))
            return
        try:
            names = item_names(self.app.source.load_run(self.run_id))  # type: ignore[attr-defined]
        except Exception:  # the items keep their hashes; the evidence is all there
            names = {}
        self.post_message(self.Walked(evidence, names))

    def on_why_screen_walked(self, message: Walked) -> None:
        evidence = message.evidence
        self.evidence = evidence
        items = evidence.items()
        outside = sum(1 for n in items if n.origin is not None and n.origin.kind not in ("stage", "config"))
        self.query_one("#why-title", Static).update(
            f"{len(items)} items from {len(evidence.runs)} run(s); {outside} from outside them (n jumps to them)"
        )
        self.names = message.names
        tree = self.query_one(EvidenceTree)
        tree.show(evidence, message.names)
        tree.focus()
        self._describe(evidence.root)
        self.query_one("#nic-title", Static).update(f"Not in context ({len(evidence.not_in_context)})")
        self._fill_dropped()

    def _fill_dropped(self) -> None:
        tables = self.query(NotInContextTable)
        if not tables:  # still behind its Lazy: try again once it is mounted
            self.call_after_refresh(self._fill_dropped)
            return
        if self.evidence is not None:
            tables.first().show(self.evidence.not_in_context)

    def on_why_screen_walk_failed(self, message: WalkFailed) -> None:
        self.notify(message.error, severity="error", timeout=6)
        self.app.pop_screen()

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[EvidenceNode]) -> None:
        self._describe(event.node.data)

    def _describe(self, node: EvidenceNode | None) -> None:
        detail = self.query_one("#why-detail", Static)
        detail.remove_class("failed")
        if node is None:
            detail.update("")
            return
        text = Text()
        if node.node == "item":
            colour = ORIGIN_COLOURS.get(node.origin.kind if node.origin else "", "")
            if node.item_hash:
                label = self.names.get(node.item_hash) or node.item_kind
                text.append(visible(f"{label}  {node.item_hash[:12]}") + "\n", style=f"bold {colour}")
            text.append(visible(node.text or "(not stored)"), style=colour)  # whole: the pane wraps it
            if node.origin is not None:
                text.append(f"\n← {visible(node.origin.describe())}", style="dim")
                if node.origin.run_id and node.origin.run_id != self.run_id:
                    text.append(f" in run {visible(node.origin.run_id)}", style="dim")
        elif node.node == SHOWN_ABOVE:
            text.append(f"{node.count} items of this context were walked above, where the tree first met them "
                        f"(footprint show RUN --context lists every item each call was sent)", style="dim")
        else:
            text.append(visible(f"{node.stage_kind} {node.stage_name or ''} of run {node.run_id}"), style="dim")
        stage = node if node.node == "stage" else next((c for c in node.children if c.node == "stage"), None)
        if stage is not None and stage.note:  # what the stage said of itself: a refusal and its rule, say
            text.append(f"\n{visible(stage.note)}", style="yellow")
        detail.update(text)

    def on_evidence_tree_node_chosen(self, message: EvidenceTree.NodeChosen) -> None:
        self._go(message.node)

    def on_not_in_context_table_dropped_chosen(self, message: NotInContextTable.DroppedChosen) -> None:
        item = message.item
        self.app.go_to_stage(item.run_id, item.stage_id)  # type: ignore[attr-defined]

    def _go(self, node: EvidenceNode) -> None:
        if node.node == "stage" and node.run_id and node.stage_id:
            self.app.go_to_stage(node.run_id, node.stage_id)  # type: ignore[attr-defined]
            return
        origin = node.origin
        if origin is not None and origin.run_id and origin.stage_id:
            self.app.go_to_stage(origin.run_id, origin.stage_id)  # type: ignore[attr-defined]
        else:
            where = origin.describe() if origin is not None else "nowhere recorded"
            self.notify(f"this item came from {where}, not from a recorded stage", timeout=4)

    def action_go(self) -> None:
        """Go to the stage the highlighted node names (in another run of the session if need be)."""
        node = self.query_one(EvidenceTree).cursor_node
        if node is not None and node.data is not None:
            self._go(node.data)

    def action_expand(self) -> None:
        """Expand every branch."""
        self.query_one(EvidenceTree).root.expand_all()

    def action_back(self) -> None:
        """Back to the previous screen."""
        self.app.pop_screen()

    # ------------------------------------------------------------------ evidence actions

    @property
    def _store(self) -> Store | None:
        """The store re-runs are recorded into: a store file this process opened (read-only is fine:
        the re-run holds it for writing while it runs), not a host's."""
        store = getattr(self.app.source, "store", None)  # type: ignore[attr-defined]
        return store if isinstance(store, Store) and not (store.read_only and store.path == ":memory:") else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("counterfactual", "blame", "replay"):
            return self._store is not None
        return True

    def action_replay(self) -> None:
        """Run this run again from its recording (no model, no tools) and say whether it came out the same."""
        self._detail_busy("replaying from the recording…")
        self._judge("replay", lambda store, _p, _t, _progress: replay_verdict(store, self.run_id))

    def action_counterfactual(self) -> None:
        """Re-run the run without the highlighted item (three times): does the answer flip?"""
        node = self.query_one(EvidenceTree).cursor_node
        data = node.data if node is not None else None
        if data is None or data.node != "item" or not data.item_hash or data is self.evidence_root:
            self.notify("highlight an item of the context (not the answer or a stage) to remove it", timeout=4)
            return
        item_hash = data.item_hash
        self._detail_busy(f"re-running without: {one_line(data.text, 80)}…")
        self._judge("counterfactual", lambda store, provider, tools, _progress: counterfactual_verdict(
            store, self.run_id, item_hash, provider=provider, tools=tools))

    def action_blame(self) -> None:
        """Remove each item `why` names in turn and re-run: the culprits are the items whose removal flips it."""
        self._detail_busy("blame: testing each suspect…")
        self._judge("blame", lambda store, provider, tools, progress: blame_verdict(
            store, self.run_id, provider=provider, tools=tools, on_progress=progress))

    def _detail_busy(self, line: str) -> None:
        """Say below the tree that an evidence action is under way."""
        detail = self.query_one("#why-detail", Static)
        detail.remove_class("failed")
        detail.update(plain(line, "yellow"))

    @property
    def evidence_root(self) -> EvidenceNode | None:
        """The node of the answer (or item) being explained."""
        return self.evidence.root if self.evidence is not None else None

    def _judge(self, action: str, job: Callable[..., Verdict]) -> None:
        self._judging(action, job)

    @work(thread=True, exclusive=True, group="evidence", exit_on_error=False)
    def _judging(self, action: str, job: Callable[..., Verdict]) -> None:
        store = self._store
        assert store is not None
        app = self.app
        detail = self.query_one("#why-detail", Static)

        def progress(line: str) -> None:
            app.call_from_thread(detail.update, plain(line, "yellow"))  # (a suspect's text, in blame's progress)

        try:
            run = store.get_run(self.run_id)
            provider_for = getattr(app, "evidence_provider", None) or default_provider_for
            tools_for = getattr(app, "evidence_tools", None) or default_tools_for
            needs_model = action != "replay"
            provider = provider_for(run) if needs_model else None
            tools = tools_for(run) if needs_model else ()
            with store.writing():
                verdict = job(store, provider, tools, progress)
        except Exception as exc:  # a mismatch, no API key, an item not in this run: the reader must see it
            self.post_message(self.JudgeFailed(action, failure(exc)))
            return
        self.post_message(self.Judged(verdict))

    def on_why_screen_judged(self, message: Judged) -> None:
        self.query_one("#why-detail", Static).update(
            Text(f"{message.verdict.action}: {message.verdict.verdict}", style="bold"))

        def opened(run_id: str | None) -> None:
            if run_id:
                self.app.open_run(run_id)  # type: ignore[attr-defined]

        self.app.push_screen(VerdictScreen(message.verdict), opened)

    def on_why_screen_judge_failed(self, message: JudgeFailed) -> None:
        # the reason goes below the tree, whole; the toast only says that it failed: a toast of the
        # reason itself covered the lines it was written on at 80x24 for its eight seconds
        detail = self.query_one("#why-detail", Static)
        detail.add_class("failed")
        detail.update(plain(f"{message.action} failed: {message.error}", "red"))
        self.notify(f"{message.action} failed: the reason is below the tree", severity="error", timeout=4)

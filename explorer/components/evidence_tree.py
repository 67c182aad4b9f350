"""The evidence graph of `why` as a tree: items, the stages that produced them, and their inputs."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from tracer import SHOWN_ABOVE, Evidence, EvidenceNode, OriginKind, one_line

from .._format import ORIGIN_COLOURS, STAGE_COLOURS, kind_label, short_id, visible

_EXPAND_DEPTH = 8  # deeper branches start collapsed so a long session stays readable


def node_label(node: EvidenceNode, width: int = 40, home_run: str | None = None, name: str | None = None) -> Text:
    """How a node of the evidence graph reads in the tree (a stage's run is named when not ``home_run``),
    at most ``width`` columns, ending in an ellipsis where it is cut.

    An item shows its name (``memory:profile.home_city``) and as much of its text as fits.
    """
    label = _label(node, width, home_run, name)
    label.truncate(width, overflow="ellipsis")
    return label


def _label(node: EvidenceNode, width: int, home_run: str | None, name: str | None) -> Text:
    if node.node == SHOWN_ABOVE:
        return Text(f"({node.count} more items of this context, shown above)", style="dim italic")
    if node.node == "stage":
        label = Text()
        label.append("◆ ", style=STAGE_COLOURS.get(node.stage_kind or "", ""))
        label.append(visible(node.stage_kind or "stage"), style="bold " + STAGE_COLOURS.get(node.stage_kind or "", ""))
        if node.stage_name and node.stage_name != node.stage_kind:
            label.append(f" {visible(node.stage_name)}")
        if node.run_id != home_run:
            label.append(f"  of {short_id(node.run_id)}", style="dim")
        if node.seen:
            label.append("  (walked above)", style="dim italic")
        return label
    origin = node.origin
    colour = ORIGIN_COLOURS.get(origin.kind if origin else "", "")
    label = Text()
    label.append(f"{visible(name) if name else kind_label(node.item_kind or 'item')}: ", style=f"dim {colour}")
    tail = ""
    if origin is not None and origin.kind != OriginKind.STAGE and not (name and origin.source and origin.source in name):
        tail = f"  ← {kind_label(origin.kind)}" + (f" {visible(origin.source)}" if origin.source else "")
    room = max(12, width - len(label.plain) - len(tail))
    label.append(one_line(node.text or "(not stored)", room), style=colour)
    if tail:
        label.append(tail, style=f"bold {colour}")
    return label


def is_source(node: EvidenceNode) -> bool:
    """True for an item that came from outside the run's stages (user, memory, prompt, file, hook)."""
    return node.node == "item" and node.origin is not None and node.origin.kind not in (
        OriginKind.STAGE, OriginKind.CONFIG)


class EvidenceTree(Tree[EvidenceNode]):
    """The evidence tree; ``n``/``N`` move between the items that came from outside the run."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # (the why screen's header says "n jumps to them"; in the footer it pushed `? Keys` past 80 columns)
        Binding("n", "next_source", "Next source", show=False),
        Binding("N", "previous_source", "Prev source", show=False),
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("y", "copy_node", "Copy text", show=False),
    ]

    class NodeChosen(Message):
        """Enter on a node: go to the stage it names."""

        def __init__(self, node: EvidenceNode) -> None:
            super().__init__()
            self.node = node

    DEFAULT_CSS = """
    EvidenceTree { scrollbar-size-horizontal: 0; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("evidence", id=id)
        self.names: dict[str, str] = {}
        self.show_root = True
        self.auto_expand = False

    def show(self, evidence: Evidence, names: dict[str, str] | None = None) -> None:
        """Fill the tree from ``evidence``; ``names`` (hash -> item name) label the items of the run.

        Each label takes the width the tree leaves it at its depth (the guides take four columns a
        level), so what is cut ends in an ellipsis instead of at the edge.
        """
        self.clear()
        names = names or {}
        self.names = names
        root = evidence.root
        width = (self.size.width or self.app.size.width) - 2
        prefix = "why: "  # after the root's two columns of toggle ("▼ ")
        self.root.set_label(Text.assemble(
            (prefix, "bold"), node_label(root, width - 2 - len(prefix), name=names.get(root.item_hash or ""))))
        self.root.data = root

        def add(parent: TreeNode[EvidenceNode], node: EvidenceNode, depth: int) -> None:
            for child in node.shown():  # a run of items shown above is one line
                label = node_label(child, max(20, width - 4 * depth - 2), root.run_id, names.get(child.item_hash or ""))
                if child.children:
                    branch = parent.add(label, data=child, expand=depth < _EXPAND_DEPTH)
                    add(branch, child, depth + 1)
                else:
                    parent.add_leaf(label, data=child)

        add(self.root, root, 1)
        self.root.expand()
        self.cursor_line = 0

    def _in_order(self) -> list[TreeNode[EvidenceNode]]:
        """Every node, expanded or not, in the order the tree shows them."""
        found: list[TreeNode[EvidenceNode]] = []

        def visit(node: TreeNode[EvidenceNode]) -> None:
            found.append(node)
            for child in node.children:
                visit(child)

        visit(self.root)
        return found

    def _jump(self, step: int) -> None:
        nodes = self._in_order()
        here = nodes.index(self.cursor_node) if self.cursor_node in nodes else 0
        if step > 0:
            ahead = nodes[here + 1:] + nodes[:here + 1]
        else:
            ahead = list(reversed(nodes[:here])) + list(reversed(nodes[here:]))
        target = next((n for n in ahead if n.data is not None and is_source(n.data)), None)
        if target is None:
            self.notify("every item here was produced by a stage of a run", timeout=3)
            return
        parent = target.parent
        while parent is not None:
            parent.expand()
            parent = parent.parent
        self.call_after_refresh(self.move_cursor, target)

    def action_next_source(self) -> None:
        """Move to the next item that came from outside the run's stages."""
        self._jump(1)

    def action_previous_source(self) -> None:
        """Move to the previous item that came from outside the run's stages."""
        self._jump(-1)

    def action_copy_node(self) -> None:
        """Copy the text of the item (or the id of the stage) under the cursor."""
        node = self.cursor_node.data if self.cursor_node is not None else None
        if node is None:
            return
        text = node.text if node.node == "item" and node.text is not None else (node.stage_id or node.item_hash or "")
        self.app.copy_to_clipboard(text)
        self.notify(f"copied {len(text)} characters", timeout=2)

    def on_tree_node_selected(self, event: Tree.NodeSelected[EvidenceNode]) -> None:
        event.stop()
        if event.node.data is not None:
            self.post_message(self.NodeChosen(event.node.data))

"""The memory window of a rebuilt run, moved by reference: it leaves out exactly what the recording says it did.

Each recorded inference lists every message its window left out (by reference: the stored item and
its origin). A rebuilt agent's memory leaves out, call by call, the messages with those references
and keeps every other one, so a re-run without an edit sends exactly the recorded snapshots
whatever window made them (oldest first or not, however many it dropped). Messages a re-run makes
anew are kept: a window keeps the newest. A counterfactual may restore left-out messages into the
window and edit what each call sees.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Sequence

from tracer import ContextItem, Origin

from .._memory import ConversationMemory

#: edit(n, kept) -> kept: changes what the n-th model call (0-based) sees of the conversation.
WindowEdit = Callable[[int, list[ContextItem]], list[ContextItem]]
#: What identifies a message across a recording and its re-run: the item, and the earlier run and
#: stage that produced it (None for what the run itself produced: a re-run gives those new origins).
MessageKey = tuple[str, str | None, str | None]


def message_key(item_hash: str, origin: Origin, history_runs: Collection[str]) -> MessageKey:
    """The key of a message with ``origin``; ``history_runs`` are the runs before the recorded one."""
    if origin.run_id is not None and origin.run_id in history_runs:
        return item_hash, origin.run_id, origin.stage_id
    return item_hash, None, None


class RecordedWindowMemory(ConversationMemory):
    """Conversation memory whose window leaves out, call by call, the messages the recording's did.

    ``left_out[n]`` holds the keys of what the n-th recorded call left out (calls past the
    recording leave out what the last one did); ``restored`` keys are let back in; ``edit`` (a
    counterfactual's) then changes what the call sees.
    """

    def __init__(self, left_out: Sequence[Counter[MessageKey]], history_runs: Collection[str], *,
                 restored: Collection[MessageKey] = (), edit: WindowEdit | None = None) -> None:
        super().__init__(max_tokens=10**12)
        self.left_out = list(left_out)
        self.history_runs = frozenset(history_runs)
        self.restored = frozenset(restored)
        self.edit = edit
        self.calls = 0

    def context(self, conversation_id: str) -> tuple[list[ContextItem], list[ContextItem]]:
        """The recorded window for this call, edited when an edit is set."""
        n = self.calls
        self.calls += 1
        messages = self.require(conversation_id).messages
        kept: list[ContextItem] = []
        dropped: list[ContextItem] = []
        if not self.left_out:
            kept = list(messages)
        else:
            leave = Counter(self.left_out[min(n, len(self.left_out) - 1)])
            for ci in messages:  # the oldest of equal messages go first, as a window drops them
                key = message_key(ci.item.hash, ci.origin, self.history_runs)
                if leave[key] > 0 and key not in self.restored:
                    leave[key] -= 1
                    dropped.append(ci)
                else:
                    kept.append(ci)
        if self.edit is not None:
            kept = self.edit(n, kept)
        return kept, dropped

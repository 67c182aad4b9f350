"""The redaction policy of a host that requires a token (:func:`hosting.cli.host_redaction`)."""

from __future__ import annotations

from typing import Any

from tracer import RedactionPolicy


class HostTokenPolicy(RedactionPolicy):
    """The default policy, and the host's own token masked wherever it appears (a client may paste
    it into a message; a short one, or one without "Bearer ", escapes the default patterns). The
    stored description names it instead of holding it."""

    def describe(self) -> dict[str, Any]:
        described = super().describe()
        described["patterns"] = [*described["patterns"][:-1], "<the host's --token>"]
        return described


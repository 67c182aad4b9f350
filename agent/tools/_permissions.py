"""Who may run which tool, on which paths and hosts, how often: the :class:`PermissionChecker`.

The check runs in a fixed sequence and the first rule that decides names itself in the result:

 1. the tool's rule: the policy's entry for it, else one derived from the tool's ``category``
 2. no rule at all: denied (``unknown_tool``)
 3. the user's permissions (their own, or the policy's default)
 4. ``denied_tools``: denied
 5. ``allowed_tools``: the level and category checks are skipped
 6. ``level``: the user's level must reach the tool's (none < read < write < execute < admin)
 7. ``category``: the tool's category must be one the user may use
 8. ``path``: each path argument of a file tool must resolve inside an allowed root
 9. ``host``: each URL or host argument of a network tool must be an allowed host
10. ``rate_limit`` / ``global_rate_limit``: per user and tool, and per user over all tools, in a
    60-second sliding window
11. ``confirmation``: the tool needs a person's yes (the run pauses ``awaiting``)

``check`` decides without counting; ``record_usage`` counts an allowed call in the windows.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from ..errors import UserError
from ._context import ToolContext
from ._ratelimit import SlidingWindow
from ._rules import (
    HOST_ARGUMENTS,
    PATH_ARGUMENTS,
    argument_values,
    host_allowed,
    host_of,
    normalise_host,
    path_inside,
    resolve_path,
)
from ._tool import Tool


class PermissionLevel(enum.IntEnum):
    """How much a user may do, in ascending privilege."""

    NONE = 0
    READ = 1
    WRITE = 2
    EXECUTE = 3
    ADMIN = 4

    @classmethod
    def of(cls, value: PermissionLevel | str | int) -> PermissionLevel:
        """A level from its name (``"write"``) or number."""
        if isinstance(value, str):
            try:
                return cls[value.upper()]
            except KeyError:
                raise UserError(f"unknown permission level {value!r}; use one of "
                                f"{', '.join(m.name.lower() for m in cls)}") from None
        return cls(value)


#: tool categories and the level each needs unless a tool rule says otherwise
CATEGORIES: dict[str, PermissionLevel] = {
    "file_read": PermissionLevel.READ,
    "network_read": PermissionLevel.READ,
    "memory": PermissionLevel.READ,
    "file_write": PermissionLevel.WRITE,
    "network_write": PermissionLevel.WRITE,
    "custom": PermissionLevel.WRITE,
    "code_execute": PermissionLevel.EXECUTE,
    "system": PermissionLevel.ADMIN,
}
FILE_CATEGORIES = frozenset({"file_read", "file_write"})
NETWORK_CATEGORIES = frozenset({"network_read", "network_write"})
META_CATEGORY = "meta"  # search_tools, get_tool_help, use_tool: they reach nothing by themselves


@dataclass(frozen=True)
class ToolRule:
    """How one tool is governed: its category, the level it needs, confirmation, a rate limit.

    ``level`` defaults to the category's (see :data:`CATEGORIES`). ``rate_limit``: calls per
    user per minute (None: only the global limit). ``path_arguments`` / ``host_arguments``: which
    arguments the path rule (file categories) and host rule (network categories) read.
    """

    category: str
    level: PermissionLevel | None = None
    requires_confirmation: bool = False
    rate_limit: int | None = None
    path_arguments: tuple[str, ...] = PATH_ARGUMENTS
    host_arguments: tuple[str, ...] = HOST_ARGUMENTS
    _path_names: frozenset[str] = field(init=False, repr=False, compare=False, default=frozenset())
    _host_names: frozenset[str] = field(init=False, repr=False, compare=False, default=frozenset())

    def __post_init__(self) -> None:
        object.__setattr__(self, "_path_names", frozenset(self.path_arguments))
        object.__setattr__(self, "_host_names", frozenset(self.host_arguments))
        if self.category not in CATEGORIES and self.category != META_CATEGORY:
            raise UserError(f"unknown tool category {self.category!r}; use one of {', '.join(CATEGORIES)}")
        if self.level is None:
            object.__setattr__(self, "level", CATEGORIES.get(self.category, PermissionLevel.NONE))
        else:
            object.__setattr__(self, "level", PermissionLevel.of(self.level))
        if self.rate_limit is not None and self.rate_limit < 0:
            raise UserError(f"a rate limit must be >= 0 calls per minute, got {self.rate_limit}")


@dataclass(frozen=True)
class UserPermissions:
    """What one user (or every user without their own entry) may do.

    ``allowed_paths``: roots file tools may reach; None means the workspace only. ``allowed_hosts``:
    hosts network tools may call (``*.example.com`` for subdomains); None means any host.
    ``calls_per_minute`` overrides the policy's global limit for this user.
    """

    level: PermissionLevel = PermissionLevel.READ
    categories: frozenset[str] = frozenset({"file_read", "network_read", "memory"})
    allowed_tools: frozenset[str] = frozenset()
    denied_tools: frozenset[str] = frozenset()
    allowed_paths: tuple[str, ...] | None = None
    allowed_hosts: tuple[str, ...] | None = None
    calls_per_minute: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "level", PermissionLevel.of(self.level))
        for name in ("categories", "allowed_tools", "denied_tools"):
            object.__setattr__(self, name, frozenset(getattr(self, name)))
        unknown = set(self.categories) - set(CATEGORIES)
        if unknown:
            raise UserError(f"unknown tool categories {sorted(unknown)}; use some of {', '.join(CATEGORIES)}")
        if self.allowed_paths is not None:
            object.__setattr__(self, "allowed_paths", tuple(os.path.realpath(p) for p in self.allowed_paths))
        if self.allowed_hosts is not None:
            object.__setattr__(self, "allowed_hosts", tuple(_host_pattern(h) for h in self.allowed_hosts))


@dataclass(frozen=True)
class PermissionPolicy:
    """The rules a checker applies: tool rules, per-user permissions and a default, a global limit."""

    tools: Mapping[str, ToolRule] = field(default_factory=dict)
    users: Mapping[str, UserPermissions] = field(default_factory=dict)
    default: UserPermissions = field(default_factory=UserPermissions)
    global_rate_limit: int | None = 60


@dataclass(frozen=True)
class PermissionDecision:
    """The result of a check: the outcome and the rule that decided it.

    ``outcome`` is ``allowed``, ``denied``, ``rate_limited`` or ``needs_confirmation``; ``rule``
    names the step (``denied_tools``, ``level``, ``path``, ``global_rate_limit``, ...; ``allowed``
    when every step passed).
    """

    outcome: str
    rule: str
    reason: str = ""
    tool: str = ""
    user: str | None = None
    retry_after: float | None = None

    @property
    def allowed(self) -> bool:
        """True when the call may run now."""
        return self.outcome == "allowed"

    @property
    def requires_confirmation(self) -> bool:
        """True when the call may run once a person approves it."""
        return self.outcome == "needs_confirmation"

    def to_dict(self) -> dict[str, Any]:
        """The decision as recorded on the tool stage."""
        out: dict[str, Any] = {"decision": self.outcome, "rule": self.rule, "tool": self.tool, "user": self.user}
        if self.reason:
            out["reason"] = self.reason
        if self.retry_after is not None:
            out["retry_after_s"] = round(self.retry_after, 3)
        return out


ANONYMOUS = "anonymous"
_ALLOWED_CACHE = 16_384  # allowed decisions remembered per checker (tools x users)


class PermissionChecker:
    """Applies a :class:`PermissionPolicy` to tool calls (see the module docstring for the sequence).

    ``clock`` (seconds, monotonic) drives the rate-limit windows; tests pass a fake one.
    """

    def __init__(self, policy: PermissionPolicy | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy or PermissionPolicy()
        self.windows = SlidingWindow(clock)
        self._workspace_roots: dict[str, tuple[str, ...]] = {}
        self._derived: dict[tuple[str, str | None, bool], ToolRule] = {}
        self._checks = 0
        self._allowed: dict[tuple[str, str | None, str], PermissionDecision] = {}

    # ------------------------------------------------------------------ the check

    def tool_rule(self, tool: Tool | str) -> ToolRule | None:
        """The rule for ``tool``: the policy's entry, else one derived from its category (None: unknown)."""
        name = tool if isinstance(tool, str) else tool.name
        rule = self.policy.tools.get(name)
        if rule is not None or isinstance(tool, str) or tool.category is None:
            return rule
        key = (name, tool.category, tool.requires_confirmation)
        derived = self._derived.get(key)
        if derived is None:
            if tool.category not in CATEGORIES and tool.category != META_CATEGORY:
                return None
            derived = self._derived[key] = ToolRule(tool.category, requires_confirmation=tool.requires_confirmation)
        return derived

    def user_permissions(self, user_id: str | None) -> UserPermissions:
        """The permissions of ``user_id``: their own entry, else the policy's default."""
        return self.policy.users.get(user_id or ANONYMOUS, self.policy.default)

    def check(self, tool: Tool | str, context: ToolContext | None = None,
              arguments: dict[str, Any] | None = None) -> PermissionDecision:
        """Decide whether ``tool`` may run with ``arguments`` for the context's user (nothing is counted)."""
        ctx = context or _NO_CONTEXT
        name = tool if isinstance(tool, str) else tool.name
        user_id = ctx.user_id
        # 1-2: the tool's rule
        rule = self.tool_rule(tool)
        if rule is None:
            return PermissionDecision("denied", "unknown_tool", f"{name} has no permission rule and no category, "
                                      f"so it is denied; give it a category or a rule in the policy", name, user_id)
        if rule.category == META_CATEGORY:
            return self._allow(name, user_id, "meta_tool")
        # 3: the user's permissions
        user = self.user_permissions(user_id)
        who = user_id or ANONYMOUS
        # 4-5: denied and allowed tools
        if name in user.denied_tools:
            return PermissionDecision("denied", "denied_tools", f"{name} is in the denied tools of user {who}",
                                      name, user_id)
        if name not in user.allowed_tools:
            # 6: level
            assert rule.level is not None
            if user.level < rule.level:
                return PermissionDecision(
                    "denied", "level", f"{name} needs level {rule.level.name.lower()}; user {who} has "
                    f"{user.level.name.lower()}", name, user_id)
            # 7: category
            if rule.category not in user.categories:
                return PermissionDecision(
                    "denied", "category", f"{name} is a {rule.category} tool; user {who} may use "
                    f"{', '.join(sorted(user.categories)) or 'no categories'}", name, user_id)
        args = arguments or {}
        # 8: paths
        if rule.category in FILE_CATEGORIES:
            refused = self._path_refusal(rule, user, args, ctx.workspace)
            if refused is not None:
                return PermissionDecision("denied", "path", refused, name, user_id)
        # 9: hosts
        if rule.category in NETWORK_CATEGORIES and user.allowed_hosts is not None:
            refused = _host_refusal(rule, user.allowed_hosts, args)
            if refused is not None:
                return PermissionDecision("denied", "host", refused, name, user_id)
        # 10: rate limits
        if rule.rate_limit is not None:
            wait = self.windows.retry_after(f"{who}\x00{name}", rule.rate_limit)
            if wait is not None:
                return PermissionDecision(
                    "rate_limited", "rate_limit", f"user {who} may call {name} {rule.rate_limit} times a minute; "
                    f"try again in {wait:.0f} s", name, user_id, wait)
        limit = user.calls_per_minute if user.calls_per_minute is not None else self.policy.global_rate_limit
        if limit is not None:
            wait = self.windows.retry_after(who, limit)
            if wait is not None:
                return PermissionDecision(
                    "rate_limited", "global_rate_limit", f"user {who} may make {limit} tool calls a minute; "
                    f"try again in {wait:.0f} s", name, user_id, wait)
        # 11: confirmation
        if rule.requires_confirmation and not ctx.confirmed:
            return PermissionDecision("needs_confirmation", "confirmation",
                                      f"{name} runs only after a person confirms it", name, user_id)
        return self._allow(name, user_id, "allowed_tools" if name in user.allowed_tools else "allowed")

    def _allow(self, name: str, user_id: str | None, rule: str) -> PermissionDecision:
        key = (name, user_id, rule)
        allowed = self._allowed.get(key)  # decisions are immutable: an allowed one is made once
        if allowed is None:
            if len(self._allowed) > _ALLOWED_CACHE:
                self._allowed.clear()
            allowed = self._allowed[key] = PermissionDecision("allowed", rule, "", name, user_id)
        return allowed

    def record_usage(self, tool: Tool | str, context: ToolContext | None, decision: PermissionDecision,
                     arguments: dict[str, Any] | None = None) -> None:
        """Count an allowed call in the user's windows (a refused or unconfirmed call counts nothing)."""
        if not decision.allowed or decision.rule == "meta_tool":
            return
        name = tool if isinstance(tool, str) else tool.name
        who = (context or _NO_CONTEXT).user_id or ANONYMOUS
        rule = self.tool_rule(tool)
        if rule is not None and rule.rate_limit is not None:
            self.windows.add(f"{who}\x00{name}", rule.rate_limit)
        user = self.user_permissions(who)
        limit = user.calls_per_minute if user.calls_per_minute is not None else self.policy.global_rate_limit
        if limit is not None:
            self.windows.add(who, limit)
        self._checks += 1
        if self._checks % 4096 == 0:
            self.windows.forget_idle()

    # ------------------------------------------------------------------ changing the policy

    def update_policy(self, **changes: Any) -> PermissionPolicy:
        """Replace fields of the policy (``tools``, ``users``, ``default``, ``global_rate_limit``)."""
        try:
            self.policy = dataclasses.replace(self.policy, **changes)
        except TypeError as exc:
            raise UserError(f"update_policy: {exc}; the fields are tools, users, default, global_rate_limit") from None
        self._derived.clear()
        return self.policy

    def add_user_permissions(self, user_id: str, permissions: UserPermissions | None = None,
                             **fields: Any) -> UserPermissions:
        """Give ``user_id`` their own permissions (a :class:`UserPermissions`, or its fields)."""
        perms = permissions if permissions is not None else UserPermissions(**fields)
        self.update_policy(users={**self.policy.users, user_id: perms})
        return perms

    def set_tool_rule(self, name: str, rule: ToolRule) -> None:
        """Govern the tool called ``name`` by ``rule``."""
        self.update_policy(tools={**self.policy.tools, name: rule})

    # ------------------------------------------------------------------ rules

    def _path_refusal(self, rule: ToolRule, user: UserPermissions, args: dict[str, Any],
                      workspace: str | None) -> str | None:
        values = argument_values(args, rule._path_names)
        if not values:
            return None
        workspace_roots = self._roots_of(workspace)
        roots = user.allowed_paths if user.allowed_paths is not None else workspace_roots
        if not roots:
            return "no workspace or allowed paths are configured, so file tools may reach no path"
        base = workspace_roots[0] if workspace_roots else None
        for arg, value in values:
            if value.startswith("~"):  # the home folder only if the tool expands it: not guessed at
                return f"argument {arg} ({value!r}) starts with ~: give the path itself, not one a tool may expand"
            if value[:5].lower() == "file:":  # a file URL is checked as the path it names
                value = unquote(urlsplit(value).path)
            try:
                resolved = resolve_path(value, base)
            except (ValueError, OSError) as exc:
                return f"argument {arg} ({value!r}) is not a usable path: {exc}"
            if not path_inside(resolved, roots):
                shown = f" (it resolves to {resolved})" if resolved != value else ""
                return f"argument {arg} ({value!r}){shown} is outside the allowed paths: {', '.join(roots)}"
        return None

    def _roots_of(self, workspace: str | None) -> tuple[str, ...]:
        if workspace is None:
            return ()
        roots = self._workspace_roots.get(workspace)
        if roots is None:
            roots = self._workspace_roots[workspace] = (os.path.realpath(workspace),)
        return roots


_NO_CONTEXT = ToolContext()


def _host_pattern(pattern: str) -> str:
    wildcard = pattern.startswith("*.")
    host = normalise_host(pattern[2:] if wildcard else pattern)
    return f"*.{host}" if wildcard else host


def _host_refusal(rule: ToolRule, allowed: Iterable[str], args: dict[str, Any]) -> str | None:
    allowed = tuple(allowed)
    for arg, value in argument_values(args, rule._host_names):
        try:
            host = host_of(value)
        except ValueError as exc:
            return f"argument {arg} ({value[:200]!r}) is refused: {exc}"
        if not host_allowed(host, allowed):
            return f"host {host} (argument {arg}) is not an allowed host: {', '.join(allowed) or 'none'}"
    return None

"""Ready-made permission checkers: the default (read-only), a restrictive and a permissive one."""

from __future__ import annotations

import os
from typing import Any

from ._permissions import CATEGORIES, PermissionChecker, PermissionLevel, PermissionPolicy, UserPermissions


def permission_checker(policy: PermissionPolicy | None = None, **changes: Any) -> PermissionChecker:
    """The default checker: every user may read (files, network, memory), nothing more; 60 calls a minute.

    ``changes`` replace fields of the policy (``tools``, ``users``, ``default``, ``global_rate_limit``).
    """
    checker = PermissionChecker(policy)
    if changes:
        checker.update_policy(**changes)
    return checker


def restrictive_checker() -> PermissionChecker:
    """A read-only checker: file reads and memory only, 30 calls a minute, every write denied."""
    return PermissionChecker(PermissionPolicy(
        default=UserPermissions(level=PermissionLevel.READ, categories=frozenset({"file_read", "memory"})),
        global_rate_limit=30,
    ))


def permissive_checker() -> PermissionChecker:
    """Full access: admin level, every category, every path and host; only the global limit (60/min)."""
    return PermissionChecker(PermissionPolicy(
        default=UserPermissions(level=PermissionLevel.ADMIN, categories=frozenset(CATEGORIES),
                                allowed_paths=(os.sep,), allowed_hosts=None),
    ))

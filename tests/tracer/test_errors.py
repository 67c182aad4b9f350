"""Quoting a wrong value in an error message: whole when short, cut with an ellipsis when long."""

from __future__ import annotations

from tracer.errors import quoted


def test_a_long_value_is_cut_with_an_ellipsis_a_short_one_quoted_whole() -> None:
    assert quoted("a b") == "'a b'"
    assert quoted("x" * 80) == repr("x" * 80)
    assert quoted("x" * 5000) == repr("x" * 79 + "…")
    assert quoted(12, limit=5) == "'12'"

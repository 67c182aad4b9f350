"""How the explorer writes numbers, times and previews."""

from __future__ import annotations

from explorer import _format as fmt
from tracer import one_line


def test_tokens_costs_and_durations_fit_their_columns() -> None:
    assert [fmt.tokens(n) for n in (812, 12_400, 250_000, 3_100_000)] == ["812", "12.4k", "250k", "3.1M"]
    assert [fmt.cost_short(c) for c in (0.0, 0.004, 0.12, 12.5)] == ["-", "<$0.01", "$0.12", "$12.50"]
    assert [fmt.cost(c) for c in (0.0, 0.000064, 1.5)] == ["-", "$0.00006", "$1.50"]
    assert [fmt.duration(0, d) for d in (0.012, 1.44, 125)] == ["12ms", "1.4s", "2m05s"]
    assert fmt.duration(0, None) == ""


def test_previews_are_one_line_and_cut_with_an_ellipsis() -> None:
    assert one_line("a\n  b\tc", 10) == "a b c"
    assert one_line("abcdefghij", 5) == "abcd…"
    assert one_line("abc", 0) == "" and one_line("abc", -3) == ""  # no room, no ellipsis either
    assert one_line("日本語のテキスト", 7) == "日本語…"  # cut by terminal columns (a wide character takes two)
    assert not hasattr(fmt, "one_line"), "the explorer uses tracer's one_line, not a copy of its own"
    assert fmt.head("support-0042", 10) == "support-0…" and fmt.head(None, 5) == "-"


def test_times_are_local_and_short(monkeypatch: object) -> None:
    assert fmt.clock(1741942800.0) == "03-14 09:00:00"  # the tests run in UTC
    assert fmt.clock(1741942800.0, seconds=False) == "03-14 09:00"

"""The explorer screenshots in ``docs/screenshots/`` are the snapshot tests' own SVGs, never stale copies.

``make screenshots`` updates the snapshots and copies them (``python tests/explorer/test_screenshots.py``);
this test fails when a copy differs from the snapshot it was taken from.
"""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = Path(__file__).resolve().parent / "__snapshots__"
DOCS = ROOT / "docs" / "screenshots"

#: docs/screenshots/<name> <- the snapshot test's SVG it is a copy of
SCREENSHOTS = {
    "explorer-runs.svg": "test_snapshots/test_runs[120x40].svg",
    "explorer-run_snapshot.svg": "test_snapshots/test_run_snapshot[120x40].svg",
    "explorer-run_parallel_tools.svg": "test_snapshots/test_run_parallel_tools.svg",
    "explorer-team_run.svg": "test_snapshots/test_team_run[120x40].svg",
    "explorer-why.svg": "test_snapshots/test_why[120x40].svg",
    "explorer-blame_verdict.svg": "test_snapshots/test_blame_verdict.svg",
    "explorer-help.svg": "test_snapshots/test_help.svg",
    "explorer-sandbox.svg": "test_snapshots/test_sandbox.svg",
    "explorer-chat.svg": "test_snapshots/test_chat.svg",
    "explorer-host.svg": "test_host/test_host_panel.svg",
}


def copy_screenshots() -> list[str]:
    """Copy every snapshot to its place in docs/screenshots; returns the names copied."""
    DOCS.mkdir(parents=True, exist_ok=True)
    for name, snapshot in SCREENSHOTS.items():
        shutil.copyfile(SNAPSHOTS / snapshot, DOCS / name)
    return sorted(SCREENSHOTS)


def test_the_docs_screenshots_are_the_snapshot_tests_svgs() -> None:
    stale = [name for name, snapshot in SCREENSHOTS.items()
             if not (DOCS / name).exists() or (DOCS / name).read_bytes() != (SNAPSHOTS / snapshot).read_bytes()]
    assert not stale, f"docs/screenshots out of date: {stale}; run `make screenshots`"
    used = {p.name for p in DOCS.glob("*.svg")}
    assert used == set(SCREENSHOTS), f"screenshots no snapshot test makes: {sorted(used - set(SCREENSHOTS))}"


if __name__ == "__main__":
    print("copied:", ", ".join(copy_screenshots()))

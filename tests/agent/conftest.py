"""Fixtures shared by the agent's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tracer import Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """A store on a new file, closed after the test."""
    with Store.open(tmp_path / "store.duckdb") as opened:
        yield opened

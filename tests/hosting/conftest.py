"""Fixtures for the host tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tracer import Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """A fresh footprint store file."""
    s = Store.open(tmp_path / "fp.duckdb")
    yield s
    s.close()

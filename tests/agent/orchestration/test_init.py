"""The package front: ``__all__`` lists every public name the package defines, sorted."""

from __future__ import annotations

import agent.orchestration as orchestration


def test_all_is_sorted_and_complete() -> None:
    machinery = {"TYPE_CHECKING", "annotations", "lazy_exports"}  # the lazy front's own (tests/test_package_fronts.py)
    public = {name for name in dir(orchestration) if not name.startswith("_")} - machinery
    modules = {name for name in public if type(getattr(orchestration, name)).__name__ == "module"}
    assert sorted(orchestration.__all__, key=str.lower) == sorted(public - modules, key=str.lower)
    assert list(orchestration.__all__) == sorted(orchestration.__all__, key=lambda n: (n[0].islower(), n))

"""Package fronts that import each public name from its module on first use (PEP 562).

``tracer``, ``agent``, ``hosting``, ``explorer`` and subpackages of theirs re-export names from many
modules; importing them all up front made every ``footprint COMMAND --help`` load DuckDB, the whole
framework and the web stack. (It lives in ``tracer``, the bottom layer, so that every package can use
it.) A front lists its names twice: in a ``TYPE_CHECKING`` block, which is what mypy and editors read
(so a misspelt name is still an error), and in a name -> module table the program reads
(tests/test_package_fronts.py checks that they agree).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package`` for ``exports`` (a name -> the module,
    relative to ``package``, that defines it). A name is imported once, then is an ordinary global."""
    namespace = vars(sys.modules[package])

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__

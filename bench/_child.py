"""Measuring in a process of its own: a bench script runs itself again as a child, and the child
prints its figures as JSON on the last line of its output.

A fresh interpreter per case keeps one case's imports, caches, allocator and peak memory out of the
next one's figures. The parent calls :func:`run_child`; the child ends with :func:`print_figures`.
``opcodes.py`` and ``peers.py`` take the same hidden ``--child --mode MODE`` (:func:`add_child_options`)
and measure a coroutine in a temporary directory (:func:`serve_child`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any


def run_child(script: str, *args: str, env: Mapping[str, str] | None = None,
              timeout: float | None = None) -> dict[str, Any]:
    """Run ``script`` with ``args`` in a fresh interpreter; the figures its last line of output holds.

    A child that fails stops the benchmark, showing the child's stderr (one past ``timeout`` seconds
    raises :class:`subprocess.TimeoutExpired`).
    """
    result = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, check=False,
                            env=env, timeout=timeout)
    if result.returncode != 0:
        raise SystemExit(f"bench child {Path(script).name} {' '.join(args)} failed:\n{result.stderr}")
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def print_figures(figures: Mapping[str, Any]) -> None:
    """The child's last line: its figures for :func:`run_child`."""
    print(json.dumps(figures), flush=True)


def add_child_options(parser: argparse.ArgumentParser) -> None:
    """The hidden ``--child`` flag (this process is a child: measure one case) and its ``--mode``."""
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)


def serve_child(measure: Callable[[Path], Awaitable[Mapping[str, Any]]], *, prefix: str) -> None:
    """Run ``measure`` on a temporary directory (named ``prefix...``, removed after) and print its figures."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        figures = asyncio.run(measure(Path(tmp)))
    print_figures(figures)

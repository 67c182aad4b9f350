"""Ids sort by creation time and never repeat."""

from __future__ import annotations

import os
import subprocess
import sys

from tracer import new_id


def test_ids_sort_in_creation_order_and_are_unique() -> None:
    ids = [new_id("s") for _ in range(20_000)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert all(i.startswith("s-") for i in ids)


def test_two_processes_in_the_same_millisecond_differ() -> None:
    code = "from tracer import new_id; print(new_id('r'))"
    here = new_id("r")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert here.rsplit("-", 1)[1][4:] != other.rsplit("-", 1)[1][4:]  # the process tags


def test_a_forked_child_gets_its_own_tag() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.write(write, new_id("r").encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(read, 100).decode()
    assert child.rsplit("-", 1)[1][4:] != new_id("r").rsplit("-", 1)[1][4:]

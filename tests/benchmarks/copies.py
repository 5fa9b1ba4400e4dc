"""The cleaner benchmarks' inputs and baseline: fresh copies of a generated log dir, and ``cp -r`` timed.

The benchmarks run as scripts (``python tests/benchmarks/bench_x.py``): each puts the repository's root on
``sys.path`` to import this module as ``tests.benchmarks.copies``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

__all__ = ["cp_seconds", "fresh_copy"]


def fresh_copy(source: Path, target: Path) -> Path:
    """A copy of ``source`` written back to disk before it is used (``os.sync``): the kernel's writeback of
    a GiB of copied pages would otherwise run during the cleaning timed on it, on the same cores."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)
    os.sync()
    return target


def cp_seconds(source: Path, target: Path) -> float:
    """``cp -r source target`` timed after a ``sync`` (no earlier write, the generated source or the last
    copy, is still being written back while it runs); ``target`` is removed first, its pages reused."""
    shutil.rmtree(target, ignore_errors=True)
    os.sync()
    started = time.perf_counter()
    subprocess.run(["cp", "-r", str(source), str(target)], check=True)
    return time.perf_counter() - started

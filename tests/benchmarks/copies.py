"""The cleaner benchmarks' inputs and baseline: fresh copies of a generated log dir, ``cp -r`` timed, and
pages freed just before a timed run.

Every timed run, the baseline's included, starts on pages the kernel freed a moment before: ``cp_seconds``
removes its last copy first, and a cleaning run removes a copy of its input (``pages_to_free``,
``free_pages``) just before its clock starts. This project's VM hands memory that stays free back to its
host (free page reporting: ``page_reporting_order`` on the kernel's command line, up to 1 GiB kept back);
a page the host took back costs 2.4-4.5 µs at its next first touch, where writing a page already touched
takes 0.2 µs. A broker host's memory is full of page cache, so its new pages come from reclaim, never
from a hypervisor: runs on recycled pages are the ones that compare, with each other and with ``cp``.

The benchmarks run as scripts (``python tests/benchmarks/bench_x.py``): each puts the repository's root on
``sys.path`` to import this module as ``tests.benchmarks.copies``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

__all__ = ["cp_seconds", "free_pages", "fresh_copy", "pages_to_free"]


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


def pages_to_free(source: Path, scratch: Path) -> Path:
    """A copy of ``source`` at ``scratch``, to be removed (``free_pages``) right before a timed run: the
    pages the run takes (its writes, its key map) are then the ones this copy held, as ``cp_seconds`` gets
    them (see the module docstring)."""
    return fresh_copy(source, scratch)


def free_pages(scratch: Path) -> None:
    """Remove a ``pages_to_free`` copy: its pages go back to the kernel, which hands them out next."""
    shutil.rmtree(scratch, ignore_errors=True)

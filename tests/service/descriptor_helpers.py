"""Shared by the descriptor tests: count this process's open descriptors, lower its limit for a while, and
build a log dir of many small segments with ``gen``."""

from __future__ import annotations

import os
import resource
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from service.base.clock import ManualClock
from service.shell.tools.gen import GenOptions, generate
from service.storage.clean_shutdown import remove_clean_shutdown_marker
from service.storage.log_files import RECOVERY_POINT_CHECKPOINT

__all__ = [
    "HEADROOM_FDS",
    "SEGMENTS_PER_PARTITION",
    "fd_limit",
    "make_unclean",
    "many_segments",
    "open_fds",
]

NOW_MS = 1_700_000_000_000
HEADROOM_FDS = 64  # descriptors a test may open beyond those already open: far fewer than the segments
SEGMENTS_PER_PARTITION = 50  # one 10-record batch (~1.2 KB) per segment, as --segment-bytes 1300 gives


def open_fds() -> int:
    """How many descriptors this process holds now."""
    return len(os.listdir("/proc/self/fd"))


@contextmanager
def fd_limit(headroom: int = HEADROOM_FDS) -> Iterator[None]:
    """Lower this process's soft RLIMIT_NOFILE to ``headroom`` above the highest descriptor now open."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    highest = max(int(name) for name in os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 1 + headroom, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def many_segments(log_dir: Path, *, partitions: int = 4, topic: str = "fds") -> Path:
    """``partitions`` × ``SEGMENTS_PER_PARTITION`` segments of one batch each, closed cleanly by ``gen``."""
    generate(
        GenOptions(
            log_dir=log_dir,
            topics=(topic,),
            partitions=partitions,
            records=10 * SEGMENTS_PER_PARTITION,
            batch_size=10,
            segment_bytes=1300,
            timestamp_start_ms=NOW_MS,
        ),
        clock=ManualClock(NOW_MS),
    )
    return log_dir


def make_unclean(log_dir: Path) -> None:
    """As after a crash before the first checkpoint: no marker, no recovery points (recover everything)."""
    remove_clean_shutdown_marker(log_dir)
    (log_dir / RECOVERY_POINT_CHECKPOINT).unlink()

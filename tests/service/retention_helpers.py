"""Factories for the retention, explain and log-manager tests: real logs on disk, a manual clock.

Kafka's record sizes, as its tests use them: ``plain(b"test")`` is a 72-byte batch, ``keyed(b"test",
b"test")`` 76 bytes, a keyed record with a one-digit key and value 70 bytes. Records without a timestamp age
from their segment's ``.log`` mtime, which the file system sets from the wall clock: tests that append them
pin the mtimes to the manual clock with :func:`set_mtimes`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from service.base.clock import ManualClock
from service.core.log_manager import LogManager
from service.core.tasks import ManualTaskScheduler
from service.storage.loader import load_partition_log
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.records import Record

__all__ = [
    "START_MS",
    "append_keyed",
    "append_plain",
    "bases",
    "log_config",
    "new_partition_log",
    "ranges",
    "retention_runner",
    "set_mtimes",
]

START_MS = 1_700_000_000_000


def log_config(*, policy: str = "delete", **fields: Any) -> LogConfig:
    """Kafka's defaults but for ``fields``; ``policy`` is ``cleanup.policy`` (``compact,delete``)."""
    return LogConfig(cleanup_policy=frozenset(policy.split(",")), **fields)


def new_partition_log(
    directory: Path, clock: ManualClock, *, policy: str = "delete", **fields: Any
) -> PartitionLog:
    """Create (or reopen after an unclean stop) the partition dir ``directory`` with these topic settings."""
    directory.mkdir(parents=True, exist_ok=True)
    return load_partition_log(directory, log_config(policy=policy, **fields), clock=clock).log


def retention_runner(clock: ManualClock, scheduler: ManualTaskScheduler) -> LogManager:
    """A log manager over no log dir: ``delete_old_segments(log)`` runs retention on any log given."""
    return LogManager([], lambda _topic: LogConfig(), clock=clock, scheduler=scheduler)


def append_plain(log: PartitionLog, count: int, *, timestamp: int = -1, value: bytes = b"test") -> None:
    """``count`` appends of Kafka's ``plain(value)``: one record, null key (72 bytes for a 4-byte value)."""
    for _ in range(count):
        log.append_records([Record(0, timestamp, None, value)])


def append_keyed(
    log: PartitionLog, count: int, *, timestamp: int = -1, key: bytes = b"test", value: bytes = b"test"
) -> None:
    """``count`` appends of Kafka's ``keyed(key, value)`` (76 bytes for ``test``/``test``)."""
    for _ in range(count):
        log.append_records([Record(0, timestamp, key, value)])


def bases(log: PartitionLog) -> list[int]:
    return [s.base_offset for s in log.segments]


def ranges(log: PartitionLog) -> list[tuple[int, int]]:
    """(first, last) offset of every segment; the active one ends at the log end offset − 1."""
    starts = bases(log)
    ends = [*starts[1:], log.log_end_offset]
    return [(start, end - 1) for start, end in zip(starts, ends, strict=True)]


def set_mtimes(log: PartitionLog, mtime_ms: int) -> None:
    """Set every segment's ``.log`` mtime (what segments without record timestamps age from)."""
    for segment in log.segments:
        segment.set_last_modified_ms(mtime_ms)
